"""Before and after: the plain queries on two versions of the gateway, side by side in one run.

    .venv/bin/python -m bench.ab BEFORE_TREE [AFTER_TREE]

Each tree is a checkout of the project (``git worktree add --detach DIR COMMIT``);
AFTER defaults to this one. Both gateways run as their own processes on one
seeded API server (10,000 Pods), Pods pre-warmed; wrk drives Q1–Q5 at 1 and 8
connections, interleaved, two rounds, medians. For a change that must not slow
what it does not touch. ``--authz``: both gateways authorize every caller (``--authz
kubernetes``), wrk sending the admin's token, so the cost of a known caller's decision is in
the comparison too.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from bench.procs import start_gateway
from bench.queries import QUERIES, wrk
from bench.seed import seed
from control_plane.cluster import LocalCluster
from control_plane.kubeapi import KubeAPI

__all__ = ["main"]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path, nargs="?", default=Path.cwd())
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--queries", nargs="+", default=[q.name for q in QUERIES],
                        choices=[q.name for q in QUERIES], help="only these (default: all)")
    parser.add_argument("--authz", action="store_true",
                        help="both gateways with --authz kubernetes, wrk with a token")
    args = parser.parse_args()
    queries = [q for q in QUERIES if q.name in args.queries]
    here = Path.cwd()
    with LocalCluster() as cluster, tempfile.TemporaryDirectory() as tmp:
        seed(KubeAPI.for_cluster(cluster), pods=10_000, configmaps=0, log=lambda *a: None)
        gateways = {}
        for side, tree in (("before", args.before), ("after", args.after)):
            os.chdir(tree)  # the gateway process imports the tree it starts in
            gateways[side] = start_gateway(cluster, Path(tmp) / side, "--prewarm", "pods",
                                           "--sync-timeout", "120",
                                           *(("--authz", "kubernetes") if args.authz else ()))
        os.chdir(here)
        token = cluster.admin.token if args.authz else ""
        runs: dict = {}
        try:
            for r in range(2):
                for query in queries:
                    for side, gateway in gateways.items():
                        for conns in (1, 8):
                            if r == 0:
                                wrk(gateway.url + query.path, conns, 1, token)
                            result = wrk(gateway.url + query.path, conns, args.seconds, token,
                                         gateway.pid)
                            runs.setdefault((query.name, conns, side), []).append(
                                result["requests_per_second"])
        finally:
            for gateway in gateways.values():
                gateway.stop()
    print("| query | conns | before req/s | after req/s | after ÷ before |")
    print("|---|---:|---:|---:|---:|")
    for query in queries:
        for conns in (1, 8):
            before = statistics.median(runs[(query.name, conns, "before")])
            after = statistics.median(runs[(query.name, conns, "after")])
            print(f"| {query.name} | {conns} | {before:,.0f} | {after:,.0f} | {after / before:.2f}× |")


if __name__ == "__main__":
    main()
