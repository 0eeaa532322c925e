"""Dashboard queries on the 10,000-Pod workload, and what a dashboard does without them.

    .venv/bin/python -m bench.dashboard [--pods 10000] [--seconds 5] [--json FILE]

The API server has no sort, substring filter, projection or counts: a
dashboard built on it lists every Pod and does the work itself (the Kubernetes
Dashboard's way). So each gateway query (D1–D4) is measured beside that
alternative, the full list from the API server's watch cache
(``resourceVersion=0``), with the same load tool in the same run; and beside
the gateway's own full list, to show what the query saves. First-time cost —
the first answer of a fresh gateway process, which reads the paths' values
out of every object — is measured separately, on a gateway started for each
query; then, on a warm gateway, the first answer after one Pod changed (what a
dashboard refreshing under churn pays: the kept answer is void, the columns
re-read one object); warm figures are wrk's (1 connection, p50), nothing
changing. The plain queries' figures
are ``bench.queries``'s; a query for dashboards adds nothing to them (it only
runs when its parameters are given).
"""

from __future__ import annotations

import argparse
import json
import ssl
import statistics
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.procs import start_gateway
from bench.queries import wrk
from bench.seed import seed
from control_plane.cluster import LocalCluster
from control_plane.kubeapi import KubeAPI

__all__ = ["DASHBOARD_QUERIES", "after_a_change_ms", "run", "table"]


@dataclass(frozen=True)
class DashboardQuery:
    name: str
    what: str
    query: str


def _q(**params: str) -> str:
    return urllib.parse.urlencode(params)


DASHBOARD_QUERIES = (
    DashboardQuery("D1", "a page of 50 sorted by `metadata.creationTimestamp` descending",
                   _q(sortBy="-metadata.creationTimestamp", limit="50")),
    DashboardQuery("D2", "`filter=metadata.name~pod-001` (substring)", _q(filter="metadata.name~pod-001")),
    DashboardQuery("D3", "`fields=metadata.name,status.phase` on every pod",
                   _q(fields="metadata.name,status.phase")),
    DashboardQuery("D4", "`summary=status.phase,metadata.namespace`",
                   _q(summary="status.phase,metadata.namespace")),
)
_PODS = "/api/v1/pods"


def _first_answer_ms(gateway_url: str, query: str) -> float:
    """One answer's time on a connection opened beforehand (a client and a TLS context cost
    tens of milliseconds to make: not the gateway's)."""
    with httpx.Client(base_url=gateway_url, timeout=120) as client:
        client.get("/healthz").raise_for_status()  # the connection, opened
        started = time.perf_counter()
        answer = client.get(f"{_PODS}?{query}")
        took = (time.perf_counter() - started) * 1000
    answer.raise_for_status()
    return took


def after_a_change_ms(gateway_url: str, kube: KubeAPI, query: str, times: int = 10) -> float:
    """Median time of the first answer after one Pod changed (the kept answer is void)."""
    took = []
    for n in range(times):
        kube.patch("/api/v1/namespaces/bench-000/pods/pod-00000",
                   {"metadata": {"annotations": {"bench/touch": str(time.time()) + str(n)}}})
        time.sleep(0.3)  # the gateway's watch brings it
        took.append(_first_answer_ms(gateway_url, query))
    return statistics.median(took)


def run(cluster: LocalCluster, seconds: float = 5.0, rounds: int = 2, log=print) -> dict:
    """Measure D1–D4 warm and cold, the full lists beside them; return the results."""
    token = cluster.admin.token
    workdir = Path(tempfile.mkdtemp(prefix="kcg-dashboard-"))
    args = ("--prewarm", "pods", "--sync-timeout", "120")
    results: dict = {"queries": {}, "full": {}, "seconds": seconds, "rounds": rounds}
    for query in DASHBOARD_QUERIES:  # cold: a fresh process per query
        cold = start_gateway(cluster, workdir / f"cold-{query.name}", *args)
        try:
            results["queries"].setdefault(query.name, {})["first_ms"] = _first_answer_ms(
                cold.url, query.query)
        finally:
            cold.stop()
    gateway = start_gateway(cluster, workdir / "warm", *args)
    try:
        verify = ssl.create_default_context(cafile=str(cluster.primary.ca_file))
        verify.check_hostname = False
        api_full = f"{cluster.primary.url}{_PODS}?resourceVersion=0"
        full_api = httpx.get(api_full, headers={"Authorization": f"Bearer {token}"},
                             verify=verify, timeout=120).content
        full_gw = httpx.get(f"{gateway.url}{_PODS}", timeout=120).content
        results["full"] = {"apiserver_bytes": len(full_api), "gateway_bytes": len(full_gw)}
        for query in DASHBOARD_QUERIES:
            body = httpx.get(f"{gateway.url}{_PODS}?{query.query}", timeout=120)
            body.raise_for_status()
            doc = body.json()
            results["queries"][query.name].update(
                bytes=len(body.content),
                objects=len(doc.get("items", [])) if "items" in doc else doc.get("total"))
            wrk(f"{gateway.url}{_PODS}?{query.query}", 1, 1)  # warm-up
        runs: dict = {}
        for _ in range(rounds):
            for query in DASHBOARD_QUERIES:
                runs.setdefault(query.name, []).append(
                    wrk(f"{gateway.url}{_PODS}?{query.query}", 1, seconds, "", gateway.pid))
            runs.setdefault("full gateway", []).append(
                wrk(f"{gateway.url}{_PODS}", 1, seconds * 2, "", gateway.pid))
            runs.setdefault("full apiserver", []).append(
                wrk(api_full, 1, seconds * 2, token, cluster.primary.process.pid))
        kube = KubeAPI.for_cluster(cluster)
        for query in DASHBOARD_QUERIES:
            results["queries"][query.name]["changed_ms"] = after_a_change_ms(
                gateway.url, kube, query.query)
        for name, rows in runs.items():
            target = results["queries"][name] if name in results["queries"] else results["full"]
            prefix = "" if name in results["queries"] else name.split()[1] + "_"
            target[prefix + "p50_ms"] = statistics.median(r["p50_ms"] for r in rows)
            target[prefix + "p99_ms"] = statistics.median(r["p99_ms"] for r in rows)
            target[prefix + "rps"] = statistics.median(r["requests_per_second"] for r in rows)
            log(f"{name}: p50 {target[prefix + 'p50_ms']:.2f} ms")
    finally:
        gateway.stop()
    return results


def table(results: dict) -> str:
    """The markdown table of a run."""
    full = results["full"]
    api_ms, gw_ms = full["apiserver_p50_ms"], full["gateway_p50_ms"]
    lines = [
        f"Full list of every pod, the alternative a dashboard has without these queries: "
        f"API server {api_ms:.1f} ms p50 ({full['apiserver_bytes'] / 2**20:.1f} MiB), gateway "
        f"{gw_ms:.1f} ms ({full['gateway_bytes'] / 2**20:.1f} MiB).",
        "",
        "| query | objects | bytes | first answer (cold) | after one change | p50 warm | p99 warm | "
        "req/s | vs the API server's full list | target ≤ 5 ms p50 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for query in DASHBOARD_QUERIES:
        row = results["queries"][query.name]
        ratio = api_ms / row["p50_ms"] if row["p50_ms"] else 0
        lines.append(
            f"| {query.name} {query.what} | {row['objects']} | {row['bytes']:,} "
            f"({100 * row['bytes'] / full['gateway_bytes']:.1f} % of the full list) | "
            f"{row['first_ms']:.0f} ms | {row.get('changed_ms', 0):.1f} ms | {row['p50_ms']:.2f} ms | "
            f"{row['p99_ms']:.2f} ms | "
            f"{row['rps']:.0f} | {ratio:.0f}× faster | {'met' if row['p50_ms'] <= 5 else 'missed'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dashboard", description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    with LocalCluster() as cluster:
        seed(KubeAPI.for_cluster(cluster), pods=args.pods, configmaps=0)
        results = run(cluster, args.seconds, args.rounds)
    results["command"] = ("python -m bench.dashboard" + f" --pods {args.pods} --seconds {args.seconds:g}"
                          f" --rounds {args.rounds}" + (f" --json {args.json}" if args.json else ""))
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
