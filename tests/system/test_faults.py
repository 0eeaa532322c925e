"""Faults as regression tests, on a control plane of their own: while objects are created,
changed and deleted, the API server is killed, stopped or restarted, etcd restarted, the
gateway's connections held, cut and slowed. Two clients read through the gateway the whole
time, reconnecting as real clients do — a watch resuming from its last event's
resourceVersion (client-go), an EventSource resuming by Last-Event-ID — and replay what they
receive into a state. Each must end equal to the API server's, with no duplicate (a RESET and a
fresh state count as correct, a gap or a repeat does not), and the watch's versions only
increase. Each scenario is bounded (writes for a few seconds, convergence within a minute)."""

from __future__ import annotations

import re
import signal
import threading
import time
import types
import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest

from control_plane.cluster import LocalCluster
from control_plane.faults import FaultProxy
from control_plane.kubeapi import KubeAPI
from tests.app.conftest import run_gateway, wait_until
from tests.app.streams.test_watch import ResumingWatcher
from tests.deploy.test_scale_out import EventSourceView

pytestmark = pytest.mark.cluster

_OBJECTS = 20


class Scenario:
    """A namespace under write load, a gateway behind a fault proxy, two reconnecting clients."""

    def __init__(self, cluster: LocalCluster, gateway, proxy: FaultProxy | None, path: str) -> None:
        self.cluster, self.gateway, self.proxy, self.path = cluster, gateway, proxy, path
        self.kube = KubeAPI.for_cluster(cluster)
        self.watcher = ResumingWatcher(gateway.url, path)
        self.sse = EventSourceView(gateway.url + path)
        self.writes = self.failed_writes = 0
        self.reader_errors: list[str] = []
        self._stop_writes = threading.Event()
        self._stop_reads = threading.Event()
        self._threads: list[threading.Thread] = []

    def _write(self) -> None:
        n = 0
        while not self._stop_writes.is_set():
            name = f"o{n % _OBJECTS:02d}"
            try:
                if n % 7 == 3:
                    self.kube.delete(f"{self.path}/{name}")
                elif self.kube.get(f"{self.path}/{name}", ok_missing=True) is None:
                    self.kube.create(self.path, {"metadata": {"name": name}, "data": {"n": str(n)}})
                else:
                    self.kube.patch(f"{self.path}/{name}", {"data": {"n": str(n)}})
                self.writes += 1
            except Exception:  # noqa: BLE001 - the API server may be down: try the next one
                self.failed_writes += 1
                time.sleep(0.2)
            n += 1
            time.sleep(0.02)

    def _read(self, step: Callable[[], None]) -> None:
        while not self._stop_reads.is_set():
            try:
                step()
            except (httpx.HTTPError, AssertionError, ValueError) as exc:
                self.reader_errors.append(f"{type(exc).__name__}: {exc}"[:200])
                time.sleep(0.2)

    def start(self) -> None:
        self.watcher.relist()
        for target in (self._write, lambda: self._read(lambda: self.watcher.watch(1.0)),
                       lambda: self._read(lambda: self.sse.connect(seconds=1.0))):
            thread = threading.Thread(target=target)
            thread.start()
            self._threads.append(thread)

    def close(self) -> None:
        """Stop every thread (also when a check failed)."""
        self._stop_writes.set()
        self._stop_reads.set()
        for thread in self._threads:
            thread.join(30)

    def finish(self, within: float = 60.0) -> dict:
        """Stop writing; wait until both clients hold the API server's state; check them."""
        self._stop_writes.set()
        self._threads[0].join(60)
        want = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                for o in self.kube.get(self.path)["items"]}
        try:
            wait_until(lambda: self.watcher.state == want and self.sse.objects == want, within,
                       message="both clients to hold the API server's state")
        except BaseException:
            gateway_view = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in
                            httpx.get(self.gateway.url + self.path, timeout=10).json()["items"]}
            print(f"\nwant {len(want)}, gateway {gateway_view == want}, watch "
                  f"{self.watcher.state == want}, sse {self.sse.objects == want}, "
                  f"reader errors {self.reader_errors[-3:]}")
            raise
        finally:
            self._stop_reads.set()
            for thread in self._threads[1:]:
                thread.join(30)
        assert self.watcher.duplicates() == [], self.watcher.duplicates()[:5]
        versions = [int(rv) for _, _, rv in self.watcher.delivered]
        assert versions == sorted(versions), "watch versions only increase"
        assert self.sse.duplicates == [], self.sse.duplicates[:5]
        assert self.writes > 20
        return {"writes": self.writes, "failed writes": self.failed_writes,
                "watch events": sum(self.watcher.kinds.values()), "watch 410s": self.watcher.gone,
                "SSE connections": len(self.sse.connections),
                "SSE RESETs": sum(k.count("RESET") for k in self.sse.connections),
                "relists": relists(self.gateway.url)}


def relists(url: str) -> int:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(int(float(v)) for v in re.findall(
        r'^kcg_informer_relists_total\{cluster="default",resource="configmaps[.][^"]*"\} (\S+)$', text, re.M))


@pytest.fixture
def scenario(cluster) -> Iterator[Scenario]:
    kube = KubeAPI.for_cluster(cluster)
    namespace = f"fault-{uuid.uuid4().hex[:8]}"
    kube.ensure_namespace(namespace)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for i in range(_OBJECTS):
        kube.create(path, {"metadata": {"name": f"o{i:02d}"}, "data": {"n": "0"}})
    primary = cluster.primary
    with FaultProxy("127.0.0.1", primary.port) as proxy, \
            run_gateway(cluster, server=types.SimpleNamespace(url=proxy.url,
                                                              ca_file=primary.ca_file)) as gateway:
        assert httpx.get(gateway.url + path, timeout=30).status_code == 200
        running = Scenario(cluster, gateway, proxy, path)
        try:
            yield running
        finally:
            running.close()


def _report(name: str, figures: dict) -> None:
    print(f"\n{name}: " + ", ".join(f"{k} {v}" for k, v in figures.items()))


def test_api_server_killed_and_restarted_three_times(scenario):
    scenario.start()
    for _ in range(3):
        time.sleep(1.5)
        process = scenario.cluster.primary.process
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        time.sleep(1.0)
        scenario.cluster.start_apiserver()
    time.sleep(1.5)
    _report("apiserver SIGKILL x3", scenario.finish())


def test_etcd_stopped_and_started_again(scenario):
    scenario.start()
    time.sleep(2)
    scenario.cluster.restart_etcd(down_seconds=3)
    time.sleep(2)
    _report("etcd restart", scenario.finish())


def test_gateway_held_while_the_api_server_restarts_relists_and_delivers_deletions(scenario):
    scenario.start()
    time.sleep(1)
    before = relists(scenario.gateway.url)
    scenario.proxy.pause()  # the gateway hears nothing, as if it were stopped
    time.sleep(2)  # creations, changes and deletions pass meanwhile
    scenario.cluster.restart_apiserver()  # its watch cache forgets what came before
    scenario.proxy.reset()
    scenario.proxy.resume()
    time.sleep(2)
    figures = scenario.finish()
    assert figures["relists"] > before, "a watch resumed too old: the gateway relisted"
    assert scenario.watcher.kinds.get("DELETED", 0) > 0
    _report("gateway held over an apiserver restart", figures)


def test_api_server_stopped_for_30_seconds(scenario):
    scenario.start()
    time.sleep(1)
    process = scenario.cluster.primary.process
    process.send_signal(signal.SIGSTOP)
    try:
        began = time.monotonic()
        wait_until(lambda: "age" in httpx.get(scenario.gateway.url + scenario.path,
                                              timeout=5).headers, 25,
                   message="answers to say they may be old")
        during = httpx.get(scenario.gateway.url + scenario.path, timeout=5)
        assert during.status_code == 200 and during.json()["items"]
        wait_until(lambda: "serving from the cache" in httpx.get(scenario.gateway.url + "/readyz?verbose",
                                                          timeout=5).text,
                   20, message="/readyz?verbose to say the cache is not following")
        assert httpx.get(scenario.gateway.url + "/readyz", timeout=5).status_code == 200
        time.sleep(max(0.0, 30 - (time.monotonic() - began)))
    finally:
        process.send_signal(signal.SIGCONT)
    _report("apiserver SIGSTOP 30 s", scenario.finish())


def test_connections_cut_and_slowed(scenario):
    scenario.start()
    scenario.proxy.latency = 0.05
    for _ in range(5):
        time.sleep(1.0)
        scenario.proxy.reset()
    scenario.proxy.latency = 0.0
    _report("RSTs and latency", scenario.finish())


def test_gateway_process_stopped_while_more_changes_pass_than_the_watch_window(cluster, tmp_path):
    """The gateway process itself frozen (SIGSTOP) while changes pass and the API server restarts,
    so that its watch window no longer reaches back to where the gateway stopped: thawed, the
    gateway's watch resumes too old (410), it relists, and both clients get the deletions and
    changes they missed. (Frozen alone, 20 s and 600 writes of 64 KB, the 1.20 API server kept
    the watch open — its watch cache keeps 75 s of events — and the gateway caught up without
    a relist.)"""
    from bench.soak import Gateway

    kube = KubeAPI.for_cluster(cluster)
    namespace = f"frozen-{uuid.uuid4().hex[:8]}"
    kube.ensure_namespace(namespace)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for i in range(_OBJECTS):
        kube.create(path, {"metadata": {"name": f"o{i:02d}"}, "data": {"n": "0"}})
    gateway = Gateway(cluster, tmp_path)
    scenario = Scenario(cluster, gateway, None, path)
    try:
        scenario.start()
        time.sleep(1)
        before = relists(gateway.url)
        gateway.process.send_signal(signal.SIGSTOP)
        try:
            written = scenario.writes
            wait_until(lambda: scenario.writes - written > 100, 60, message="changes to pass")
            cluster.restart_apiserver()  # its watch cache begins again, after the gateway's version
            written = scenario.writes
            wait_until(lambda: scenario.writes - written > 50, 60, message="more changes to pass")
        finally:
            gateway.process.send_signal(signal.SIGCONT)
        time.sleep(2)
        figures = scenario.finish()
        assert figures["relists"] > before, "the resumed watch was too old: the gateway relisted"
        assert scenario.watcher.kinds.get("DELETED", 0) > 0
        _report("gateway process SIGSTOPped past the watch window", figures)
    finally:
        scenario.close()
        assert gateway.stop() == 0
