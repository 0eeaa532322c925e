"""The watch protocol as client-go uses it: resume from the resourceVersion of the last event
received. Versions on the wire only increase, so such a resume gets exactly the rest or a 410 —
never a replay of events the client already has (a relist's events included)."""

from __future__ import annotations

import time
import uuid

import httpx
import orjson

from tests.app.conftest import wait_until


class ResumingWatcher:
    """A watch client that keeps a state and resumes as client-go's reflector does."""

    def __init__(self, base: str, path: str) -> None:
        self.base, self.path = base, path
        self.state: dict[str, str] = {}  # name -> resourceVersion, as the client last got it
        # name -> content: a relist's event carries its event's version on the watch, not the
        # object's own, so after one the versions a client holds differ, the objects do not
        self.contents: dict[str, dict] = {}
        self.rv = ""
        self.delivered: list[tuple[str, str, str]] = []  # (type, name, wire resourceVersion)
        self._changes: list[tuple[str, str, bytes]] = []  # (type, name, content): one per change
        self.kinds: dict[str, int] = {}  # every event type received, over relists too
        self.gone = 0
        self.workers: list[str] = []  # the worker process that answered each watch

    def relist(self) -> None:
        body = httpx.get(self.base + self.path, timeout=30).json()
        self._changes.clear()  # a fresh state: what comes next is new to it
        self.delivered.clear()
        self.state = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in body["items"]}
        self.contents = {o["metadata"]["name"]: o.get("data") for o in body["items"]}
        self.rv = body["metadata"]["resourceVersion"]

    def watch(self, seconds: float, other_worker: bool = False) -> None:
        """Read events for ``seconds`` from ``self.rv``; a 410 relists, as client-go does.
        ``other_worker``: reconnect until another worker process than last time answers."""
        deadline = time.monotonic() + seconds
        for _ in range(50):
            with httpx.stream("GET", self.base + self.path, timeout=10, params={
                    "watch": "true", "resourceVersion": self.rv, "allowWatchBookmarks": "true",
                    "timeoutSeconds": str(max(1, round(seconds)))}) as response:
                worker = response.headers.get("kcg-worker", "")
                if other_worker and self.workers and worker == self.workers[-1]:
                    continue
                self.workers.append(worker)
                self._read(response, deadline)
                return
        raise AssertionError("never reached another worker")

    def _read(self, response: httpx.Response, deadline: float) -> None:
        for line in response.iter_lines():
            if line:
                event = orjson.loads(line)
                kind, obj = event["type"], event["object"]
                if kind == "ERROR":
                    assert obj["code"] == 410, obj
                    self.gone += 1
                    self.relist()
                    return
                meta = obj["metadata"]
                self.rv = meta["resourceVersion"]
                if kind == "BOOKMARK":
                    continue
                self.delivered.append((kind, meta["name"], meta["resourceVersion"]))
                self.kinds[kind] = self.kinds.get(kind, 0) + 1
                content = {k: v for k, v in obj.items() if k != "metadata"}
                self._changes.append((kind, meta["name"], orjson.dumps(
                    [content, meta.get("labels"), meta.get("uid")],
                    option=orjson.OPT_SORT_KEYS)))
                if kind == "DELETED":
                    self.state.pop(meta["name"], None)
                    self.contents.pop(meta["name"], None)
                else:
                    self.state[meta["name"]] = meta["resourceVersion"]
                    self.contents[meta["name"]] = obj.get("data")
            if time.monotonic() > deadline:
                return

    def duplicates(self) -> list[tuple[str, str, str]]:
        """Changes delivered more than once: the same event type for the same content of the
        same object (a relist's events share their wire version, so versions cannot tell)."""
        seen, again = set(), []
        for item, delivered in zip(self._changes, self.delivered):
            if item in seen:
                again.append(delivered)
            seen.add(item)
        return again


def test_a_resume_after_a_relist_replays_nothing_the_client_has(backend, kube, gateway):
    namespace = f"w-{uuid.uuid4().hex[:8]}"
    kube.ensure_namespace(namespace)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for i in range(10):
        gateway.wait_seen(kube.create(path, {"metadata": {"name": f"o{i}"}, "data": {"v": "0"}}))
    client = ResumingWatcher(gateway.url, path)
    client.relist()
    # the gateway misses two changes (its watch held), then its watch ends and the history is
    # gone: it relists, and finds them in key order - o1 first, though o9 changed first
    backend.pause_watches()
    o9 = kube.patch(f"{path}/o9", {"data": {"v": "1"}})
    o1 = kube.patch(f"{path}/o1", {"data": {"v": "1"}})
    backend.compact()
    backend.end_watches()
    backend.resume_watches()
    gateway.wait_seen(o9)
    gateway.wait_seen(o1)
    client.watch(1.0)  # both changes arrive; the client stands at the last one's version
    assert sorted(name for _, name, _ in client.delivered) == ["o1", "o9"]
    client.watch(1.0)  # and resumes from there, as client-go does
    assert client.duplicates() == []
    versions = [int(rv) for _, _, rv in client.delivered]
    assert versions == sorted(versions), f"versions on the wire only increase: {client.delivered}"
    want = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in kube.get(path)["items"]}
    wait_until(lambda: (client.watch(0.5), client.state == want)[1], 20,
               message="the client's state to equal the API server's")


def test_no_bookmark_passes_events_that_came_while_the_last_ones_were_sent():
    """A bookmark carries the hub's version: sent while events wait in the stream's queue (they
    came during the last write), it would name a version past them, and a client that
    resumed from it would never get them."""
    import asyncio

    from app.cache.hub import EventHub
    from app.cache.subscriber import Subscriber
    from app.kube.request import Accept, parse_query
    from app.query.selection import Selection
    from app.streams.watch import WatchEncoder
    from informer_core.encoded import EncodedObject

    def cm(name: str, rv: int) -> EncodedObject:
        return EncodedObject.from_dict({"kind": "ConfigMap", "metadata": {
            "name": name, "namespace": "ns", "resourceVersion": str(rv)}})

    async def scenario() -> None:
        hub = EventHub(100)
        hub.apply("add", cm("a", 1), None, "1")
        hub.mark_ready()

        class Entry:
            resource = type("R", (), {"kind": "ConfigMap", "api_version": "v1"})()

        entry = Entry()
        entry.hub = hub
        encoder = WatchEncoder(Accept("json"), parse_query(b"watch=true&allowWatchBookmarks=true&resourceVersion=1",
                                                           8192), bookmark_interval=0.0)
        subscriber = Subscriber(Selection(None), 10)
        encoder.begin(entry, subscriber)
        hub.subscribe(subscriber)
        hub.apply("add", cm("b", 2), None, "2")  # came while the stream was writing
        assert subscriber.waiting and hub.exact == 2
        assert encoder.tick(time.monotonic() + 1, idle=False) is None
        subscriber.take()  # sent
        line = orjson.loads(encoder.tick(time.monotonic() + 2, idle=True))
        assert line["type"] == "BOOKMARK" and line["object"]["metadata"]["resourceVersion"] == "2"

    asyncio.run(scenario())
