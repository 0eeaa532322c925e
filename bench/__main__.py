"""Every benchmark in one run, written to ``docs/benchmarks.md``.

    .venv/bin/python -m bench [--out docs/benchmarks.md] [--quick]

One kube-apiserver + etcd, seeded once with 10,000 Pods in 100 namespaces and
1,000 ConfigMaps; then the initial sync (``bench.sync_pods``), the queries
(``bench.queries``, with py-spy profiles of Q1 and Q5), authorization's cost
(``bench.authz``: ``--authz kubernetes`` vs ``none``), decisions from the cluster's RBAC
followed vs a review per access (``bench.local_authz``), the change fan-out
(``bench.fanout``, with what one write costs the kernel alone: ``bench.send_cost``),
what ``--workers N`` costs (``bench.workers``), the queries for
dashboards (``bench.dashboard``), a merged list of three clusters (``bench.merged``), today's
clients' watch-list and ``--metadata-only`` (``bench.clients``) and
how cost grows with objects and subscribers (``bench.scale``, on an API server of its own),
what keeping history costs and gives (``bench.past``, on an API server and a PostgreSQL of
its own), each measuring
side by side in the same run. ``--quick`` runs everything at toy sizes, to check the machinery.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from bench import (authz, clients, dashboard, fanout, local_authz, merged, past, queries,
                   scale, send_cost, sync_pods, workers)
from bench.report import render
from bench.seed import seed
from control_plane.cluster import LocalCluster
from control_plane.kubeapi import KubeAPI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    parser.add_argument("--json", type=Path, default=None, help="also write the raw results here")
    parser.add_argument("--quick", action="store_true", help="toy sizes: check the machinery only")
    parser.add_argument("--render", type=Path, default=None, metavar="JSON",
                        help="measure nothing: write the report from a run's --json results "
                             "(after editing bench/notes.md)")
    args = parser.parse_args(argv)
    if args.render is not None:
        args.out.write_text(render(_with_large_scale(json.loads(args.render.read_text()),
                                                     args.out)))
        print(f"wrote {args.out}")
        return 0
    size = dict(pods=10_000, configmaps=1_000, sync_rounds=3, query_seconds=5.0, query_rounds=3,
                authz_rounds=4, authz_requests=20_000, local_callers=1000, revocations=10,
                sweep_streams=10_000, subscribers=1000, rate=10.0,
                fan_seconds=60.0, settle=25.0, cpu_rounds=3, send_seconds=10.0, workers_seconds=60.0,
                workers_rate=50.0,
                merged_rounds=15, clients_rounds=5, scale_pods=(1_000, 10_000, 50_000),
                scale_subscribers=(100, 1_000, 5_000, 10_000), scale_seconds=30.0,
                scale_settle=10.0, past_changes=100_000)
    if args.quick:
        size = dict(pods=200, configmaps=20, sync_rounds=1, query_seconds=1.0, query_rounds=1,
                    authz_rounds=1, authz_requests=500, local_callers=20, revocations=2,
                    sweep_streams=10, subscribers=10, rate=5.0,
                    fan_seconds=2.0, settle=3.0, cpu_rounds=2, send_seconds=1.0, workers_seconds=2.0,
                    workers_rate=5.0,
                    merged_rounds=2, clients_rounds=1, scale_pods=(100, 300),
                    scale_subscribers=(5, 10),
                    scale_seconds=2.0, scale_settle=3.0, past_changes=2_000)
    command = ("python -m bench" + (" --quick" if args.quick else "") + f" --out {args.out}"
               + (f" --json {args.json}" if args.json else ""))
    started = time.monotonic()
    results: dict = {"size": size, "command": command, "date": time.strftime("%Y-%m-%d")}
    with LocalCluster() as cluster, tempfile.TemporaryDirectory(prefix="kcg-bench-") as tmp:
        print(f"seeding {size['pods']} pods and {size['configmaps']} configmaps ...", flush=True)
        seed(KubeAPI.for_cluster(cluster), pods=size["pods"], configmaps=size["configmaps"])
        print("initial sync ...", flush=True)
        results["sync"] = sync_pods.run(size["pods"], size["sync_rounds"], cluster=cluster)
        print("queries ...", flush=True)
        results["queries"] = queries.run(seconds=size["query_seconds"], rounds=size["query_rounds"],
                                         warm_up=0 if args.quick else 1,
                                         profile=Path(tmp) / "profiles", cluster=cluster)
        print("authorization ...", flush=True)
        results["authz"] = authz.run(seconds=size["query_seconds"], rounds=size["authz_rounds"],
                                     cluster=cluster, app_requests=size["authz_requests"])
        print("authorization from RBAC followed ...", flush=True)
        results["local_authz"] = local_authz.run(size["local_callers"], size["revocations"],
                                                 cluster=cluster, streams=size["sweep_streams"])
        print("fan-out ...", flush=True)
        results["fanout"] = fanout.run(size["subscribers"], size["rate"], size["fan_seconds"],
                                       also_apiserver_scenario=True, settle=size["settle"],
                                       cluster=cluster, cpu_rounds=size["cpu_rounds"])
        # what one write per delivery costs the kernel alone, at each scenario's fan-out
        results["send_cost"] = {
            fanout.scenario_name(count, rate): send_cost.run(count, rate, size["send_seconds"])
            for count, rate in ((size["subscribers"], size["rate"]), (200, 50.0))}
        print("workers ...", flush=True)
        results["workers"] = workers.run(cluster, size["pods"], size["workers_seconds"],
                                         size["workers_rate"])
        print("queries for dashboards ...", flush=True)
        results["dashboard"] = dashboard.run(cluster, seconds=size["query_seconds"],
                                             rounds=size["query_rounds"])
        print("several clusters: one merged list ...", flush=True)
        results["merged"] = merged.run(cluster, size["pods"], rounds=size["merged_rounds"])
        print("today's clients: watch-list, --metadata-only ...", flush=True)
        results["clients"] = clients.run(cluster, size["pods"], rounds=size["clients_rounds"])
    print("how cost grows: objects, then subscribers ...", flush=True)  # on a cluster of its own
    results["scale"] = scale.run(size["scale_pods"], size["scale_subscribers"],
                                 fan_seconds=size["scale_seconds"],
                                 settle=size["scale_settle"],
                                 query_seconds=size["query_seconds"])
    print("history: its cost and what it gives ...", flush=True)  # a cluster and store of its own
    results["past"] = past.run(size["pods"], size["past_changes"], size["query_seconds"],
                               size["query_rounds"])
    results["seconds"] = round(time.monotonic() - started)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(_with_large_scale(results, args.out)))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print(f"wrote {args.out} ({results['seconds']} s)")
    return 0


def _with_large_scale(results: dict, out: Path) -> dict:
    """The results with ``make bench-scale``'s (``scale.json`` beside ``out``) and ``make
    bench-history``'s (``past_restart.json``), where they ran."""
    large = out.parent / "scale.json"
    if large.exists():
        results = {**results, "scale_large": json.loads(large.read_text())}
    restart = out.parent / "past_restart.json"
    if restart.exists():
        results = {**results, "past_restart": json.loads(restart.read_text())}
    return results


if __name__ == "__main__":
    sys.exit(main())
