"""Several replicas behind one Service: an EventSource that reconnects lands on any of them.

Replicas are independent caches, but resourceVersions are etcd's: an event's id
is the version the cache was exactly at right after it, so the replica a
reconnection reaches resumes exactly after it when its own ring covers that
version — no ``RESET``, no gap, no duplicate. Here two gateways sit behind a
round-robin TCP proxy (as a Service spreads connections), an EventSource-style
client reconnects through it again and again while objects are created,
changed and deleted, and its view must end equal to the API server's.
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
import uuid

import httpx
import orjson
import pytest

from control_plane.kubeapi import KubeAPI
from tests.app.conftest import run_gateway

pytestmark = pytest.mark.cluster


class RoundRobinProxy:
    """A TCP proxy sending each new connection to the next backend in turn."""

    def __init__(self, backends: list[tuple[str, int]]) -> None:
        self._backends = itertools.cycle(backends)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.chosen: list[tuple[str, int]] = []
        self._open: list[socket.socket] = []
        self._pumps: list[threading.Thread] = []
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            backend = next(self._backends)
            self.chosen.append(backend)
            upstream = socket.create_connection(backend)
            self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                pump = threading.Thread(target=self._pump, args=(a, b), daemon=True)
                pump.start()
                self._pumps.append(pump)

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._stopped.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        self._listener.close()
        self._thread.join(timeout=5)
        for s in self._open:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        for pump in self._pumps:
            pump.join(timeout=5)


class EventSourceView:
    """What a browser's EventSource user builds: objects by name, kept by the events.

    ``connect`` reads one connection for a while, sending ``Last-Event-ID`` as
    EventSource does; ``RESET`` empties the view before the fresh snapshot.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.last_id: str | None = None
        self.objects: dict[str, str] = {}  # name -> resourceVersion
        self.connections: list[list[str]] = []  # the event types of each connection
        self.workers: list[str] = []  # the worker process that answered each (multi-worker pods)
        self.resumed_from: list[str | None] = []  # the Last-Event-ID each connection sent
        self.duplicates: list[tuple[str, str, str]] = []
        self._seen: set[tuple[str, str, str]] = set()  # changes received since the last RESET

    def connect(self, seconds: float, other_worker: bool = False) -> None:
        """Read one connection for ``seconds``; ``other_worker``: reconnect until it is answered
        by another worker process than the last connection (a pod with ``--workers``)."""
        headers = {"Accept": "text/event-stream"}
        if self.last_id:
            headers["Last-Event-ID"] = self.last_id
        deadline = time.monotonic() + seconds
        for _ in range(50):
            with httpx.stream("GET", self.url, headers=headers, timeout=10) as response:
                assert response.status_code == 200
                worker = response.headers.get("kcg-worker", "")
                if other_worker and self.workers and worker == self.workers[-1]:
                    continue  # the same process again: a fresh connection, as a browser's may be
                self.workers.append(worker)
                self.resumed_from.append(self.last_id)
                kinds: list[str] = []
                self.connections.append(kinds)
                event: dict[str, str] = {}
                for line in response.iter_lines():
                    if line == "":
                        if "event" in event:
                            self._apply(event, kinds)
                        event = {}
                    elif not line.startswith(":"):
                        name, _, value = line.partition(": ")
                        event[name] = value
                    if time.monotonic() > deadline:
                        break
                return
        raise AssertionError("never reached another worker")

    def _apply(self, event: dict[str, str], kinds: list[str]) -> None:
        kind = event["event"]
        kinds.append(kind)
        if "id" in event:
            self.last_id = event["id"]
        if kind == "RESET":
            self.objects.clear()
            self._seen.clear()
        elif kind in ("ADDED", "MODIFIED", "DELETED"):
            meta = orjson.loads(event["data"])["metadata"]
            # (a relist's deletion carries the object's last known state: same version, new event)
            key = (kind, meta["name"], meta["resourceVersion"])
            if key in self._seen:  # this change again, on this connection or after a resume
                self.duplicates.append(key)
            self._seen.add(key)
            if kind == "DELETED":
                self.objects.pop(meta["name"], None)
            else:
                self.objects[meta["name"]] = meta["resourceVersion"]


def test_an_event_source_fails_over_between_replicas_exactly(local_cluster):
    kube = KubeAPI.for_cluster(local_cluster)
    namespace = f"scale-{uuid.uuid4().hex[:8]}"
    kube.ensure_namespace(namespace)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    proxy = None
    stop = threading.Event()
    try:
        with run_gateway(local_cluster) as one, run_gateway(local_cluster) as two:
            ports = [int(g.url.rsplit(":", 1)[1]) for g in (one, two)]
            for replica in (one, two):  # both follow the resource before the client comes
                assert httpx.get(replica.url + path, timeout=30).status_code == 200
            proxy = RoundRobinProxy([("127.0.0.1", p) for p in ports])
            view = EventSourceView(f"http://127.0.0.1:{proxy.port}{path}")

            def write() -> None:  # creates, changes and deletes while the client hops
                for i in itertools.count():
                    if stop.is_set():
                        return
                    kube.create(path, {"metadata": {"name": f"cm-{i}"}, "data": {"v": "0"}})
                    if i >= 1:
                        kube.patch(f"{path}/cm-{i - 1}", {"data": {"v": "1"}})
                    if i >= 2 and i % 2 == 0:
                        kube.delete(f"{path}/cm-{i - 2}")
                    time.sleep(0.05)

            writer = threading.Thread(target=write)
            writer.start()
            try:
                for _ in range(6):
                    view.connect(seconds=1.0)
            finally:
                stop.set()
                writer.join()
            want = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                    for o in kube.get(path)["items"]}
            deadline = time.monotonic() + 20
            while view.objects != want and time.monotonic() < deadline:
                view.connect(seconds=1.0)
            assert view.objects == want
            assert len(want) > 10
            assert view.duplicates == []
            # each reconnection reached the other replica, which resumed after the last id
            resets = [(sent, kinds[:3]) for sent, kinds in zip(view.resumed_from, view.connections)
                      if "RESET" in kinds]
            assert resets == []
            assert len(set(proxy.chosen)) == 2
    finally:
        stop.set()
        if proxy is not None:
            proxy.close()
        kube.delete(f"/api/v1/namespaces/{namespace}")
