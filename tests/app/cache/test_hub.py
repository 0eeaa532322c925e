"""EventHub: a consistent view, a ring with exact ids, and honest resourceVersion resumes."""

from __future__ import annotations

import asyncio

from app.cache.event import frames
from app.cache.hub import HOLD_INEXACT
from app.cache.subscriber import Subscriber
from app.query.selection import Selection
from informer_core.delta_fifo import DeletedFinalStateUnknown
from informer_core.labels import parse_selector
from tests.app.cache.hubs import change, obj, ready_hub, waiting


def test_initial_population_is_not_an_event_and_sets_the_version():
    hub = ready_hub(obj("a", 5), obj("b", 7), at=12)  # listed at 12: nothing changed since 7
    assert hub.rv == 12 and hub.exact == 12 and hub.seq == 0 and list(hub.ring) == []
    assert [o.key for o in hub.snapshot(Selection())] == ["n/a", "n/b"]
    assert hub.events_after_rv(12) == [] and hub.events_after_rv(7) is None


def test_a_snapshot_filters_by_everything_the_selection_asks_beyond_all_namespaces():
    hub = ready_hub(obj("a", 5, {"team": "red"}), obj("b", 6), obj("c", 7, {"team": "red"}, ns="m"))
    assert [o.key for o in hub.snapshot(Selection())] == ["m/c", "n/a", "n/b"]
    assert [o.key for o in hub.snapshot(Selection(namespace="n"))] == ["n/a", "n/b"]
    red = Selection(labels=parse_selector("team=red"))
    assert [o.key for o in hub.snapshot(red)] == ["m/c", "n/a"]
    assert sorted(o.key for o in hub.snapshot(red, ordered=False)) == ["m/c", "n/a"]


def test_events_at_points_carry_their_version_as_id_and_resume_by_it():
    hub = ready_hub(obj("a", 5))
    change(hub, "b", 8)
    change(hub, "a", 9, 5)
    hub.apply("delete", obj("b", 10), None, "10")
    assert [(e.type, e.obj.name, e.rv, e.id) for e in hub.ring] == [
        ("ADDED", "b", 8, "8"), ("MODIFIED", "a", 9, "9"), ("DELETED", "b", 10, "10")]
    assert [e.obj.name for e in hub.events_after_rv(8, watch=True)] == ["a", "b"]
    assert hub.events_after_rv(10) == []
    assert [e.seq for e in hub.events_after_id("8")] == [2, 3]
    assert [e.seq for e in hub.events_after_id(f"{hub.id}.1")] == [2, 3]
    assert hub.events_after_id("10") == []
    assert hub.events_after_id("other.1") is None and hub.events_after_id(f"{hub.id}.99") is None


def test_a_version_between_changes_is_the_state_before_the_next_one():
    hub = ready_hub(obj("a", 5))
    change(hub, "a", 9, 5)
    assert [e.rv for e in hub.events_after_rv(7)] == [9], "nothing changed from 5 to 8"
    assert hub.events_after_rv(4) is None, "before the first point"
    hub.settle("15")  # a bookmark: nothing changed up to 15
    assert hub.events_after_rv(12) == [] and hub.rv == 15 and hub.exact == 15


def test_same_version_updates_are_not_events():
    hub = ready_hub(obj("a", 5))
    hub.apply("update", obj("a", 5), obj("a", 5), "5")  # a resync
    assert list(hub.ring) == []


def test_the_ring_is_bounded_and_old_positions_expire():
    hub = ready_hub(obj("a", 1), ring=3)
    for rv in range(2, 8):
        change(hub, "a", rv, rv - 1)
    assert [e.rv for e in hub.ring] == [5, 6, 7]
    assert hub.events_after_rv(3) is None          # evicted: 410
    assert [e.rv for e in hub.events_after_rv(4)] == [5, 6, 7]
    assert hub.events_after_id(f"{hub.id}.1") is None and hub.events_after_id("3") is None
    assert hub.oldest == 4


def test_a_burst_grouped_by_object_goes_out_whole_in_version_order():
    async def scenario():
        hub = ready_hub(obj("a", 5), obj("b", 6))
        sub = Subscriber(Selection(), 100)
        hub.subscribe(sub)
        # the informer popped a with 9 while b's 7 still waited: not at a point
        hub.apply("update", obj("a", 9), obj("a", 5), "")
        assert list(waiting(sub)) == [], "held: the rest of the burst is on its way"
        hub.apply("update", obj("b", 7), obj("b", 6), "9")
        assert [(e.obj.name, e.rv, e.id) for e, _ in waiting(sub)] == [("b", 7, "7"), ("a", 9, "9")]
        assert [e.seq for e in hub.ring] == [1, 2] and hub.ring[0].obj.name == "b"
        assert not any(e.restamped for e in hub.ring), "each at its object's own version"
        assert [e.obj.name for e in hub.events_after_rv(7, watch=True)] == ["a"]
        assert hub.events_after_id("9") == [] and hub.events_after_id(f"{hub.id}.1") == [hub.ring[1]]
        # a lone straggler is not held for good; with no point it is not resumed from
        hub.apply("update", obj("a", 11), obj("a", 9), "")
        await asyncio.sleep(HOLD_INEXACT * 3)
        event, _ = list(waiting(sub))[-1]
        assert (event.obj.name, event.rv, event.id) == ("a", 11, f"{hub.id}.3")
        assert hub.events_after_rv(11, watch=True) is None
        hub.apply("update", obj("b", 10), obj("b", 7), "")  # behind what went out: stamped
        await asyncio.sleep(HOLD_INEXACT * 3)
        late, _ = list(waiting(sub))[-1]
        assert late.restamped and late.rv == 11

    asyncio.run(scenario())


def test_a_relist_tombstone_is_an_event_at_the_lists_point():
    async def scenario():  # events not at a point are held on the loop
        hub = ready_hub(obj("a", 5), obj("b", 6))
        tombstone = DeletedFinalStateUnknown("n/b", obj("b", 6))
        hub.apply("delete", tombstone, None, "")  # found by a relist listed at 20
        hub.apply("update", obj("a", 7), obj("a", 5), "20")
        modified, deleted = hub.ring
        assert (modified.type, modified.rv, modified.restamped) == ("MODIFIED", 7, False)
        assert (deleted.type, deleted.rv, deleted.id) == ("DELETED", 20, "20"), \
            "a deletion of unknown version: last, at the list's version"
        assert "n/b" not in hub.view and hub.rv == 20
        assert hub.events_after_rv(7, watch=True) is None, "7 was not a point: the deletion's unplaced"
        assert [e.type for e in hub.events_after_rv(6)] == ["MODIFIED", "DELETED"]
        assert hub.events_after_rv(20) == []

    asyncio.run(scenario())


def test_another_process_resumes_a_version_exactly_when_it_was_at_that_point_too():
    async def scenario():  # events not at a point are held on the loop
        changes = [("b", 8, None), ("a", 9, 5), ("c", 10, None), ("b", 11, 8)]
        ours, theirs, grouped = (ready_hub(obj("a", 5), at=6) for _ in range(3))
        for name, rv, old in changes:
            change(ours, name, rv, old)
            change(theirs, name, rv, old)
        # the same changes, but the third process handed out b's two together before a and c
        grouped.apply("add", obj("b", 8), None, "")
        grouped.apply("update", obj("b", 11), obj("b", 8), "")
        grouped.apply("update", obj("a", 9), obj("a", 5), "")
        grouped.apply("add", obj("c", 10), None, "11")
        resumed = theirs.events_after_id(ours.ring[1].id)  # "9"
        assert [(e.obj.name, e.rv) for e in resumed] == [("c", 10), ("b", 11)]
        assert theirs.events_after_id(f"{ours.id}.2") is None, "a local id is this hub's alone"
        # the third sent the burst in version order once whole: the same points
        assert [(e.obj.name, e.id) for e in grouped.ring] == [
            ("b", "8"), ("a", "9"), ("c", "10"), ("b", "11")]
        assert [(e.obj.name, e.rv) for e in grouped.events_after_id("9")] == [("c", 10), ("b", 11)]

    asyncio.run(scenario())


def test_a_client_ahead_of_this_process_is_followed_skipping_what_it_has():
    async def scenario():
        hub = ready_hub(obj("a", 5), obj("b", 6), at=10)
        # another process gave the client version 14 (a's change at 12 included); here the
        # view is still at 10
        assert hub.events_after_rv(14) is None and hub.ahead_of(14) and not hub.ahead_of(10)
        sub = Subscriber(Selection(), 100)
        sub.since = 14
        hub.subscribe(sub)
        change(hub, "a", 12, 5)       # the client has it: skipped
        change(hub, "b", 15, 6)       # new to it
        change(hub, "a", 16, 12)
        assert [(e.obj.name, e.own) for e, _ in waiting(sub)] == [("b", 15), ("a", 16)]
        # read after the view passed 14 (at b's change): what waited from before is still
        # told apart by 14, nothing after it is
        assert sub.since_until == 2
        late = Subscriber(Selection(), 100)
        late.since = 20
        hub.subscribe(late)
        tombstone = DeletedFinalStateUnknown("n/b", obj("b", 15))
        hub.apply("delete", tombstone, None, "30")  # a relist's: when it happened is unknown
        assert late.overflowed, "ended as behind: it resumes from a point next time"

    asyncio.run(scenario())


class _Connection:
    """What ``EventHub.direct`` writes to: ``clear``, ``transport``, ``wrote``."""

    def __init__(self) -> None:
        self.clear, self.wrote, self.written = True, False, []
        self.transport = self

    def write(self, data: bytes) -> None:
        self.written.append(data)


def _names(batch):
    return [(e.obj.name, k) for e, k in batch]


def _encode(batch):
    return frames(batch, "watch") if len(batch) < 3 else None  # three or more: "a burst"


def test_a_group_of_direct_subscribers_gets_the_same_bytes_made_once_as_one_by_one():
    """Written in a group, each stream gets exactly what it would have been offered one by one
    (selection transitions included), the bytes made once for the group."""
    hub = ready_hub(obj("x", 1, {"team": "red"}))
    red = Selection(labels=parse_selector("team=red"))
    alone, got = Subscriber(red, 100), []
    alone.sink = lambda batch: got.append(frames(batch, "watch")) or True
    hub.subscribe(alone)
    made = []
    members = [(Subscriber(red, 100), _Connection()) for _ in range(3)]
    for sub, connection in members:
        hub.subscribe(sub)
        assert hub.direct(sub, connection, (red.group, "watch"),
                          lambda batch: made.append(1) or _encode(batch))
    hub.apply("update", obj("x", 2, {"team": "red", "k": "v"}), obj("x", 1, {"team": "red"}), "2")
    hub.apply("update", obj("x", 3, {"team": "blue"}), obj("x", 2, {"team": "red", "k": "v"}), "3")
    hub.apply("add", obj("y", 4, {"team": "blue"}), None, "4")  # not theirs: nothing written
    hub.apply("update", obj("x", 5, {"team": "red"}), obj("x", 3, {"team": "blue"}), "5")
    assert len(got) == 3 and len(made) == 3, "once per dispatch for the whole group"
    for sub, connection in members:
        assert connection.written == got and connection.wrote
        assert not sub.waiting and sub.direct is not None


def test_a_direct_subscriber_whose_connection_is_not_clear_waits_in_the_ring_and_leaves():
    async def scenario():
        hub = ready_hub(obj("a", 1))
        sub, connection = Subscriber(Selection(), 100), _Connection()
        offered = []
        sub.sink = lambda batch: offered.append(batch) and False  # not ready: it waits
        hub.subscribe(sub)
        assert hub.direct(sub, connection, (sub.selection.group, "watch"), _encode)
        woken = []
        sub.on_wakeup(lambda: woken.append(1))
        connection.clear = False  # the client's socket is full
        change(hub, "b", 2)
        assert connection.written == [] and _names(waiting(sub)) == [("b", "ADDED")]
        assert woken == [1] and sub.direct is None and sub in hub._one_by_one
        change(hub, "c", 3)  # offered one by one from now on, behind what waits
        assert _names(waiting(sub)) == [("b", "ADDED"), ("c", "ADDED")]

    asyncio.run(scenario())


def test_a_burst_is_offered_to_each_member_one_by_one():
    async def scenario():
        hub = ready_hub(obj("a", 1))
        sub, connection = Subscriber(Selection(), 100), _Connection()
        sub.sink = lambda batch: False
        hub.subscribe(sub)
        assert hub.direct(sub, connection, (sub.selection.group, "watch"), _encode)
        for name, rv in (("b", 2), ("c", 3)):
            change(hub, name, rv, settled=False)
        change(hub, "d", 4)  # the burst is whole: three events, too many for the group
        assert connection.written == [] and sub.direct is None
        assert _names(waiting(sub)) == [("b", "ADDED"), ("c", "ADDED"), ("d", "ADDED")]

    asyncio.run(scenario())


def test_who_may_join_a_group_and_who_leaves_it():
    hub = ready_hub(obj("a", 1, {"team": "red"}), at=10)
    key = (Selection().group, "watch")
    ahead = Subscriber(Selection(), 100)
    ahead.since = 12  # skipping what its client has: offered one by one
    hub.subscribe(ahead)
    assert not hub.direct(ahead, _Connection(), key, _encode)
    stranger = Subscriber(Selection(), 100)  # not this hub's
    assert not hub.direct(stranger, _Connection(), key, _encode)

    async def held() -> None:  # began after events still held: they are not its to send
        change(hub, "b", 11, settled=False)
        late = Subscriber(Selection(), 100)
        hub.subscribe(late)
        assert late.after_seq > hub.offered
        assert not hub.direct(late, _Connection(), key, _encode)
        change(hub, "c", 12)
        assert _names(late.take()) == [("c", "ADDED")], "b came with its start"
        assert hub.direct(late, _Connection(), key, _encode), "once they went out"
        hub.unsubscribe(late)

    asyncio.run(held())
    for end in ("close", "hang_up", "_fall_behind"):
        sub = Subscriber(Selection(), 100)
        hub.subscribe(sub)
        assert hub.direct(sub, _Connection(), key, _encode)
        getattr(sub, end)()
        assert sub.direct is None and not hub._direct, end
        assert not hub.direct(sub, _Connection(), key, _encode), f"{end}: ended, never again"
        hub.unsubscribe(sub)
    sub = Subscriber(Selection(), 100)
    hub.subscribe(sub)
    assert hub.direct(sub, _Connection(), key, _encode)
    hub.unsubscribe(sub)
    assert not hub._direct and sub not in hub._one_by_one and not hub.subscribers - {ahead}
