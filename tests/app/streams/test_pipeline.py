"""Watch protocol and Server-Sent Events: framing, resume, selection, limits, slow subscribers
(over an in-memory cluster; across a real API server's restart: ``_live``)."""

from __future__ import annotations

import time

import httpx
import orjson
import pytest

from app.bridge import call_on_loop
from tests.app.conftest import run_gateway
from tests.app.readers import LineReader, _changes, events, sse_events
from tests.helpers import wait_until


@pytest.fixture
def cm_base(namespace):
    return f"/api/v1/namespaces/{namespace}/configmaps"


def test_watch_without_version_starts_with_the_current_objects(gateway, kube, namespace, cm_base):
    gateway.wait_seen(kube.create(cm_base, {"metadata": {"name": "a"}}))
    reader = LineReader(f"{gateway.url}{cm_base}?watch=true")
    try:
        reader.wait_for(lambda l: ("ADDED", "a") in events(l))
        gateway.wait_seen(kube.create(cm_base, {"metadata": {"name": "b"}}))
        gateway.wait_seen(kube.patch(f"{cm_base}/a", {"data": {"x": "1"}}))
        kube.delete(f"{cm_base}/b")
        reader.wait_for(lambda l: len(events(l)) == 4)
        assert events(reader.lines) == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
        assert reader.headers["content-type"].startswith("application/json")
        assert "content-encoding" not in reader.headers
    finally:
        reader.close()


def test_watch_resumes_exactly_after_a_resource_version(gateway, kube, namespace, cm_base):
    listed = httpx.get(f"{gateway.url}{cm_base}").json()
    rv = listed["metadata"]["resourceVersion"]
    gateway.wait_seen(kube.create(cm_base, {"metadata": {"name": "one"}}))
    two = kube.create(cm_base, {"metadata": {"name": "two"}})
    gateway.wait_seen(two)
    reader = LineReader(f"{gateway.url}{cm_base}?watch=true&resourceVersion={rv}")
    try:
        reader.wait_for(lambda l: len(events(l)) == 2)
        assert events(reader.lines) == [("ADDED", "one"), ("ADDED", "two")]
    finally:
        reader.close()
    after_two = LineReader(f"{gateway.url}{cm_base}?watch=true&resourceVersion={two['metadata']['resourceVersion']}")
    try:
        kube.create(cm_base, {"metadata": {"name": "three"}})
        after_two.wait_for(lambda l: len(events(l)) >= 1)
        assert events(after_two.lines) == [("ADDED", "three")]
    finally:
        after_two.close()


def test_watch_from_a_version_older_than_the_ring_gets_410(gateway, cm_base):
    reader = LineReader(f"{gateway.url}{cm_base}?watch=true&resourceVersion=1")
    assert reader.ended()
    (line,) = [l for l in reader.lines if l.strip()]
    doc = orjson.loads(line)
    assert doc["type"] == "ERROR"
    assert doc["object"]["code"] == 410 and doc["object"]["reason"] == "Expired"
    reader.close()


def test_watch_with_selector_sends_transitions_as_the_watch_cache(gateway, kube, namespace, cm_base):
    reader = LineReader(f"{gateway.url}{cm_base}?watch=true&labelSelector=team%3Dred")
    try:
        gateway.wait_streams(1)
        kube.create(cm_base, {"metadata": {"name": "blue", "labels": {"team": "blue"}}})
        kube.create(cm_base, {"metadata": {"name": "x", "labels": {"team": "red"}}})
        kube.patch(f"{cm_base}/x", {"data": {"k": "v"}})            # stays red: MODIFIED
        moved = kube.patch(f"{cm_base}/x", {"metadata": {"labels": {"team": "blue"}}})  # leaves: DELETED
        kube.patch(f"{cm_base}/blue", {"data": {"k": "v"}})         # never matched: nothing
        kube.patch(f"{cm_base}/x", {"metadata": {"labels": {"team": "red"}}})  # enters: ADDED
        reader.wait_for(lambda l: len(events(l)) == 4)
        assert events(reader.lines) == [("ADDED", "x"), ("MODIFIED", "x"), ("DELETED", "x"), ("ADDED", "x")]
        deleted = orjson.loads(reader.lines[2])["object"]
        assert deleted["metadata"]["labels"] == {"team": "red"}, "last matching state"
        # at the new version - or a later one, when the informer handed "blue"'s change on
        # first (its queue groups a burst by object): versions on the wire never go back
        assert int(deleted["metadata"]["resourceVersion"]) >= int(moved["metadata"]["resourceVersion"])
        versions = [int(orjson.loads(line)["object"]["metadata"]["resourceVersion"])
                    for line in reader.lines if line.strip()]
        assert versions == sorted(versions)
    finally:
        reader.close()


def test_bookmarks_when_asked_and_timeout_seconds(backend, cm_base):
    # A gateway of its own: a bookmark names the hub's version, which earlier tests'
    # bursts of writes may have left naming more than one position (then none is sent).
    with run_gateway(backend) as gateway:
        started = time.monotonic()
        reader = LineReader(f"{gateway.url}{cm_base}?watch=true&allowWatchBookmarks=true&timeoutSeconds=3")
        assert reader.ended(timeout=10)
        elapsed = time.monotonic() - started
    assert 2.5 < elapsed < 6
    kinds = [orjson.loads(l)["type"] for l in reader.lines if l.strip()]
    assert kinds.count("BOOKMARK") >= 2
    bookmark = next(orjson.loads(l) for l in reader.lines if '"BOOKMARK"' in l)
    assert bookmark["object"]["kind"] == "ConfigMap" and bookmark["object"]["metadata"]["resourceVersion"]
    reader.close()


def test_no_bookmarks_unless_asked(gateway, cm_base):
    reader = LineReader(f"{gateway.url}{cm_base}?watch=true&timeoutSeconds=2")
    assert reader.ended(timeout=10)
    assert not any('"BOOKMARK"' in l for l in reader.lines)
    reader.close()


def test_a_slow_watcher_is_disconnected_and_others_unaffected(backend, kube, namespace, cm_base):
    with run_gateway(backend) as gw:
        fast = LineReader(f"{gw.url}{cm_base}?watch=true")
        try:
            fast.wait_for(lambda l: True, timeout=2)
            entry = None
            deadline = time.monotonic() + 10
            while entry is None and time.monotonic() < deadline:
                entry = next(iter(gw.gateway.default.caches.entries().values()), None)
                time.sleep(0.05)
            # A subscriber that never reads: offer events straight to a queue no one drains.
            from app.cache.subscriber import Subscriber
            from app.query.selection import Selection

            stuck = Subscriber(Selection(namespace), 5)
            call_on_loop(gw.gateway.loop, entry.hub.subscribe, stuck)
            kube.create_many(cm_base, [{"metadata": {"name": f"s{i}"}} for i in range(12)])
            fast.wait_for(lambda l: len(events(l)) >= 12)
            assert stuck.overflowed and stuck.fell_behind.is_set()
            assert not stuck.waiting and stuck.take() == [], "what it will never send is let go"
            assert not fast.ended(timeout=0.5), "the fast watcher keeps its stream"
        finally:
            fast.close()


def test_sse_initial_state_synced_live_and_resume(gateway, kube, namespace, cm_base):
    gateway.wait_seen(kube.create(cm_base, {"metadata": {"name": "s0"}}))
    url = f"{gateway.url}/core/v1/namespaces/{namespace}/configmaps"
    reader = LineReader(url, {"Accept": "text/event-stream"})
    try:
        reader.wait_for(lambda l: any(e.get("event") == "SYNCED" for e in sse_events(l)))
        assert reader.headers["content-type"].startswith("text/event-stream")
        evs = sse_events(reader.lines)
        assert evs[0] == {"retry": "2000"} or "retry" in evs[0]
        added = [e for e in evs if e.get("event") == "ADDED"]
        assert [orjson.loads(e["data"])["metadata"]["name"] for e in added] == ["s0"]
        kube.create(cm_base, {"metadata": {"name": "s1"}})
        reader.wait_for(lambda l: any(e.get("event") == "ADDED" and '"s1"' in e["data"]
                                      for e in sse_events(l)))
        last_id = [e for e in sse_events(reader.lines) if "id" in e][-1]["id"]
    finally:
        reader.close()
    kube.patch(f"{cm_base}/s1", {"data": {"a": "1"}})
    kube.delete(f"{cm_base}/s0")
    resumed = LineReader(url, {"Accept": "text/event-stream", "Last-Event-ID": last_id})
    try:
        resumed.wait_for(lambda l: len([e for e in sse_events(l) if "event" in e]) >= 2)
        time.sleep(0.3)  # a while for anything that should not come (a RESET, a duplicate)
        got = [(e["event"], orjson.loads(e["data"])["metadata"]["name"])
               for e in sse_events(resumed.lines) if e.get("event") in ("ADDED", "MODIFIED", "DELETED")]
        assert got == [("MODIFIED", "s1"), ("DELETED", "s0")]
        assert not any(e.get("event") in ("RESET", "SYNCED") for e in sse_events(resumed.lines))
    finally:
        resumed.close()


def test_sse_unknown_id_gets_reset_then_fresh_state(gateway, namespace, kube, cm_base):
    gateway.wait_seen(kube.create(cm_base, {"metadata": {"name": "r0"}}))
    url = f"{gateway.url}/core/v1/namespaces/{namespace}/configmaps"
    reader = LineReader(url, {"Accept": "text/event-stream", "Last-Event-ID": "deadbeef.12"})
    try:
        reader.wait_for(lambda l: any(e.get("event") == "SYNCED" for e in sse_events(l)))
        kinds = [e["event"] for e in sse_events(reader.lines) if "event" in e]
        assert kinds == ["RESET", "ADDED", "SYNCED"]
    finally:
        reader.close()


def test_sse_over_the_stream_limit_is_a_200_with_retry_and_error_429(backend, namespace):
    with run_gateway(backend, max_streams_per_client=1) as gw:
        url = f"{gw.url}/core/v1/namespaces/{namespace}/configmaps"
        first = LineReader(url, {"Accept": "text/event-stream"})
        try:
            first.wait_for(lambda l: any(e.get("event") == "SYNCED" for e in sse_events(l)))
            second = LineReader(url, {"Accept": "text/event-stream"})
            assert second.ended()
            assert second.status == 200
            evs = sse_events(second.lines)
            assert "retry" in evs[0]
            error = next(e for e in evs if e.get("event") == "ERROR")
            assert orjson.loads(error["data"])["code"] == 429
            second.close()
            watch = httpx.get(f"{gw.url}/api/v1/namespaces/{namespace}/configmaps?watch=true")
            assert watch.status_code == 429
        finally:
            first.close()


@pytest.mark.timeout(120)
def test_sse_subscriber_that_falls_behind_gets_error_429_and_the_stream_ends(backend, namespace):
    with run_gateway(backend, subscriber_queue=2) as gw:
        url = f"{gw.url}/core/v1/namespaces/{namespace}/configmaps"
        reader = LineReader(url, {"Accept": "text/event-stream"})
        try:
            reader.wait_for(lambda l: any(e.get("event") == "SYNCED" for e in sse_events(l)))
            (entry,) = gw.gateway.default.caches.entries().values()
            (subscriber,) = entry.hub.subscribers

            def overflow():  # what offer() does when the bounded queue is full
                subscriber.overflowed = True
                subscriber._wakeup.set()

            call_on_loop(gw.gateway.loop, overflow)
            assert reader.ended(timeout=10)
            error = [e for e in sse_events(reader.lines) if e.get("event") == "ERROR"]
            assert len(error) == 1 and orjson.loads(error[0]["data"])["code"] == 429
            assert "id" not in error[0], "an ERROR must not move the client's Last-Event-ID"
            metrics = httpx.get(f"{gw.url}/metrics").text
            assert 'kcg_streams_cut_off_total{kind="sse"} 1.0' in metrics, "counted, for the alert"
        finally:
            reader.close()


def test_subscriber_queue_bound_marks_overflow_instead_of_growing():
    from app.cache.event import Event
    from app.cache.subscriber import Subscriber
    from app.query.selection import Selection
    from informer_core.encoded import EncodedObject

    subscriber = Subscriber(Selection(), max_queue=3)
    obj = EncodedObject.from_dict({"metadata": {"name": "x", "namespace": "n", "resourceVersion": "5"}})
    for seq in range(10):
        subscriber.offer([Event(seq, "ADDED", obj, None, 5, "hub")])
    assert subscriber.overflowed and subscriber.fell_behind.is_set()
    assert not subscriber.waiting and subscriber.take() == [], "nothing waiting will be sent"


def test_sse_id_pushed_out_of_the_ring_gets_reset_and_fresh_state(backend, kube, namespace, cm_base):
    with run_gateway(backend, event_ring_size=3) as gw:
        url = f"{gw.url}/core/v1/namespaces/{namespace}/configmaps"
        reader = LineReader(url, {"Accept": "text/event-stream"})
        try:
            reader.wait_for(lambda l: any(e.get("event") == "SYNCED" for e in sse_events(l)))
            kube.create(cm_base, {"metadata": {"name": "r1"}})
            reader.wait_for(lambda l: ("ADDED", "r1") in _changes(l))
            old_id = [e for e in sse_events(reader.lines) if e.get("event") == "ADDED"][-1]["id"]
        finally:
            reader.close()
        for i in range(5):  # five more events through a ring of three: old_id falls out
            last = kube.patch(f"{cm_base}/r1", {"data": {"n": str(i)}})
        gw.wait_seen(last)
        again = LineReader(url, {"Accept": "text/event-stream", "Last-Event-ID": old_id})
        try:
            again.wait_for(lambda l: any(e.get("event") == "SYNCED" for e in sse_events(l)))
            kinds = [e["event"] for e in sse_events(again.lines) if "event" in e]
            assert kinds == ["RESET", "ADDED", "SYNCED"]
            state = orjson.loads(next(e["data"] for e in sse_events(again.lines) if e.get("event") == "ADDED"))
            assert state["data"] == {"n": "4"}, "the fresh state is the current one"
        finally:
            again.close()
        watch = LineReader(f"{gw.url}{cm_base}?watch=true&resourceVersion=1")
        assert watch.ended()
        assert '"code":410' in "".join(watch.lines)
        watch.close()


def test_streams_wait_for_the_sync_share_one_handler_and_send_heartbeats(backend, namespace):
    # A sync_timeout that no first load can meet: lists get 503, streams must wait instead.
    with run_gateway(backend, sync_timeout=0.001, heartbeat_interval=0.5) as gw:
        url = f"{gw.url}/core/v1/namespaces/{namespace}/configmaps"
        readers = [LineReader(url, {"Accept": "text/event-stream"}) for _ in range(3)]
        try:
            for reader in readers:
                reader.wait_for(lambda l: any(e.get("event") == "SYNCED" for e in sse_events(l)))
                assert reader.status == 200
            (entry,) = gw.gateway.default.caches.entries().values()
            assert len(entry.hub.subscribers) == 3
            assert entry.generic.informer().handler_count() == 1, "one handler per resource"
            readers[0].wait_for(lambda l: ": heartbeat" in l, timeout=5)
        finally:
            for reader in readers:
                reader.close()


@pytest.mark.parametrize("spec_version", ["2.3", "2.4", "2.5"])
def test_a_stalled_stream_is_cut_off_whatever_asgi_version_the_server_speaks(spec_version):
    """Starlette listens for a disconnect only below ASGI 2.4; the stall cut-off rides on
    that listener, so ``StreamBody`` runs it itself: a reader that takes nothing is cut off
    after ``stall_timeout`` under any server."""
    import asyncio

    from app.cache.subscriber import Subscriber
    from app.query.selection import Selection
    from app.streams.pipeline import StreamBody

    async def scenario() -> float:
        subscriber = Subscriber(Selection(), 1)
        sent_first = asyncio.Event()

        async def body():
            yield b"first"
            await asyncio.sleep(3600)  # a stream with nothing more to say for now
            yield b"never"

        async def receive():
            await asyncio.sleep(3600)  # the client neither reads nor leaves
            return {"type": "http.disconnect"}

        async def send(message):
            if message.get("body") == b"first":
                sent_first.set()
                subscriber.fell_behind.set()  # it fell behind; its socket is full from now on
                await asyncio.sleep(3600)

        response = StreamBody(body(), subscriber, 0.3, "text/event-stream", {})
        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": spec_version}}
        began = asyncio.get_running_loop().time()
        await asyncio.wait_for(response(scope, receive, send), 5)
        assert sent_first.is_set()
        return asyncio.get_running_loop().time() - began

    assert 0.25 < asyncio.run(scenario()) < 2


def test_a_settled_stream_has_no_task_and_ends_when_its_client_goes(backend, namespace):
    """Thousands of streams are thousands of tasks, their frames and their timers: a settled
    stream served by the gateway's protocol keeps no task at all, not even its request's
    (``app.streams.handover``), and needs none to learn that its client went away (no
    heartbeat is due for an hour here; only its connection can tell it)."""
    import asyncio
    import socket

    with run_gateway(backend, heartbeat_interval=3600.0, bookmark_interval=3600.0) as gw:
        host, port = gw.url.removeprefix("http://").split(":")
        first = httpx.get(f"{gw.url}/api/v1/namespaces/{namespace}/configmaps")  # loaded
        assert first.status_code == 200

        async def count() -> int:
            return len(asyncio.all_tasks())

        def tasks() -> int:  # on the loop; the counting task counts itself both times
            return asyncio.run_coroutine_threadsafe(count(), gw.gateway.loop).result(5)

        before = tasks()
        conns = []
        for _ in range(20):
            conn = socket.create_connection((host, int(port)), timeout=10)
            conn.sendall(f"GET /api/v1/namespaces/{namespace}/configmaps HTTP/1.1\r\n"
                         f"Host: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n".encode())
            data = b""
            while b"SYNCED" not in data:
                more = conn.recv(65536)
                assert more, data
                data += more
            conns.append(conn)
        gw.wait_streams(20)
        assert tasks() - before == 0, "no task a settled stream: its connection was handed over"
        for conn in conns:
            conn.close()
        gw.wait_streams(0, timeout=3)
        wait_until(lambda: gw.gateway.limiter.open == 0, 3, message="every slot freed")
