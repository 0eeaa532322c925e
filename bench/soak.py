"""Soak: minutes of mixed load on a gateway process over a real API server, recorded per minute.

While objects churn through the API server (creates, changes, deletes), 200 clients read
through the gateway: 80 ask lists (whole, by label, paged with ``limit``/``continue``) and
gets; 100 follow Server-Sent Events and reconnect now and then with ``Last-Event-ID``; 20
watch as client-go does (list, then watch from its version, again from the last event's
version when the watch ends, a relist on 410). Every stream client replays what it receives
into a state; at the end each must equal the API server's (a RESET followed by a full state
counts as correct, a gap or a duplicate does not).

Recorded each minute: requests, 5xx, p50/p99 latency, events delivered, and the gateway's
RSS, threads, file descriptors and event-loop tasks (from ``/proc`` and ``/metrics``).
``make soak`` runs 10 minutes and writes ``docs/soak.json`` and ``docs/soak.png``; the suite
runs a 2-minute form (``tests/system/test_soak.py``). Loopback only, bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx

from control_plane.cluster import LocalCluster, free_port
from control_plane.kubeapi import KubeAPI

NAMESPACE = "soak"
PATH = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
OBJECTS = 200
LISTERS, SSE_CLIENTS, WATCHERS = 80, 100, 20


class Gateway:
    """``kube-cache-gateway serve`` as its own process (so its RSS, threads and fds are its own)."""

    def __init__(self, cluster: LocalCluster, workdir: Path, *flags: str, server: Any = None) -> None:
        kubeconfig = cluster.write_kubeconfig(workdir / "kubeconfig", cluster.admin, server)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, KCG_LOG_LEVEL="warning")
        self.log = open(workdir / "gateway.log", "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app.launch.cli", "serve", "--kubeconfig", str(kubeconfig),
             "--port", str(self.port), "--prewarm", "configmaps",
             "--max-streams-per-client", "1000", *flags],  # every client is 127.0.0.1 here
            env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("the gateway did not become ready")

    def sample(self) -> dict[str, float]:
        pid = self.process.pid
        with open(f"/proc/{pid}/status") as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
        text = httpx.get(self.url + "/metrics", timeout=10).text
        tasks = re.search(r"^kcg_event_loop_tasks (\S+)$", text, re.M)
        streams = sum(float(v) for v in re.findall(r"^kcg_open_streams\{[^}]*\} (\S+)$", text, re.M))
        return {"rss_mib": int(status["VmRSS"].split()[0]) / 1024,
                "threads": int(status["Threads"]), "fds": len(os.listdir(f"/proc/{pid}/fd")),
                "tasks": float(tasks.group(1)) if tasks else -1, "streams": streams}

    def stop(self) -> int:
        self.process.terminate()
        try:
            code = self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = -9
        self.log.close()
        return code


class Writer(threading.Thread):
    """Creates, changes and deletes the namespace's objects at ``rate`` a second."""

    def __init__(self, kube: KubeAPI, rate: float) -> None:
        super().__init__(daemon=True)
        self.kube, self.rate = kube, rate
        self.stop_event = threading.Event()
        self.writes = self.failures = 0

    def run(self) -> None:
        rng = random.Random(1)
        while not self.stop_event.is_set():
            name = f"o{rng.randrange(OBJECTS):03d}"
            try:
                if rng.random() < 0.1:
                    self.kube.delete(f"{PATH}/{name}", ok_missing=True)
                elif self.kube.get(f"{PATH}/{name}", ok_missing=True) is None:
                    self.kube.create(PATH, _object(name, rng.randrange(10**6)))
                else:
                    self.kube.patch(f"{PATH}/{name}", {"data": {"n": str(rng.randrange(10**6))}})
                self.writes += 1
            except Exception:  # noqa: BLE001 - counted; the soak checks the outcome
                self.failures += 1
            time.sleep(1 / self.rate)


def _object(name: str, n: int) -> dict:
    return {"metadata": {"name": name, "labels": {"app": f"a{int(name[1:]) % 10}"}},
            "data": {"n": str(n), "config.yaml": "replicas: 3\nfeature: on\n" * 20}}


class Record:
    """What the clients saw, bucketed per minute."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.latencies: dict[int, list[float]] = defaultdict(list)
        self.statuses: dict[int, Counter] = defaultdict(Counter)
        self.events: Counter = Counter()
        self.errors: list[str] = []

    def minute(self) -> int:
        return int((time.monotonic() - self.started) // 60)

    def request(self, status: int, seconds: float) -> None:
        m = self.minute()
        self.latencies[m].append(seconds)
        self.statuses[m][status] += 1


class StreamState:
    """A stream client's replayed state and what went wrong in it."""

    def __init__(self) -> None:
        self.state: dict[str, str] = {}
        self.duplicates: list[str] = []
        self.resets = self.reconnects = 0

    def apply(self, kind: str, obj: dict) -> None:
        meta = obj["metadata"]
        name, rv = meta["name"], meta["resourceVersion"]
        if kind == "DELETED":
            if self.state.pop(name, None) is None:
                self.duplicates.append(f"DELETED {name}@{rv} of nothing")
            return
        if self.state.get(name) == rv or (kind == "ADDED" and name in self.state):
            self.duplicates.append(f"{kind} {name}@{rv}")
        self.state[name] = rv


async def _lister(client: httpx.AsyncClient, record: Record, stop: asyncio.Event, rng: random.Random) -> None:
    while not stop.is_set():
        choice = rng.random()
        began = time.monotonic()
        try:
            if choice < 0.35:
                answer = await client.get(PATH)
            elif choice < 0.6:
                answer = await client.get(PATH, params={"labelSelector": f"app=a{rng.randrange(10)}"})
            elif choice < 0.85:
                answer = await client.get(f"{PATH}/o{rng.randrange(OBJECTS):03d}")
            else:  # a pagination walk: each page is one request
                token = None
                while True:
                    params = {"limit": "50", **({"continue": token} if token else {})}
                    answer = await client.get(PATH, params=params)
                    record.request(answer.status_code, time.monotonic() - began)
                    token = answer.json().get("metadata", {}).get("continue") if answer.status_code == 200 else None
                    if not token or stop.is_set():
                        break
                    began = time.monotonic()
                await asyncio.sleep(rng.uniform(0.2, 0.5))
                continue
            record.request(answer.status_code, time.monotonic() - began)
        except httpx.HTTPError as exc:
            record.errors.append(f"list: {type(exc).__name__}: {exc}"[:200])
            record.request(599, time.monotonic() - began)
        await asyncio.sleep(rng.uniform(0.2, 0.5))


async def _sse(client: httpx.AsyncClient, view: StreamState, record: Record, stop: asyncio.Event,
               rng: random.Random) -> None:
    last_id = ""
    while not stop.is_set():
        headers = {"Accept": "text/event-stream", **({"Last-Event-ID": last_id} if last_id else {})}
        until = time.monotonic() + rng.uniform(20, 60)  # then reconnect, as after a network blip
        try:
            async with client.stream("GET", PATH, headers=headers) as answer:
                if answer.status_code != 200:
                    record.errors.append(f"sse status {answer.status_code}")
                    await asyncio.sleep(1)
                    continue
                view.reconnects += 1
                event: dict[str, str] = {}
                async for line in answer.aiter_lines():
                    if line:
                        if not line.startswith(":"):
                            field, _, value = line.partition(": ")
                            event[field] = value
                        continue
                    kind = event.get("event")
                    if kind == "RESET":
                        view.resets += 1
                        view.state.clear()
                    elif kind in ("ADDED", "MODIFIED", "DELETED"):
                        view.apply(kind, json.loads(event["data"]))
                        record.events[record.minute()] += 1
                    if "id" in event and kind != "ERROR":
                        last_id = event["id"]
                    event = {}
                    if stop.is_set() or time.monotonic() > until:
                        break
        except httpx.HTTPError as exc:
            record.errors.append(f"sse: {type(exc).__name__}"[:200])
            await asyncio.sleep(0.5)


async def _watch(client: httpx.AsyncClient, view: StreamState, record: Record, stop: asyncio.Event,
                 rng: random.Random) -> None:
    version = ""
    while not stop.is_set():
        try:
            if not version:  # list, as an informer does, then watch from its version
                listed = (await client.get(PATH)).json()
                view.state = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                              for o in listed["items"]}
                version = listed["metadata"]["resourceVersion"]
            params = {"watch": "true", "resourceVersion": version, "allowWatchBookmarks": "true",
                      "timeoutSeconds": str(rng.randrange(20, 60))}
            async with client.stream("GET", PATH, params=params) as answer:
                if answer.status_code != 200:
                    record.errors.append(f"watch status {answer.status_code}")
                    await asyncio.sleep(1)
                    continue
                view.reconnects += 1
                async for line in answer.aiter_lines():
                    if not line:
                        continue
                    event = json.loads(line)
                    kind, obj = event["type"], event["object"]
                    if kind == "ERROR":
                        if obj.get("code") == 410:
                            view.resets += 1
                            version = ""
                        break
                    version = obj["metadata"]["resourceVersion"]
                    if kind != "BOOKMARK":
                        view.apply(kind, obj)
                        record.events[record.minute()] += 1
                    if stop.is_set():
                        break
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            record.errors.append(f"watch: {type(exc).__name__}"[:200])
            await asyncio.sleep(0.5)


def _pctl(values: list[float], q: int) -> float:
    if not values:
        return 0.0
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100)[q - 1]


def soak(cluster: LocalCluster, minutes: float, write_rate: float = 20.0, ring: int = 1000,
         log=print) -> dict[str, Any]:
    """Run the soak on ``cluster``; return per-minute rows and the outcome.

    The event ring (what streams resume from) holds ``ring`` events: memory grows until
    it is full — at the default 10,000 and this write rate, for the whole ten minutes —
    so it is sized to fill within the first minute, and what grows after that is a leak.
    """
    kube = KubeAPI.for_cluster(cluster)
    kube.ensure_namespace(NAMESPACE)
    for i in range(OBJECTS):
        if kube.get(f"{PATH}/o{i:03d}", ok_missing=True) is None:
            kube.create(PATH, _object(f"o{i:03d}", i))
    with tempfile.TemporaryDirectory(prefix="kcg-soak-") as tmp:
        gateway = Gateway(cluster, Path(tmp), "--event-ring-size", str(ring))
        try:
            outcome = _drive(gateway, kube, minutes, write_rate, log)
            outcome["event_ring_size"] = ring
            return outcome
        finally:
            exit_code = gateway.stop()
            log(f"gateway exit code {exit_code}")


CLIENT_PROCESSES = 2  # the clients' share of the cores: one Python process would be the bottleneck


def _clients(url: str, index: int, processes: int, started: float, wants: Any, results: Any) -> None:
    """One client process: its share of the listers, SSE and watch clients (every
    ``processes``-th of each), until it is given the final state to settle on."""
    record = Record(started)
    sse = [i for i in range(SSE_CLIENTS) if i % processes == index]
    watchers = [i for i in range(WATCHERS) if i % processes == index]
    views = {("sse", i): StreamState() for i in sse} | {("watch", i): StreamState() for i in watchers}

    async def main() -> None:
        stop = asyncio.Event()
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        timeout = httpx.Timeout(30.0, read=120.0)
        clients: list[httpx.AsyncClient] = []

        def client() -> httpx.AsyncClient:
            clients.append(httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout))
            return clients[-1]

        tasks = [asyncio.create_task(_lister(client(), record, stop, random.Random(i)))
                 for i in range(LISTERS) if i % processes == index]
        tasks += [asyncio.create_task(_sse(client(), views["sse", i], record, stop,
                                           random.Random(1000 + i))) for i in sse]
        tasks += [asyncio.create_task(_watch(client(), views["watch", i], record, stop,
                                             random.Random(2000 + i))) for i in watchers]
        want = await asyncio.to_thread(wants.get)  # the writes are over: the API server's state
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(v.state != want for v in views.values()):
            await asyncio.sleep(0.5)
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for c in clients:
            await c.aclose()
        results.put({"latencies": dict(record.latencies), "statuses": dict(record.statuses),
                     "events": dict(record.events), "errors": record.errors,
                     "lost": sum(1 for v in views.values() if v.state != want),
                     "duplicates": [d for v in views.values() for d in v.duplicates],
                     "resets": sum(v.resets for v in views.values()),
                     "reconnects": sum(v.reconnects for v in views.values())})

    asyncio.run(main())


def _drive(gateway: Gateway, kube: KubeAPI, minutes: float, write_rate: float, log) -> dict[str, Any]:
    import multiprocessing

    started = time.monotonic()
    record = Record(started)
    samples: dict[int, dict[str, float]] = {}
    writer = Writer(kube, write_rate)
    writer.start()
    context = multiprocessing.get_context("spawn")
    wants = [context.Queue() for _ in range(CLIENT_PROCESSES)]
    results = context.Queue()
    processes = [context.Process(target=_clients, args=(gateway.url, i, CLIENT_PROCESSES, started,
                                                        wants[i], results), daemon=True)
                 for i in range(CLIENT_PROCESSES)]
    for process in processes:
        process.start()
    end = started + minutes * 60
    while time.monotonic() < end:
        time.sleep(min(5.0, max(0.0, end - time.monotonic())))
        minute = record.minute() if time.monotonic() < end else int(minutes * 60 // 60) - 1
        try:
            samples[max(0, minute)] = gateway.sample()
        except (OSError, httpx.HTTPError) as exc:
            record.errors.append(f"sample: {exc}")
    writer.stop_event.set()
    writer.join(30)
    # let the streams settle on the final state, then stop them
    want = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in kube.get(PATH)["items"]}
    for queue in wants:
        queue.put(want)
    lost, duplicates, resets, reconnects = 0, [], 0, 0
    for _ in processes:
        part = results.get(timeout=180)
        for minute, values in part["latencies"].items():
            record.latencies[minute].extend(values)
        for minute, counts in part["statuses"].items():
            record.statuses[minute].update(counts)
        record.events.update(part["events"])
        record.errors.extend(part["errors"])
        lost += part["lost"]
        duplicates += part["duplicates"]
        resets += part["resets"]
        reconnects += part["reconnects"]
    for process in processes:
        process.join(30)
    rows = []
    for minute in range(int(round(minutes))):
        lat = record.latencies.get(minute, [])
        statuses = record.statuses.get(minute, Counter())
        sample = samples.get(minute, {})
        rows.append({"minute": minute + 1, "requests": len(lat),
                     "5xx": sum(n for s, n in statuses.items() if s >= 500),
                     "p50_ms": round(_pctl(lat, 50) * 1000, 2), "p99_ms": round(_pctl(lat, 99) * 1000, 2),
                     "events": record.events.get(minute, 0), **{k: round(v, 1) for k, v in sample.items()}})
        log("minute {minute}: {requests} requests, {5xx} 5xx, p50 {p50_ms} ms, p99 {p99_ms} ms, "
            "{events} events, RSS {rss_mib} MiB, threads {threads}, fds {fds}, tasks {tasks}".format(
                **{"rss_mib": "?", "threads": "?", "fds": "?", "tasks": "?", **rows[-1]}))
    outcome = {
        "minutes": minutes, "clients": LISTERS + SSE_CLIENTS + WATCHERS,
        "writes": writer.writes, "failed_writes": writer.failures,
        "requests": sum(r["requests"] for r in rows), "5xx": sum(r["5xx"] for r in rows),
        "events_delivered": sum(record.events.values()),
        "streams_not_equal_to_api_server": lost,
        "duplicates": len(duplicates), "duplicate_examples": duplicates[:5],
        "resets": resets, "reconnects": reconnects, "client_processes": CLIENT_PROCESSES,
        "client_errors": len(record.errors), "client_error_examples": record.errors[:5],
        "rows": rows,
    }
    return outcome


def plot(outcome: dict[str, Any], path: Path) -> None:
    """Four panels per minute: p50/p99, RSS, threads/fds/tasks, requests and events."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = outcome["rows"]
    minutes = [r["minute"] for r in rows]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    (lat, rss), (counts, rates) = axes
    lat.plot(minutes, [r["p50_ms"] for r in rows], "o-", label="p50")
    lat.plot(minutes, [r["p99_ms"] for r in rows], "o-", label="p99")
    lat.set_title("Request latency (ms)")
    lat.set_ylim(bottom=0)
    lat.legend()
    rss.plot(minutes, [r.get("rss_mib", 0) for r in rows], "o-", color="tab:red")
    rss.set_title("Gateway RSS (MiB)")
    rss.set_ylim(bottom=0)
    for key in ("threads", "fds", "tasks"):
        counts.plot(minutes, [r.get(key, 0) for r in rows], "o-", label=key)
    counts.set_title("Threads, file descriptors, loop tasks")
    counts.set_ylim(bottom=0)
    counts.legend()
    rates.plot(minutes, [r["requests"] / 60 for r in rows], "o-", label="requests/s")
    rates.plot(minutes, [r["events"] / 60 for r in rows], "o-", label="events delivered/s")
    rates.set_title("Load")
    rates.set_ylim(bottom=0)
    rates.legend()
    for ax in (counts, rates):
        ax.set_xlabel("minute")
    fig.suptitle(f"kube-cache-gateway soak: {outcome['clients']} clients, {outcome['minutes']:g} min, "
                 f"{outcome['5xx']} 5xx, {outcome['streams_not_equal_to_api_server']} streams lost, "
                 f"{outcome['duplicates']} duplicates")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--write-rate", type=float, default=20.0, help="API server writes per second")
    parser.add_argument("--ring", type=int, default=1000, help="the gateway's --event-ring-size")
    parser.add_argument("--json", type=Path, default=Path("docs/soak.json"))
    parser.add_argument("--plot", type=Path, default=Path("docs/soak.png"))
    args = parser.parse_args(argv)
    with LocalCluster() as cluster:
        outcome = soak(cluster, args.minutes, args.write_rate, args.ring)
    outcome["command"] = "make soak  # python -m bench.soak " + " ".join(argv or sys.argv[1:])
    args.json.write_text(json.dumps(outcome, indent=2) + "\n")
    plot(outcome, args.plot)
    print(json.dumps({k: v for k, v in outcome.items() if k != "rows"}, indent=2))
    return 0 if outcome["5xx"] == 0 and outcome["streams_not_equal_to_api_server"] == 0 \
        and outcome["duplicates"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
