"""``serve --workers 2`` as an operator runs it, against the real API server: one address
answered by every worker; a resource loaded on first use everywhere; one scrape showing the
whole pod; readiness per worker; a dead worker restarted; streams resumed exactly on
another worker (SSE by id, the watch by resourceVersion); SIGTERM ending it all cleanly."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bench.soak import Gateway
from control_plane.kubeapi import KubeAPI
from tests.app.streams.test_watch import ResumingWatcher
from tests.deploy.test_scale_out import EventSourceView
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def pod(local_cluster, tmp_path_factory) -> Iterator[Gateway]:
    """A gateway of two worker processes (``--prewarm configmaps``)."""
    gateway = Gateway(local_cluster, tmp_path_factory.mktemp("pod"), "--workers", "2",
                      "--heartbeat-interval", "1", "--bookmark-interval", "1")
    try:
        yield gateway
    finally:
        gateway.stop()


def fresh(url: str, path: str, **kwargs) -> httpx.Response:
    """A request on a connection of its own (so any worker may take it)."""
    with httpx.Client(timeout=30) as client:
        return client.get(url + path, **kwargs)


def each_worker(url: str, path: str, workers: int = 2, **kwargs) -> dict[str, httpx.Response]:
    """One answer from every worker, by its index (fresh connections until each has answered)."""
    answers: dict[str, httpx.Response] = {}
    for _ in range(200):
        answer = fresh(url, path, **kwargs)
        answers.setdefault(answer.headers["kcg-worker"], answer)
        if len(answers) == workers:
            return answers
    raise AssertionError(f"only workers {sorted(answers)} answered")


def workers(pid: int) -> set[int]:
    """The worker processes of the supervisor ``pid`` (not multiprocessing's resource tracker)."""
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        found = {int(p) for p in f.read().split()}
    alive = set()
    for child in found:
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                if b"resource_tracker" not in f.read():
                    alive.add(child)
        except FileNotFoundError:
            pass  # gone meanwhile
    return alive


def metric(url: str, name: str, **labels: str) -> dict[str, float]:
    """``name``'s value by worker, for the series with ``labels``."""
    found = {}
    for family in text_string_to_metric_families(fresh(url, "/metrics").text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                found[sample.labels["worker"]] = sample.value
    return found


def names_and_versions(items: list[dict]) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in items}


def test_every_worker_answers_on_the_one_address_as_the_api_server(pod, local_cluster, demo):
    kube = KubeAPI.for_cluster(local_cluster)
    path = f"/api/v1/namespaces/{demo}/configmaps"
    want = names_and_versions(kube.get(path)["items"])
    answers = each_worker(pod.url, path)
    assert set(answers) == {"0", "1"}
    for answer in answers.values():
        assert answer.status_code == 200
        assert names_and_versions(answer.json()["items"]) == want
    ready = each_worker(pod.url, "/readyz")
    assert all(a.status_code == 200 and a.text == "ok" for a in ready.values())


def test_a_resource_first_asked_of_one_worker_is_loaded_by_every_worker(pod, demo):
    path = f"/api/v1/namespaces/{demo}/serviceaccounts"
    first = fresh(pod.url, path)
    assert first.status_code == 200
    wait_until(lambda: len(metric(pod.url, "kcg_cache_objects", resource="serviceaccounts.v1")) == 2,
               10, interval=0.2, message="the other worker to load serviceaccounts as well")
    loads = metric(pod.url, "kcg_informer_synced", resource="serviceaccounts.v1")
    assert loads == {"0": 1.0, "1": 1.0}


def test_an_idle_resource_is_unloaded_by_every_worker(local_cluster, tmp_path, demo):
    gateway = Gateway(local_cluster, tmp_path, "--workers", "2", "--idle-unload", "2")
    try:
        assert fresh(gateway.url, f"/api/v1/namespaces/{demo}/serviceaccounts").status_code == 200
        wait_until(lambda: len(metric(gateway.url, "kcg_cache_objects",
                                      resource="serviceaccounts.v1")) == 2,
                   10, interval=0.2, message="both workers to load it")
        wait_until(lambda: metric(gateway.url, "kcg_cache_objects",
                                  resource="serviceaccounts.v1") == {}, 30, interval=0.2,
                   message="both workers to unload it, idle")
        # the pre-warmed one stays, and the next request loads it again
        assert len(metric(gateway.url, "kcg_cache_objects", resource="configmaps.v1")) == 2
        assert fresh(gateway.url, f"/api/v1/namespaces/{demo}/serviceaccounts").status_code == 200
    finally:
        assert gateway.stop() == 0


def test_one_scrape_shows_every_worker(pod):
    text = fresh(pod.url, "/metrics").text
    assert 'kcg_cache_objects{cluster="default",resource="configmaps.v1",worker="0"}' in text
    assert 'kcg_cache_objects{cluster="default",resource="configmaps.v1",worker="1"}' in text
    assert text.count("# TYPE kcg_cache_objects gauge") == 1
    assert metric(pod.url, "kcg_informer_synced", cluster="default",
                  resource="configmaps.v1") == {"0": 1.0, "1": 1.0}


class Churn:
    """Creates, changes and deletes a namespace's ConfigMaps every 30 ms until stopped."""

    def __init__(self, kube: KubeAPI, path: str) -> None:
        self.kube, self.path = kube, path
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            name = f"o{n % 12:02d}"
            if n % 9 == 4:
                self.kube.delete(f"{self.path}/{name}", ok_missing=True)
            elif self.kube.get(f"{self.path}/{name}", ok_missing=True) is None:
                self.kube.create(self.path, {"metadata": {"name": name}, "data": {"n": str(n)}})
            else:
                self.kube.patch(f"{self.path}/{name}", {"data": {"n": str(n)}})
            n += 1
            time.sleep(0.03)

    def stop(self) -> dict[str, str]:
        """Stop writing; the API server's state, names to versions."""
        self._stop.set()
        self._thread.join(30)
        return names_and_versions(self.kube.get(self.path)["items"])


@pytest.fixture
def churn(local_cluster) -> Iterator[Churn]:
    kube = KubeAPI.for_cluster(local_cluster)
    namespace = f"hop-{uuid.uuid4().hex[:8]}"
    kube.ensure_namespace(namespace)
    running = Churn(kube, f"/api/v1/namespaces/{namespace}/configmaps")
    try:
        yield running
    finally:
        running.stop()
        kube.delete(f"/api/v1/namespaces/{namespace}")


def test_an_event_source_hopping_between_workers_resumes_exactly(pod, churn):
    view = EventSourceView(pod.url + churn.path)
    for _ in range(8):
        view.connect(seconds=1.0, other_worker=True)
    want = churn.stop()
    wait_until(lambda: (view.connect(1.0, other_worker=True), view.objects == want)[1], 30,
               message="the client to hold the API server's state")
    hops = list(zip(view.workers, view.workers[1:]))
    assert all(a != b for a, b in hops) and len(hops) >= 8
    assert view.duplicates == []
    assert [kinds[:3] for kinds in view.connections if "RESET" in kinds] == [], \
        "every hop resumed exactly where the other worker left off"
    assert sum(len(kinds) for kinds in view.connections[1:]) > 20 and len(want) > 3


def test_a_watch_hopping_between_workers_resumes_from_its_last_version(pod, churn):
    watcher = ResumingWatcher(pod.url, churn.path)
    watcher.relist()
    for _ in range(8):
        watcher.watch(1.0, other_worker=True)
    want = churn.stop()
    wait_until(lambda: (watcher.watch(1.0, other_worker=True), watcher.state == want)[1], 30,
               message="the watch to hold the API server's state")
    hops = list(zip(watcher.workers, watcher.workers[1:]))
    assert all(a != b for a, b in hops) and len(hops) >= 8
    assert watcher.duplicates() == []
    versions = [int(rv) for _, _, rv in watcher.delivered]
    assert versions == sorted(versions)
    assert watcher.gone == 0, "no resume was refused: every worker had the version"
    assert len(want) > 3


def _worker_of_answer(conn: socket.socket) -> str:
    """Ask ``conn`` (HTTP/1.1, kept alive) for ``/healthz``; the worker that answered."""
    conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n")
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += conn.recv(65536)
    head, _, body = answer.partition(b"\r\n\r\n")
    fields = dict(line.split(b": ", 1) for line in head.split(b"\r\n")[1:])
    length = int(fields[b"content-length"])
    while len(body) < length:
        body += conn.recv(65536)
    return fields[b"kcg-worker"].decode()


def test_keep_alive_connections_of_one_client_are_spread_over_both_workers(pod):
    """Each worker accepts from its own socket of one ``SO_REUSEPORT`` group. Before, they shared
    one socket, and a worker busy when connections came got none of them: the other accepted
    every one (asyncio takes up to 100 a wake-up), and a keep-alive connection stays where it
    landed, however busy its worker then is (measured under ``wrk -c8``: one worker 100 % of
    the CPU, the other idle). Here one worker is stopped while 128 connections of one client
    open: each worker still holds between a quarter and three quarters of them (by the
    kernel's hash of their addresses; outside that less than once in 10^8), and the same
    worker answers a connection each time it is asked."""
    port = int(pod.url.rsplit(":", 1)[1])
    wait_until(lambda: len(workers(pod.process.pid)) == 2, 30, message="two workers")
    busy = sorted(workers(pod.process.pid))[0]
    os.kill(busy, signal.SIGSTOP)
    try:
        conns = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(128)]
        time.sleep(0.5)  # the other worker accepts what it can meanwhile
    finally:
        os.kill(busy, signal.SIGCONT)
    try:
        held = Counter()
        for conn in conns:
            first = _worker_of_answer(conn)
            assert _worker_of_answer(conn) == first, "kept where it landed"
            held[first] += 1
    finally:
        for conn in conns:
            conn.close()
    print(f"\n128 connections, worker {busy} stopped while they opened: {dict(held)}")
    assert set(held) == {"0", "1"} and all(32 <= n <= 96 for n in held.values()), held


def test_a_worker_that_dies_is_started_again(pod):
    before = workers(pod.process.pid)
    assert len(before) == 2
    victim = sorted(before)[0]
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: len(workers(pod.process.pid)) == 2 and victim not in workers(pod.process.pid),
               30, message="a new worker in the dead one's place")
    wait_until(lambda: len(each_worker(pod.url, "/readyz")) == 2 and all(
        a.status_code == 200 for a in each_worker(pod.url, "/readyz").values()), 60,
        message="both workers ready again")
    assert fresh(pod.url, "/api/v1/configmaps").status_code == 200


def test_connections_waiting_for_a_worker_that_died_are_answered_by_its_replacement(pod):
    """A worker's socket is the supervisor's: a worker killed leaves its queue to the one started
    in its place, so connections the kernel gave to that socket meanwhile wait, none is
    reset."""
    wait_until(lambda: len(workers(pod.process.pid)) == 2, 30, message="two workers")
    os.kill(sorted(workers(pod.process.pid))[0], signal.SIGKILL)
    answers: list[int] = []

    def ask() -> None:
        with httpx.Client(timeout=120) as client:
            answers.append(client.get(pod.url + "/api/v1/configmaps?limit=1").status_code)

    askers = [threading.Thread(target=ask) for _ in range(32)]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join(150)
    assert answers == [200] * 32


def test_sigterm_ends_every_workers_streams_and_exits_cleanly(local_cluster, tmp_path, demo):
    gateway = Gateway(local_cluster, tmp_path, "--workers", "2")
    lines: list[str] = []
    try:
        def read() -> None:
            with httpx.stream("GET", f"{gateway.url}/api/v1/namespaces/{demo}/configmaps",
                              headers={"Accept": "text/event-stream"}, timeout=60) as response:
                for line in response.iter_lines():
                    lines.append(line)

        readers = [threading.Thread(target=read) for _ in range(4)]
        for reader in readers:
            reader.start()
        wait_until(lambda: lines.count("event: SYNCED") == 4, 30, message="four streams synced")
    finally:
        began = time.monotonic()
        code = gateway.stop()  # SIGTERM to the supervisor
        took = time.monotonic() - began
    for reader in readers:
        reader.join(10)
    assert code == 0 and took < 25
    assert lines.count("event: ERROR") == 4, "each stream's last words"
    assert sum(1 for line in lines if line.startswith("retry:")) >= 8, "retry: first and last"


def test_as_pid_1_of_its_namespace_the_workers_live(local_cluster, tmp_path):
    """In a container the supervisor is PID 1: its workers once took a parent of PID 1 for a
    dead supervisor and ended themselves, over and over (found running the chart on a node:
    tests/deploy/test_chart_on_node.py). Run as PID 1 of a PID namespace of its own, the
    pod serves and no worker exits."""
    import shutil
    import subprocess
    import sys

    from control_plane.cluster import free_port

    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.fail("needs util-linux's unshare, as root (a new PID namespace)")
    kubeconfig = local_cluster.write_kubeconfig(tmp_path / "kubeconfig", local_cluster.admin)
    port = free_port()
    log = tmp_path / "gateway.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m",
             "app.launch.cli", "serve", "--kubeconfig", str(kubeconfig), "--port", str(port),
             "--workers", "2"], stdout=out, stderr=subprocess.STDOUT)

    def ready() -> bool:
        if process.poll() is not None:
            pytest.fail(log.read_text()[-2000:])
        try:
            return fresh(f"http://127.0.0.1:{port}", "/readyz").status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(ready, 60, message="the pod ready")
        time.sleep(3)
        assert "exited" not in log.read_text(), log.read_text()[-2000:]
        answers = each_worker(f"http://127.0.0.1:{port}", "/api/v1/namespaces")
        assert set(answers) == {"0", "1"}
    finally:
        # the supervisor is unshare's one child (PID 1 inside): SIGTERM ends it cleanly
        with open(f"/proc/{process.pid}/task/{process.pid}/children") as f:
            for child in f.read().split():
                os.kill(int(child), signal.SIGTERM)
        process.wait(30)
