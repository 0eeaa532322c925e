"""What authorizing every caller costs: the same queries on two gateways, side by side, same run.

    .venv/bin/python -m bench.authz [--pods 10000] [--seconds 5] [--rounds 3]

Two ``kube-cache-gateway serve`` processes over the same API server, plain
HTTP, Pods pre-warmed: one with ``--authz none``, one with ``--authz
kubernetes`` (each request's bearer token reviewed by a ``TokenReview``, each
access by a ``SubjectAccessReview``, both kept in the gateway's caches). wrk
sends the same token to both, so after the first request the second gateway
answers every one from its decision caches: the figure is the cached path's
cost, which is what a busy gateway pays. Q1 (a label query over all
namespaces) and Q4 (one Pod by name, the cheapest answer, where a fixed cost
shows most) at 1 and 8 connections, rounds interleaved, medians.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

import httpx

from bench.procs import start_gateway
from bench.queries import QUERIES, wrk
from bench.seed import seed
from control_plane.cluster import LocalCluster
from control_plane.kubeapi import KubeAPI

__all__ = ["MODES", "run", "table"]

MODES = ("none", "kubernetes")
_MEASURED = ("Q1", "Q4")


def _median(values: list[float]) -> float:
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def run(seconds: float = 5.0, rounds: int = 3, connections: tuple[int, ...] = (1, 8),
        cluster: LocalCluster | None = None, pods: int = 10_000, log=print) -> dict:
    """Measure (seeding a cluster of our own unless one is given); return the results."""
    if cluster is None:
        with LocalCluster() as own:
            seed(KubeAPI.for_cluster(own), pods=pods, configmaps=0, log=log)
            return run(seconds, rounds, connections, own, pods, log)
    workdir = Path(tempfile.mkdtemp(prefix="kcg-authz-bench-"))
    gateways = {}
    token = cluster.admin.token
    queries = [q for q in QUERIES if q.name in _MEASURED]
    try:
        for mode in MODES:
            gateways[mode] = start_gateway(cluster, workdir / mode, "--prewarm", "pods",
                                           "--sync-timeout", "120", "--authz", mode)
        anonymous = httpx.get(gateways["kubernetes"].url + queries[0].path, timeout=30)
        if anonymous.status_code != 401:
            raise RuntimeError(f"--authz kubernetes answered {anonymous.status_code} to no token")
        for query in queries:
            answers = {mode: httpx.get(gw.url + query.path, timeout=120,
                                       headers={"Authorization": f"Bearer {token}"}).content
                       for mode, gw in gateways.items()}
            if len(set(answers.values())) != 1:
                raise RuntimeError(f"{query.name}: the two gateways answer differently")
        runs: dict = {}
        for r in range(rounds):
            for query in queries:
                for conns in connections:
                    for mode, gw in gateways.items():
                        url = gw.url + query.path
                        if r == 0:
                            wrk(url, conns, 1, token)  # warm-up (and the reviews, once)
                        result = wrk(url, conns, seconds, token, gw.pid)
                        runs.setdefault(f"{query.name}|{conns}|{mode}", []).append(result)
                        log(f"round {r + 1} {query.name} c{conns} --authz {mode}: "
                            f"{result['requests_per_second']:.0f} req/s, "
                            f"p50 {result['p50_ms']:.2f} ms")
        return {"runs": runs, "rounds": rounds, "seconds": seconds,
                "connections": list(connections), "queries": [q.name for q in queries]}
    finally:
        for gw in gateways.values():
            gw.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def ratios(results: dict) -> dict[tuple[str, int], float]:
    """(query, connections) -> req/s with ``--authz kubernetes`` ÷ with ``none`` (medians)."""
    out = {}
    for name in results["queries"]:
        for conns in results["connections"]:
            rates = {mode: _median([r["requests_per_second"]
                                    for r in results["runs"][f"{name}|{conns}|{mode}"]])
                     for mode in MODES}
            out[name, conns] = rates["kubernetes"] / rates["none"]
    return out


def table(results: dict) -> str:
    lines = ["| query | conn | `--authz none` req/s | p50 | `--authz kubernetes` req/s | p50 | "
             "kubernetes ÷ none |", "|---|---:|---:|---:|---:|---:|---:|"]
    for (name, conns), ratio in ratios(results).items():
        cells = []
        for mode in MODES:
            rows = results["runs"][f"{name}|{conns}|{mode}"]
            cells.append(f"{_median([r['requests_per_second'] for r in rows]):,.0f}")
            cells.append(f"{_median([r['p50_ms'] for r in rows]):.2f} ms")
        lines.append(f"| {name} | {conns} | {' | '.join(cells)} | {ratio:.3f}× |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.authz",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (make bench, or apt-get install wrk)")
    results = run(args.seconds, args.rounds, pods=args.pods)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
