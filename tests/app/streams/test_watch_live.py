"""Relists on the real API server: the gateway's watch is held by a fault proxy while changes
pass and the API server restarts (its new watch cache knows nothing older than its start),
then cut; the gateway's watch resumes too old, and it relists. Clients
resuming as client-go does (watch) and as EventSource does (SSE) end with the API server's
state, with no duplicate, versions on the watch only increasing."""

from __future__ import annotations

import re
import time
import types
import uuid
from typing import Any

import httpx
import orjson
import pytest

from control_plane.faults import FaultProxy
from tests.app.conftest import run_gateway, wait_until
from tests.app.streams.test_watch import ResumingWatcher
from tests.deploy.test_scale_out import EventSourceView

pytestmark = pytest.mark.cluster

_CHANGES = 60


def relists(url: str) -> int:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(int(float(v)) for v in re.findall(
        r'^kcg_informer_relists_total\{cluster="default",resource="configmaps[.][^"]*"\} (\S+)$', text, re.M))


def test_clients_come_through_a_relist_with_nothing_lost_or_repeated(local_cluster, kube):
    primary = local_cluster.primary
    namespace = f"relist-{uuid.uuid4().hex[:8]}"
    kube.ensure_namespace(namespace)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for i in range(20):
        kube.create(path, {"metadata": {"name": f"o{i:02d}"}, "data": {"v": "0"}})
    with FaultProxy("127.0.0.1", primary.port) as proxy, \
            run_gateway(local_cluster, server=types.SimpleNamespace(
                url=proxy.url, ca_file=primary.ca_file)) as gateway:
        watcher = ResumingWatcher(gateway.url, path)
        watcher.relist()
        sse = EventSourceView(gateway.url + path)
        sse.connect(seconds=1.0)
        before = relists(gateway.url)
        proxy.pause()
        for n in range(_CHANGES):  # changes in reverse key order, some deletions
            name = f"o{19 - n % 20:02d}"
            if n >= _CHANGES - 5:
                kube.delete(f"{path}/o{n % 5:02d}")
            else:
                kube.patch(f"{path}/{name}", {"data": {"v": str(n)}})
        local_cluster.restart_apiserver()  # its watch cache starts again from now
        proxy.reset()  # the held watch is cut
        proxy.resume()
        wait_until(lambda: relists(gateway.url) > before, 30, message="the gateway to relist")
        want = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                for o in kube.get(path)["items"]}
        # the relist's changes went out in version order, each at its own version: the
        # client holds the API server's objects and versions, resumed exactly or listed again
        wait_until(lambda: (watcher.watch(1.0), watcher.state == want)[1], 30,
                   message="the watch client's state to equal the API server's")
        watcher.watch(1.0)  # resume once more from where it stands
        assert watcher.duplicates() == []
        versions = [int(rv) for _, _, rv in watcher.delivered]
        assert versions == sorted(versions)
        wait_until(lambda: (sse.connect(seconds=1.0), sse.objects == want)[1], 30,
                   message="the SSE client's state to equal the API server's")
        assert sse.duplicates == []
        print(f"\nrelists {relists(gateway.url) - before}, watch events {len(watcher.delivered)}, "
              f"410s {watcher.gone}")


class WatchListReflector:
    """The exchange of client-go 1.35's ``Reflector.watchList`` (``tools/cache/reflector.go``),
    as a test's client: one watch with ``sendInitialEvents=true``,
    ``resourceVersionMatch=NotOlderThan``, ``allowWatchBookmarks=true`` and the last known
    version; ``ADDED`` events fill a temporary store, each object of the expected kind; the
    ``BOOKMARK`` annotated ``k8s.io/initial-events-end: "true"`` ends the state and gives
    its version; the same stream then carries the live events."""

    def __init__(self, base: str, path: str, **params: str) -> None:
        self.base, self.path, self.params = base, path, params
        self.store: dict[str, dict] = {}
        self.version = ""
        self.live: list[tuple[str, dict]] = []
        self._lines: Any = None
        self._response: Any = None
        self._client = httpx.Client(timeout=None)

    def watch_list(self, kind: str, last_known: str = "") -> None:
        params = {"watch": "true", "sendInitialEvents": "true",
                  "resourceVersionMatch": "NotOlderThan", "allowWatchBookmarks": "true",
                  "resourceVersion": last_known, "timeoutSeconds": "60", **self.params}
        self._response = self._client.send(self._client.build_request(
            "GET", self.base + self.path, params=params), stream=True)
        assert self._response.status_code == 200, self._response.read()
        self._lines = self._response.iter_lines()
        for line in self._lines:
            event = orjson.loads(line)
            obj = event["object"]
            if event["type"] == "ADDED":
                assert (obj["kind"], obj["apiVersion"]) == (kind, "v1"), obj  # the expected GVK
                self.store[obj["metadata"]["name"]] = obj
            elif event["type"] == "BOOKMARK":
                annotations = obj["metadata"].get("annotations") or {}
                if annotations.get("k8s.io/initial-events-end") == "true":
                    assert obj["kind"] == kind
                    self.version = obj["metadata"]["resourceVersion"]
                    return
            else:
                raise AssertionError(f"a watch-list stream sent {event['type']}: {obj}")
        raise AssertionError("the stream ended before the initial-events-end bookmark")

    def next_live(self) -> tuple[str, dict]:
        for line in self._lines:
            event = orjson.loads(line)
            if event["type"] != "BOOKMARK":
                return event["type"], event["object"]
        raise AssertionError("the stream ended")

    def close(self) -> None:
        if self._response is not None:
            self._response.close()
        self._client.close()


def test_a_client_go_watch_list_gets_the_state_its_end_and_then_live_events(gateway, kube,
                                                                            namespace):
    """What every client-go 1.35 informer asks first: the gateway answered 422 (as the 1.20 API
    server it copies), costing each informer a refused request, a warning and a LIST. Now:
    the state (as the API server lists it), the bookmark at its version, then live events on
    the same stream; with selectors, and with a version not older than one the API server gave."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for i in range(5):
        kube.create(path, {"metadata": {"name": f"c{i}", "labels": {"tier": "a" if i < 3 else "b"}},
                           "data": {"v": "0"}})
    listed = kube.get(path)
    want = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in listed["items"]}
    reflector = WatchListReflector(gateway.url, path)
    try:
        reflector.watch_list("ConfigMap", last_known=listed["metadata"]["resourceVersion"])
        assert {n: o["metadata"]["resourceVersion"] for n, o in reflector.store.items()} == want
        assert int(reflector.version) >= max(int(v) for v in want.values())
        made = kube.create(path, {"metadata": {"name": "after"}})
        kind, obj = reflector.next_live()
        assert (kind, obj["metadata"]["name"]) == ("ADDED", "after")
        assert int(obj["metadata"]["resourceVersion"]) == int(made["metadata"]["resourceVersion"])
        kube.patch(f"{path}/c0", {"data": {"v": "1"}})
        kind, obj = reflector.next_live()
        assert (kind, obj["metadata"]["name"], obj["data"]) == ("MODIFIED", "c0", {"v": "1"})
    finally:
        reflector.close()
    for params, names in (({"labelSelector": "tier=b"}, {"c3", "c4"}),
                          ({"fieldSelector": "metadata.name=c1"}, {"c1"})):
        selected = WatchListReflector(gateway.url, path, **params)
        try:
            selected.watch_list("ConfigMap")
            assert set(selected.store) == names, params
        finally:
            selected.close()


def test_a_watch_without_the_state_starts_from_now(gateway, kube, namespace):
    """sendInitialEvents=false with NotOlderThan and no version: the legacy watch from now."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    kube.create(path, {"metadata": {"name": "before"}})
    with httpx.stream("GET", gateway.url + path, timeout=30, params={
            "watch": "true", "sendInitialEvents": "false",
            "resourceVersionMatch": "NotOlderThan"}) as stream:
        assert stream.status_code == 200
        lines = stream.iter_lines()
        time.sleep(0.5)  # room for a state that must not come
        kube.create(path, {"metadata": {"name": "later"}})
        first = orjson.loads(next(lines))
        assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "later")
