"""What keeping history costs and what it gives: the history store measured beside the present.

    .venv/bin/python -m bench.past [--pods 10000] [--changes 100000] [--seconds 5] [--rounds 3]

On an API server of its own, seeded with ``pods`` Pods (``bench.seed``), three gateways run
side by side, Pods pre-warmed: without history, with ``--history sqlite:///...`` and with
``--history postgresql://...`` (a PostgreSQL of the run's own, ``control_plane.postgres``).

1. **The hot path, history on ÷ off**: Q1–Q5 (``bench.queries``) at 1 and 8 connections on
   each gateway, rounds interleaved, while the API server takes 50 changes a second (the
   history is written meanwhile); and in process, what the recorder adds to each event a
   hub delivers (µs, with and without a recorder), the fan-out's only new work.
2. **Writes**: the store's own rate (50,000 changes of the seed's Pods written in the
   writer's batches, straight to SQLite and to PostgreSQL), and end to end: ``changes``
   patches through the API server as fast as it takes them, and how soon each gateway's
   store holds them all; the store's bytes per change.
3. **An Exact list of every Pod at a version ``changes`` changes old** (from before the
   patches), p50 of 20, beside a current list's p50 on the same gateway.
4. **A watch replay** from that version: every change since, then live — seconds to the
   last one, and the gateway's peak memory before and after.
5. **Restarts**: the SQLite gateway stopped and started again on its file, and a new
   gateway started on the PostgreSQL store while the first runs (a replica started later):
   seconds to ready, and the LISTs of Pods the API server answered meanwhile (its own
   ``apiserver_request_total``; goal: none).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import threading
import time
from pathlib import Path

import httpx
import orjson

from bench.procs import start_gateway, tree_cpu_seconds
from bench.queries import QUERIES, wrk
from bench.seed import pod, seed
from control_plane.cluster import LocalCluster
from control_plane.kubeapi import KubeAPI
from control_plane.postgres import LocalPostgres

__all__ = ["SIDES", "figures_table", "restart_run", "restart_targets", "restart_text", "run",
           "table", "targets"]

SIDES = ("off", "sqlite", "postgresql")
_LOAD_RATE = 50.0  # changes a second the API server takes while the queries run
# each gateway's CPU read over, under that load alone; and the wait after the baselines are
# written before anything is measured: in measurements' seconds (5 s: 20 and 30 s)
_CPU_MEASUREMENTS = 4.0
_SETTLE_MEASUREMENTS = 6.0


def _median(values: list[float]) -> float:
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def write_rate(url: str, changes: int = 50_000, batch: int = 500) -> dict:
    """The store's own write rate: ``changes`` of the seed's Pods (each Pod modified again
    and again, its previous version known, as the hub tells the writer) in batches."""
    from app.history.opening import open_store
    from app.history.store import ADDED, MODIFIED, Change

    made = []
    pods = min(10_000, changes)
    for k in range(changes):
        body = pod(k % pods)
        body["metadata"]["resourceVersion"] = str(k + 1)
        body["status"] = {"phase": "Running", "podIP": f"10.0.{k % 250}.{k % 200}"}
        meta = body["metadata"]
        made.append(Change(ADDED if k < pods else MODIFIED, k + 1, meta["namespace"],
                           meta["name"], time.time(), orjson.dumps(body),
                           k + 1 - pods if k >= pods else 0))
    store = open_store(url)
    store.create()
    began = time.perf_counter()
    for start in range(0, changes, batch):
        store.write("bench", [("core/v1/pods", c) for c in made[start:start + batch]], time.time())
    took = time.perf_counter() - began
    size = store.size_bytes()
    store.close()
    return {"changes": changes, "seconds": round(took, 2),
            "changes_per_second": round(changes / took),
            "bytes_per_change": round(size / changes),
            "object_bytes": round(sum(len(c.raw) for c in made) / changes)}


def recorder_cost(events: int = 50_000) -> dict:
    """µs a hub spends per delivered event with a recorder and without (in process)."""
    from app.cache.hub import EventHub
    from app.history.recorder import Recorder
    from informer_core.encoded import EncodedObject

    class Nowhere:  # the writer's inbox, without its thread: the loop's own cost alone
        epoch = 0

        def put(self, resource, op):
            pass

    objects = [EncodedObject(orjson.dumps(pod(i % 10_000))) for i in range(1000)]

    async def deliver(recorded: bool) -> float:
        hub = EventHub(10_000)
        if recorded:
            hub.recorder = Recorder(Nowhere(), "core/v1/pods")
        hub.settle("1")
        hub.mark_ready()
        began = time.perf_counter()
        for n in range(events):
            base = objects[n % len(objects)]
            body = orjson.loads(base.raw)
            body["metadata"]["resourceVersion"] = str(n + 2)
            hub.apply("update", EncodedObject(orjson.dumps(body)), base, str(n + 2))
        return (time.perf_counter() - began) / events * 1e6

    plain = _median([asyncio.run(deliver(False)) for _ in range(3)])
    recorded = _median([asyncio.run(deliver(True)) for _ in range(3)])
    return {"events": events, "without_us": round(plain, 2), "with_us": round(recorded, 2)}


def _pod_lists(kube: KubeAPI) -> int:
    total = 0
    for line in kube.text("/metrics").splitlines():
        if line.startswith("apiserver_request_total{") and 'resource="pods"' in line \
                and 'verb="LIST"' in line:
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def _patcher(kube: KubeAPI, pods: int, count: int | None, rate: float | None,
             stop: threading.Event, versions: list[int], workers: int = 8) -> list[threading.Thread]:
    """Threads patching Pods' annotations: ``count`` in all, or ``rate`` a second until
    ``stop``; each write's version appended to ``versions``."""
    counter = iter(range(10**9))
    lock = threading.Lock()

    def work() -> None:
        while not stop.is_set():
            with lock:
                n = next(counter)
            if count is not None and n >= count:
                return
            i = n % pods
            made = kube.patch(f"/api/v1/namespaces/bench-{i % 100:03d}/pods/pod-{i:05d}",
                              {"metadata": {"annotations": {"bench-change": str(n)}}})
            versions.append(int(made["metadata"]["resourceVersion"]))
            if rate:
                stop.wait(workers / rate)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(workers)]
    for thread in threads:
        thread.start()
    return threads


def _p50_ms(url: str, path: str, requests: int = 20) -> float:
    took = []
    with httpx.Client(timeout=120) as client:
        client.get(url + path).raise_for_status()
        for _ in range(requests):
            began = time.perf_counter()
            answer = client.get(url + path)
            took.append((time.perf_counter() - began) * 1000)
            answer.raise_for_status()
    return round(_median(took), 2)


def _peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _replay(url: str, version: int, expected: int) -> dict:
    """A watch from ``version``: seconds to its first event and to the ``expected``-th."""
    began = time.perf_counter()
    first = None
    count = 0
    with httpx.Client(timeout=600) as client, client.stream(
            "GET", f"{url}/api/v1/pods?watch=1&resourceVersion={version}") as answer:
        answer.raise_for_status()
        for line in answer.iter_lines():
            if not line:
                continue
            if first is None:
                first = time.perf_counter() - began
            if line.startswith('{"type":"ERROR"'):
                raise RuntimeError(f"the replay ended: {line[:300]}")
            count += 1
            if count >= expected:
                break
    return {"events": count, "first_s": round(first or 0.0, 3),
            "all_s": round(time.perf_counter() - began, 2)}


def _pid_of(pg: LocalPostgres) -> int:
    """The PostgreSQL server's postmaster (its backends are its children)."""
    return int((pg.dir / "data" / "postmaster.pid").read_text().split()[0])


def _cpu_percent(pids: dict[str, int], seconds: float) -> dict[str, float]:
    """Each process tree's CPU share over ``seconds`` (100 = one core)."""
    before = {name: tree_cpu_seconds(pid) for name, pid in pids.items()}
    time.sleep(seconds)
    return {name: round(100 * (tree_cpu_seconds(pid) - before[name]) / seconds, 1)
            for name, pid in pids.items()}


def _ready_seconds(cluster: LocalCluster, workdir: Path, *args: str) -> tuple[object, float]:
    began = time.monotonic()
    gateway = start_gateway(cluster, workdir, *args, ready_timeout=600)
    return gateway, round(time.monotonic() - began, 2)


def run(pods: int = 10_000, changes: int = 100_000, seconds: float = 5.0, rounds: int = 3,
        connections: tuple[int, ...] = (1, 8), log=print) -> dict:
    """Measure on a cluster and a PostgreSQL of its own; return the results."""
    workdir = Path(tempfile.mkdtemp(prefix="kcg-past-bench-"))
    results: dict = {"pods": pods, "changes": changes, "seconds": seconds, "rounds": rounds,
                     "connections": list(connections)}
    gateways: dict = {}
    try:
        with LocalCluster() as cluster, LocalPostgres() as pg:
            log("the store's own write rate ...")
            results["write_rate"] = {
                "sqlite": write_rate(f"sqlite:///{workdir}/rate.db"),
                "postgresql": write_rate(_database(pg, "rate"))}
            log(f"  {results['write_rate']}")
            results["recorder"] = recorder_cost()
            log(f"  recorder {results['recorder']}")
            kube = KubeAPI.for_cluster(cluster)
            seed(kube, pods=pods, configmaps=0, log=log)
            stores = {"sqlite": f"sqlite:///{workdir}/history.db",
                      "postgresql": _database(pg, "history")}
            common = ("--prewarm", "pods", "--sync-timeout", "600")
            for side in SIDES:
                extra = () if side == "off" else ("--history", stores[side])
                gateways[side] = start_gateway(cluster, workdir / side, *common, *extra,
                                               ready_timeout=600)
            # the baselines written, and what follows a first load settled (PostgreSQL's
            # autovacuum analyzes the new table): the figures below are the steady state's
            for side in SIDES[1:]:  # (each gateway's own version: see restart_run)
                url = gateways[side].url
                version = int(httpx.get(f"{url}/api/v1/pods?limit=1", timeout=60)
                              .json()["metadata"]["resourceVersion"])
                _until_kept(url, version, time.monotonic() + 600)
            time.sleep(_SETTLE_MEASUREMENTS * seconds)
            log("the hot path under 50 changes/s, history on and off ...")
            stop, versions = threading.Event(), []
            load = _patcher(kube, pods, None, _LOAD_RATE, stop, versions)
            runs: dict = {}
            try:
                time.sleep(2)
                results["cpu_under_load"] = _cpu_percent(
                    {side: gw.pid for side, gw in gateways.items()} | {"postgres": _pid_of(pg)},
                    _CPU_MEASUREMENTS * seconds)
                log(f"  CPU % under {_LOAD_RATE:g} changes/s, no queries: "
                    f"{results['cpu_under_load']}")
                for r in range(rounds):
                    for query in QUERIES:
                        for conns in connections:
                            order = list(SIDES) if r % 2 == 0 else list(SIDES)[::-1]
                            for side in order:
                                url = gateways[side].url + query.path
                                if r == 0:
                                    wrk(url, conns, 1)
                                result = wrk(url, conns, seconds, server_pid=gateways[side].pid)
                                runs.setdefault(f"{query.name}|{conns}|{side}", []).append(result)
                            log(f"  round {r + 1} {query.name} c{conns}: " + ", ".join(
                                f"{s} {runs[f'{query.name}|{conns}|{s}'][-1]['requests_per_second']:.0f}"
                                for s in SIDES) + " req/s")
            finally:
                stop.set()
                for thread in load:
                    thread.join()
            results["runs"] = runs
            before = int(kube.get("/api/v1/pods?limit=1")["metadata"]["resourceVersion"])
            time.sleep(2)
            log(f"{changes} changes through the API server ...")
            stop, versions = threading.Event(), []
            began = time.monotonic()
            for thread in _patcher(kube, pods, changes, None, stop, versions):
                thread.join()
            written_in = round(time.monotonic() - began, 1)
            last = max(versions) if versions else before
            kept = {}
            for side in ("sqlite", "postgresql"):
                kept[side] = _until_kept(gateways[side].url, last, time.monotonic() + 600)
            results["end_to_end"] = {"changes": len(versions), "api_server_seconds": written_in,
                                     "api_server_changes_per_second": round(len(versions) / written_in),
                                     "kept_after_last_write_seconds": {
                                         s: round(k - began - written_in, 2) for s, k in kept.items()}}
            log(f"  {results['end_to_end']}")
            results["exact"] = {}
            for side in ("sqlite", "postgresql"):
                url = gateways[side].url
                results["exact"][side] = {
                    "current_p50_ms": _p50_ms(url, "/api/v1/pods"),
                    "past_p50_ms": _p50_ms(url, f"/api/v1/pods?resourceVersion={before}"
                                                f"&resourceVersionMatch=Exact")}
            log(f"  exact {results['exact']}")
            results["replay"] = {}
            for side in ("sqlite", "postgresql"):
                pid = gateways[side].pid
                peak_before = _peak_mib(pid)
                replay = _replay(gateways[side].url, before, len(versions))
                replay.update(peak_before_mib=peak_before, peak_after_mib=_peak_mib(pid))
                results["replay"][side] = replay
            log(f"  replay {results['replay']}")
            results["restart"] = _restarts(cluster, kube, workdir, stores, common, gateways)
            log(f"  restart {results['restart']}")
            for gateway in gateways.values():
                gateway.stop()
            gateways.clear()
    finally:
        for gateway in gateways.values():
            gateway.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def _restarts(cluster: LocalCluster, kube: KubeAPI, workdir: Path, stores: dict[str, str],
              common: tuple[str, ...], gateways: dict) -> dict:
    """The SQLite gateway stopped and started on its file; a new gateway on the PostgreSQL
    store beside the running one; one without history, for comparison: seconds to ready and
    the LISTs of Pods the API server answered for each."""
    found = {}
    lists = _pod_lists(kube)
    gateways["sqlite"].stop()
    gateways["sqlite"], took = _ready_seconds(cluster, workdir / "sqlite-again", *common,
                                              "--history", stores["sqlite"])
    found["sqlite"] = {"ready_seconds": took, "pod_lists": _pod_lists(kube) - lists}
    lists = _pod_lists(kube)
    gateways["postgresql-replica"], took = _ready_seconds(
        cluster, workdir / "postgresql-replica", *common, "--history", stores["postgresql"])
    found["postgresql_new_replica"] = {"ready_seconds": took,
                                       "pod_lists": _pod_lists(kube) - lists}
    lists = _pod_lists(kube)
    gateways["off-again"], took = _ready_seconds(cluster, workdir / "off-again", *common)
    found["off"] = {"ready_seconds": took, "pod_lists": _pod_lists(kube) - lists}
    return found


def restart_run(pods: int = 150_000, log=print) -> dict:
    """Only the restarts, at ``pods`` Pods (``make bench-history``: 150,000, the Kubernetes
    scalability limit per cluster)."""
    workdir = Path(tempfile.mkdtemp(prefix="kcg-past-restart-"))
    gateways: dict = {}
    try:
        with LocalCluster() as cluster, LocalPostgres() as pg:
            kube = KubeAPI.for_cluster(cluster)
            seed(kube, pods=pods, configmaps=0, log=log)
            stores = {"sqlite": f"sqlite:///{workdir}/history.db",
                      "postgresql": _database(pg, "history")}
            common = ("--prewarm", "pods", "--sync-timeout", "1200")
            for side in SIDES[1:]:
                gateways[side] = start_gateway(cluster, workdir / side, *common, "--history",
                                               stores[side], ready_timeout=1200)
            for side in SIDES[1:]:  # (the gateway's own version: the API server's may be
                # another resource's, which a Pod watch hears of only at its next bookmark)
                url = gateways[side].url
                version = int(httpx.get(f"{url}/api/v1/pods?limit=1", timeout=60)
                              .json()["metadata"]["resourceVersion"])
                _until_kept(url, version, time.monotonic() + 600)
            found = _restarts(cluster, kube, workdir, stores, common, gateways)
            log(f"  restart at {pods:,} Pods: {found}")
            return {"pods": pods, "restart": found,
                    "command": f"python -m bench.past --restart-only --pods {pods}",
                    "date": time.strftime("%Y-%m-%d")}
    finally:
        for gateway in gateways.values():
            gateway.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _database(pg: LocalPostgres, name: str) -> str:
    pg.sql(f"CREATE DATABASE {name}")
    return pg.url.rsplit("/", 1)[0] + "/" + name


def _until_kept(url: str, version: int, deadline: float) -> float:
    """When the gateway's history holds ``version`` of Pods (its Exact list answers it)."""
    while time.monotonic() < deadline:
        answer = httpx.get(f"{url}/api/v1/pods?resourceVersion={version}&"
                           f"resourceVersionMatch=Exact&limit=1", timeout=60)
        if answer.status_code == 200:
            return time.monotonic()
        time.sleep(0.2)
    raise RuntimeError(f"{url}: the history never held {version}")


def table(results: dict) -> str:
    """The results as the Markdown ``docs/benchmarks.md`` shows."""
    lines = ["| query | conns | " + " | ".join(f"{s} req/s (p50 ms)" for s in SIDES)
             + " | sqlite ÷ off | postgresql ÷ off |", "|---|---|---|---|---|---|---|"]
    for query in QUERIES:
        for conns in results["connections"]:
            cells, rates = [], {}
            for side in SIDES:
                found = results["runs"].get(f"{query.name}|{conns}|{side}", [])
                rate = _median([r["requests_per_second"] for r in found])
                p50 = _median([r["p50_ms"] for r in found])
                rates[side] = rate
                cells.append(f"{rate:,.0f} ({p50:.2f})")
            lines.append(f"| {query.name} | {conns} | " + " | ".join(cells) + " | "
                         + " | ".join(f"{rates[s] / rates['off']:.2f}×" for s in SIDES[1:]) + " |")
    return "\n".join(lines)


def ratio(results: dict, query: str, conns: int, side: str) -> float:
    """A query's req/s with history kept in ``side``'s store ÷ without, medians."""
    def rate(which: str) -> float:
        return _median([r["requests_per_second"]
                        for r in results["runs"].get(f"{query}|{conns}|{which}", [])] or [0.0])
    off = rate("off")
    return rate(side) / off if off else 0.0


def targets(results: dict) -> list[tuple[str, str, bool]]:
    """The issue's goals for the history: (target, measured, met)."""
    rows = []
    for side in SIDES[1:]:
        for conns in results["connections"]:
            worst = min((ratio(results, q.name, conns, side), q.name) for q in QUERIES)
            rows.append((f"Q1–Q5 req/s with history in {side} ≥ 0.95× without ({conns} conn, "
                         f"under {_LOAD_RATE:g} changes/s)",
                         f"lowest {worst[0]:.2f}× ({worst[1]})", worst[0] >= 0.95))
    for side, found in results["write_rate"].items():
        rows.append((f"changes written into {side} ≥ 10,000/s (10× a busy cluster's)",
                     f"{found['changes_per_second']:,}/s", found["changes_per_second"] >= 10_000))
    for side, found in results["exact"].items():
        times = found["past_p50_ms"] / found["current_p50_ms"]
        rows.append((f"an Exact list of {results['pods']:,} Pods {results['changes']:,} changes "
                     f"old ({side}) ≤ 10× a current list's p50",
                     f"{found['past_p50_ms']:.1f} ÷ {found['current_p50_ms']:.1f} ms = {times:.1f}×",
                     times <= 10))
    for side, found in results["restart"].items():
        if side != "off":
            rows.append((f"LISTs of Pods sent upstream by a gateway started on its store "
                         f"({side.replace('_', ' ')}): 0", str(found["pod_lists"]),
                         found["pod_lists"] == 0))
    return rows


def restart_targets(results: dict) -> list[tuple[str, str, bool]]:
    """``make bench-history``'s goal: no LIST by a gateway started on its store."""
    return [(f"LISTs of Pods sent upstream by a gateway started on its store at "
             f"{results['pods']:,} Pods ({side.replace('_', ' ')}): 0",
             str(found["pod_lists"]), found["pod_lists"] == 0)
            for side, found in results["restart"].items() if side != "off"]


def restart_text(results: dict) -> str:
    """``make bench-history``'s section of ``docs/benchmarks.md``."""
    restart = results["restart"]
    return (f"### Restarts at {results['pods']:,} Pods\n\n"
            f"From a run of its own, on the same machine ({results.get('date', '')}): "
            f"`{results['command']}` (`make bench-history`). A gateway restarted on its SQLite "
            f"file was ready in {restart['sqlite']['ready_seconds']:.1f} s and sent "
            f"{restart['sqlite']['pod_lists']} LIST of Pods; a new gateway on the PostgreSQL "
            f"store another one writes, in {restart['postgresql_new_replica']['ready_seconds']:.1f} s "
            f"with {restart['postgresql_new_replica']['pod_lists']}; one without history in "
            f"{restart['off']['ready_seconds']:.1f} s with {restart['off']['pod_lists']} "
            f"(the API server's own count).\n")


def figures_table(results: dict) -> str:
    """What is not a query's rate: writes, the past read back, restarts."""
    write = results["write_rate"]
    end = results["end_to_end"]
    lines = ["| | SQLite | PostgreSQL |", "|---|---|---|"]
    lines.append("| the store's own write rate (changes/s, batches of 500) | "
                 + " | ".join(f"{write[s]['changes_per_second']:,}" for s in SIDES[1:]) + " |")
    lines.append(f"| bytes per change (objects of {write['sqlite']['object_bytes']:,} B) | "
                 + " | ".join(f"{write[s]['bytes_per_change']:,}" for s in SIDES[1:]) + " |")
    lines.append(f"| {end['changes']:,} changes through the API server "
                 f"({end['api_server_changes_per_second']:,}/s): all kept, seconds after the last | "
                 + " | ".join(f"{end['kept_after_last_write_seconds'][s]:.1f}" for s in SIDES[1:])
                 + " |")
    exact = results["exact"]
    lines.append(f"| Exact list of every Pod at a version {results['changes']:,} changes old, "
                 f"p50 ms (a current list's) | "
                 + " | ".join(f"{exact[s]['past_p50_ms']:.1f} ({exact[s]['current_p50_ms']:.1f})"
                              for s in SIDES[1:]) + " |")
    replay = results["replay"]
    lines.append(f"| watch replay of {replay['sqlite']['events']:,} changes: first event, all (s) | "
                 + " | ".join(f"{replay[s]['first_s']:.2f}, {replay[s]['all_s']:.1f}"
                              for s in SIDES[1:]) + " |")
    lines.append("| gateway's peak RSS before → after the replay (MiB) | "
                 + " | ".join(f"{replay[s]['peak_before_mib']:.0f} → {replay[s]['peak_after_mib']:.0f}"
                              for s in SIDES[1:]) + " |")
    restart = results["restart"]
    lines.append("| restarted on its store (SQLite) / a new replica on the shared store "
                 "(PostgreSQL): seconds to ready, LISTs of Pods sent | "
                 f"{restart['sqlite']['ready_seconds']:.1f} s, {restart['sqlite']['pod_lists']} | "
                 f"{restart['postgresql_new_replica']['ready_seconds']:.1f} s, "
                 f"{restart['postgresql_new_replica']['pod_lists']} |")
    lines.append(f"| (without history, for comparison: seconds to ready, LISTs) | "
                 f"{restart['off']['ready_seconds']:.1f} s, {restart['off']['pod_lists']} | |")
    cpu = results.get("cpu_under_load")
    if cpu:
        lines.append(f"| CPU % of one core under {_LOAD_RATE:g} changes/s, no queries: the "
                     f"gateway (without history: {cpu['off']:.1f}) | {cpu['sqlite']:.1f} | "
                     f"{cpu['postgresql']:.1f} (+ the server {cpu['postgres']:.1f}) |")
    rec = results["recorder"]
    lines.append(f"| a hub's work per delivered event, µs, without → with a recorder | "
                 f"{rec['without_us']:.1f} → {rec['with_us']:.1f} | |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.past", description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--restart-only", action="store_true",
                        help="only the restarts, at --pods Pods (make bench-history: 150,000)")
    args = parser.parse_args()
    if args.restart_only:
        results = restart_run(args.pods)
        print(json.dumps(results, indent=1))
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
        return
    results = run(args.pods, args.changes, args.seconds, args.rounds)
    print(table(results))
    print(figures_table(results))
    print(json.dumps({k: v for k, v in results.items() if k != "runs"}, indent=1))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
