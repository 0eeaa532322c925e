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
shows most) at 1 and 8 connections, rounds interleaved (the two gateways'
order alternating from round to round), medians.

Load figures on a 2-core machine wander by ±15 % from one run to the next, more
than the cost being measured; so the app's own cost is also measured
in-process (``app_cost``): the same request handed straight to the ASGI
application many thousand times in each mode, no network and no load
generator, over an in-memory cluster (the cached path never reaches it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
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


def run(seconds: float = 5.0, rounds: int = 4, connections: tuple[int, ...] = (1, 8),
        cluster: LocalCluster | None = None, pods: int = 10_000, log=print,
        app_requests: int = 20_000) -> dict:
    """Measure (seeding a cluster of our own unless one is given); return the results."""
    if cluster is None:
        with LocalCluster() as own:
            seed(KubeAPI.for_cluster(own), pods=pods, configmaps=0, log=log)
            return run(seconds, rounds, connections, own, pods, log, app_requests)
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
                    order = list(gateways.items())
                    for mode, gw in (order if r % 2 == 0 else order[::-1]):
                        url = gw.url + query.path
                        if r == 0:
                            wrk(url, conns, 1, token)  # warm-up (and the reviews, once)
                        result = wrk(url, conns, seconds, token, gw.pid)
                        runs.setdefault(f"{query.name}|{conns}|{mode}", []).append(result)
                        log(f"round {r + 1} {query.name} c{conns} --authz {mode}: "
                            f"{result['requests_per_second']:.0f} req/s, "
                            f"p50 {result['p50_ms']:.2f} ms")
        log("in-process cost ...")
        return {"runs": runs, "rounds": rounds, "seconds": seconds,
                "connections": list(connections), "queries": [q.name for q in queries],
                "app_cost": app_cost(app_requests)}
    finally:
        for gw in gateways.values():
            gw.stop()
        shutil.rmtree(workdir, ignore_errors=True)


_TOKEN = "0123456789abcdef0123456789abcdef"


async def _app_cost(mode: str, path: str, query: str, requests: int) -> float:
    """Microseconds per request of the application alone, for ``path``, in ``mode``."""
    from app.launch.demo import seed_workload
    from app.main import build_factory, create_app
    from app.settings import Settings
    from control_plane.fake import FakeCluster

    class Table:  # every review allowed: only the cached path is measured
        def review_token(self, token, audiences):
            return {"authenticated": True, "user": {"username": "admin", "groups": ["g"]}}

        def review_access(self, spec):
            return {"allowed": True}

    fake = FakeCluster()
    seed_workload(fake, "demo-shop")
    settings = Settings(authz=mode)
    app = create_app(settings, build_factory(settings, lister_watcher_func=fake.lister_watcher,
                                             discovery=fake.discovery()), reviewer=Table())
    messages: asyncio.Queue = asyncio.Queue()
    await messages.put({"type": "lifespan.startup"})
    started: list = []

    async def life_send(message: dict) -> None:
        started.append(message)

    lifespan = asyncio.create_task(app({"type": "lifespan"}, messages.get, life_send))
    while not started:
        await asyncio.sleep(0.01)
    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(),
             "query_string": query.encode(), "root_path": "", "scheme": "http", "http_version": "1.1",
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8080),
             "headers": [(b"host", b"127.0.0.1:8080"), (b"user-agent", b"bench"),
                         (b"authorization", b"Bearer " + _TOKEN.encode())]}
    codes: list[int] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            codes.append(message["status"])

    for _ in range(200):  # loads the cache, makes the reviews
        await app(dict(scope), receive, send)
    codes.clear()
    began = time.perf_counter()
    for _ in range(requests):
        await app(dict(scope), receive, send)
    took = time.perf_counter() - began
    if set(codes) != {200}:
        raise RuntimeError(f"{path} --authz {mode}: answers {set(codes)}")
    await messages.put({"type": "lifespan.shutdown"})
    await lifespan
    return took / requests * 1e6


def app_cost(requests: int = 20_000, rounds: int = 5) -> dict:
    """Per-request microseconds in each mode (medians of alternating rounds), by query."""
    from app.launch.demo import seed_workload
    from control_plane.fake import FakeCluster

    fake = FakeCluster()
    seed_workload(fake, "demo-shop")
    first = sorted(o["metadata"]["name"] for o in fake.get(
        "/api/v1/namespaces/demo-shop/pods")["items"])[0]
    paths = {"list by label, all namespaces": "/api/v1/pods?labelSelector=app%3Dweb",
             "one object by name": f"/api/v1/namespaces/demo-shop/pods/{first}"}
    out: dict = {}
    for what, path in paths.items():
        path, _, query = path.partition("?")
        samples: dict[str, list[float]] = {m: [] for m in MODES}
        for r in range(rounds):
            for mode in (MODES if r % 2 == 0 else MODES[::-1]):
                samples[mode].append(asyncio.run(_app_cost(mode, path, query, requests)))
        out[what] = {m: _median(v) for m, v in samples.items()}
    return out


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


def app_cost_table(results: dict) -> str:
    lines = ["| request | `--authz none` | `--authz kubernetes` | added |", "|---|---:|---:|---:|"]
    for what, cost in results["app_cost"].items():
        lines.append(f"| {what} | {cost['none']:.1f} µs | {cost['kubernetes']:.1f} µs | "
                     f"{cost['kubernetes'] - cost['none']:+.1f} µs |")
    return "\n".join(lines)


def _cpu_per_request(row: dict) -> float:
    """The gateway's CPU microseconds per answer in one measurement (steadier than req/s)."""
    return row.get("server_cpu_percent", 0.0) / 100 / row["requests_per_second"] * 1e6


def table(results: dict) -> str:
    lines = ["| query | conn | `--authz none` req/s | CPU/req | `--authz kubernetes` req/s | "
             "CPU/req | kubernetes ÷ none | CPU added |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for (name, conns), ratio in ratios(results).items():
        cells = []
        cpu = {}
        for mode in MODES:
            rows = results["runs"][f"{name}|{conns}|{mode}"]
            cpu[mode] = _median([_cpu_per_request(r) for r in rows])
            cells.append(f"{_median([r['requests_per_second'] for r in rows]):,.0f}")
            cells.append(f"{cpu[mode]:.0f} µs")
        lines.append(f"| {name} | {conns} | {' | '.join(cells)} | {ratio:.3f}× | "
                     f"{cpu['kubernetes'] - cpu['none']:+.1f} µs |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.authz",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (make bench, or apt-get install wrk)")
    results = run(args.seconds, args.rounds, pods=args.pods)
    print(table(results))
    print(app_cost_table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
