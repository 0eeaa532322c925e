"""EventHub: a consistent view, a ring with exact ids, and honest resourceVersion resumes."""

from __future__ import annotations

from app.events import EventHub, Subscriber
from app.selection import Selection
from informer_core.delta_fifo import DeletedFinalStateUnknown
from informer_core.encoded import EncodedObject
from informer_core.labels import parse_selector


def obj(name, rv, labels=None, ns="n"):
    return EncodedObject.from_dict({"metadata": {"name": name, "namespace": ns, "resourceVersion": str(rv),
                                                 "labels": labels or {}}})


def ready_hub(*objects, ring=100):
    hub = EventHub(ring)
    for o in objects:
        hub.apply("add", o, None)
    hub.mark_ready()
    return hub


def test_initial_population_is_not_an_event_and_sets_the_version():
    hub = ready_hub(obj("a", 5), obj("b", 7))
    assert hub.rv == 7 and hub.seq == 0 and list(hub.ring) == []
    assert [o.key for o in hub.snapshot(Selection())] == ["n/a", "n/b"]


def test_events_are_published_in_order_and_resumable_by_version_and_id():
    hub = ready_hub(obj("a", 5))
    hub.apply("add", obj("b", 8), None)
    hub.apply("update", obj("a", 9), obj("a", 5))
    hub.apply("delete", obj("b", 10), None)
    assert [(e.type, e.obj.name, e.rv) for e in hub.ring] == [
        ("ADDED", "b", 8), ("MODIFIED", "a", 9), ("DELETED", "b", 10)]
    assert [e.obj.name for e in hub.events_after_rv(8)] == ["a", "b"]
    assert hub.events_after_rv(10) == []
    first = hub.ring[0]
    assert [e.seq for e in hub.events_after_id(first.id)] == [2, 3]
    assert hub.events_after_id(hub.ring[-1].id) == []
    assert hub.events_after_id("other.1") is None and hub.events_after_id(f"{hub.id}.99") is None


def test_same_version_updates_are_not_events():
    hub = ready_hub(obj("a", 5))
    hub.apply("update", obj("a", 5), obj("a", 5))  # a resync
    assert list(hub.ring) == []


def test_the_ring_is_bounded_and_old_positions_expire():
    hub = ready_hub(obj("a", 1), ring=3)
    for rv in range(2, 8):
        hub.apply("update", obj("a", rv), obj("a", rv - 1))
    assert [e.rv for e in hub.ring] == [5, 6, 7]
    assert hub.events_after_rv(3) is None          # evicted: 410
    assert [e.rv for e in hub.events_after_rv(4)] == [5, 6, 7]
    assert hub.events_after_id(f"{hub.id}.1") is None


def test_relist_events_make_their_version_ambiguous_so_resumes_there_are_refused():
    hub = ready_hub(obj("a", 5), obj("b", 6))
    hub.apply("update", obj("a", 7), obj("a", 5))
    tombstone = DeletedFinalStateUnknown("n/b", obj("b", 6))
    hub.apply("delete", tombstone, None)  # found by a relist: no version of its own
    assert hub.ring[-1].type == "DELETED" and hub.ring[-1].rv == 7
    assert hub.events_after_rv(7) is None, "7 names two positions now"
    assert [e.type for e in hub.events_after_rv(6)] == ["MODIFIED", "DELETED"]
    assert "n/b" not in hub.view


def test_subscribers_see_selector_transitions():
    hub = ready_hub(obj("x", 1, {"team": "red"}))
    sub = Subscriber(Selection(labels=parse_selector("team=red")), 100)
    hub.subscribe(sub)
    hub.apply("update", obj("x", 2, {"team": "red", "k": "v"}), obj("x", 1, {"team": "red"}))
    hub.apply("update", obj("x", 3, {"team": "blue"}), obj("x", 2, {"team": "red", "k": "v"}))
    hub.apply("add", obj("y", 4, {"team": "blue"}), None)
    hub.apply("update", obj("x", 5, {"team": "red"}), obj("x", 3, {"team": "blue"}))
    kinds = [(e.obj.name, k) for e, k in sub._queue]
    assert kinds == [("x", "MODIFIED"), ("x", "DELETED_OLD"), ("x", "ADDED")]
    event, kind = list(sub._queue)[1]
    import orjson

    old_stamped = orjson.loads(event.object_bytes(kind))
    assert old_stamped["metadata"]["labels"] == {"team": "red", "k": "v"}
    assert old_stamped["metadata"]["resourceVersion"] == "3"


def test_wire_frames_share_the_cached_object_bytes():
    hub = ready_hub(obj("a", 1))
    hub.apply("update", obj("a", 2), obj("a", 1))
    event = hub.ring[-1]
    prefix, body, suffix = event.frame_parts("MODIFIED", "watch")
    assert body is event.obj.raw
    assert prefix + body + suffix == b'{"type":"MODIFIED","object":' + event.obj.raw + b"}\n"
    sse = b"".join(event.frame_parts("MODIFIED", "sse"))
    assert sse == b"id: " + event.id.encode() + b"\nevent: MODIFIED\ndata: " + event.obj.raw + b"\n\n"


def test_on_the_watch_a_relist_event_carries_its_events_version_and_on_sse_its_own():
    import orjson

    hub = ready_hub(obj("a", 5), obj("b", 6))
    hub.apply("update", obj("a", 9), obj("a", 5))
    hub.apply("update", obj("b", 7), obj("b", 6))  # a relist's, behind a@9
    late = hub.ring[-1]
    assert late.restamped and late.rv == 9
    watch_obj = orjson.loads(b"".join(late.frame_parts("MODIFIED", "watch"))[:-1].split(
        b'"object":', 1)[1][:-1])
    assert watch_obj["metadata"]["resourceVersion"] == "9"
    assert watch_obj["metadata"]["name"] == "b"
    sse_obj = late.frame_parts("MODIFIED", "sse")[1]
    assert sse_obj is late.obj.raw  # SSE is resumed by id: the object as it is
    on_time = hub.ring[-2]
    assert not on_time.restamped
    assert on_time.frame_parts("MODIFIED", "watch")[1] is on_time.obj.raw  # no copy
