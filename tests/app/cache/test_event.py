"""Event: frames made once and shared, stamped versions on the watch, copies kept briefly."""

from __future__ import annotations

from app.cache.event import RecentCopies, frames
from app.cache.subscriber import Subscriber
from app.query.selection import Selection
from tests.app.cache.hubs import change, obj, ready_hub


def test_a_whole_frame_is_made_once_per_dispatch_and_not_kept_after_it():
    hub = ready_hub(obj("a", 1))
    frames = []

    def sink(batch):
        (event, kind), = batch
        frames.append(event.frame(kind, "sse"))
        return True

    for _ in range(3):
        sub = Subscriber(Selection(), 100)
        sub.sink = sink
        hub.subscribe(sub)
    change(hub, "b", 2)
    assert len(frames) == 3 and frames[0] is frames[1] is frames[2], "made once, shared"
    assert frames[0] == b"id: 2\nevent: ADDED\ndata: " + hub.ring[-1].obj.raw + b"\n\n"
    again = hub.ring[-1].frame("ADDED", "sse")  # a resume, later: made again, not kept
    assert again == frames[0] and again is not frames[0]
    assert hub.ring[-1].frame("ADDED", "sse") is not again


def test_a_batch_is_its_frames_in_one_buffer_and_a_lone_event_its_shared_frame():
    hub = ready_hub(obj("a", 1))
    change(hub, "b", 2)
    change(hub, "c", 3)
    b, c = list(hub.ring)
    both = frames([(b, "ADDED"), (c, "ADDED")], "watch")
    assert both == b"".join(b.frame_parts("ADDED", "watch") + c.frame_parts("ADDED", "watch"))
    assert frames([(c, "ADDED")], "sse") == c.frame("ADDED", "sse")


def test_wire_frames_share_the_cached_object_bytes():
    hub = ready_hub(obj("a", 1))
    hub.apply("update", obj("a", 2), obj("a", 1), "2")
    event = hub.ring[-1]
    prefix, body, suffix = event.frame_parts("MODIFIED", "watch")
    assert body is event.obj.raw
    assert prefix + body + suffix == b'{"type":"MODIFIED","object":' + event.obj.raw + b"}\n"
    sse = b"".join(event.frame_parts("MODIFIED", "sse"))
    assert sse == b"id: " + event.id.encode() + b"\nevent: MODIFIED\ndata: " + event.obj.raw + b"\n\n"


def test_recent_copies_are_made_once_and_only_the_last_ones_are_kept():
    hub = ready_hub(obj("a", 5))
    for rv in range(6, 12):
        change(hub, "a", rv, rv - 1)
    events = list(hub.ring)
    copies, made = RecentCopies(limit=3), []

    def make(event):
        made.append(event.seq)
        return b"copy of " + event.obj.raw

    first = copies.get(events[0], "k", lambda: make(events[0]))
    assert copies.get(events[0], "k", lambda: make(events[0])) is first and made == [1]
    copies.get(events[0], "other", lambda: make(events[0]))  # another key: another copy
    for event in events[1:]:
        copies.get(event, "k", lambda e=event: make(e))
    assert len(copies) == 3 and made == [1, 1, 2, 3, 4, 5, 6]  # never more than the limit kept
    copies.get(events[0], "k", lambda: make(events[0]))  # the oldest was dropped: made again
    copies.get(events[-1], "k", lambda: make(events[-1]))  # the newest is still there
    assert made == [1, 1, 2, 3, 4, 5, 6, 1]


def test_on_the_watch_a_stamped_event_carries_its_events_version_and_on_sse_its_own():
    import orjson

    hub = ready_hub(obj("a", 5), obj("b", 6))
    hub.apply("update", obj("a", 9), obj("a", 5), "9")
    hub.apply("update", obj("b", 7), obj("b", 6), "12")  # a relist's (listed at 12), behind a@9
    late = hub.ring[-1]
    assert late.restamped and late.rv == 12
    watch_obj = orjson.loads(b"".join(late.frame_parts("MODIFIED", "watch"))[:-1].split(
        b'"object":', 1)[1][:-1])
    assert watch_obj["metadata"]["resourceVersion"] == "12"
    assert watch_obj["metadata"]["name"] == "b"
    sse_obj = late.frame_parts("MODIFIED", "sse")[1]
    assert sse_obj is late.obj.raw  # SSE is resumed by id: the object as it is
    on_time = hub.ring[-2]
    assert not on_time.restamped
    assert on_time.frame_parts("MODIFIED", "watch")[1] is on_time.obj.raw  # no copy
