"""Subscriber: selector transitions, shared batches, a sink, and a cursor instead of a queue."""

from __future__ import annotations

import asyncio
from collections import deque

from app.cache.hub import HOLD_INEXACT
from app.cache.subscriber import Subscriber
from app.query.selection import Selection
from informer_core.labels import parse_selector
from tests.app.cache.hubs import change, obj, ready_hub, waiting


def test_subscribers_see_selector_transitions():
    hub = ready_hub(obj("x", 1, {"team": "red"}))
    sub = Subscriber(Selection(labels=parse_selector("team=red")), 100)
    hub.subscribe(sub)
    hub.apply("update", obj("x", 2, {"team": "red", "k": "v"}), obj("x", 1, {"team": "red"}), "2")
    hub.apply("update", obj("x", 3, {"team": "blue"}), obj("x", 2, {"team": "red", "k": "v"}), "3")
    hub.apply("add", obj("y", 4, {"team": "blue"}), None, "4")
    hub.apply("update", obj("x", 5, {"team": "red"}), obj("x", 3, {"team": "blue"}), "5")
    kinds = [(e.obj.name, k) for e, k in waiting(sub)]
    assert kinds == [("x", "MODIFIED"), ("x", "DELETED_OLD"), ("x", "ADDED")]
    event, kind = list(waiting(sub))[1]
    import orjson

    old_stamped = orjson.loads(event.object_bytes(kind))
    assert old_stamped["metadata"]["labels"] == {"team": "red", "k": "v"}
    assert old_stamped["metadata"]["resourceVersion"] == "3"


def test_equal_selections_filter_each_event_once_between_them(monkeypatch):
    hub = ready_hub(obj("x", 1, {"team": "red"}))
    subscribers = [Subscriber(Selection(labels=parse_selector("team=red")), 100) for _ in range(5)]
    other = Subscriber(Selection(labels=parse_selector("team=blue")), 100)
    for sub in (*subscribers, other):
        hub.subscribe(sub)
    tested = []
    original = Selection.matches

    def counting(self, o, decoded=None):
        tested.append(self.group)
        return original(self, o, decoded)

    monkeypatch.setattr(Selection, "matches", counting)
    hub.apply("update", obj("x", 2, {"team": "blue"}), obj("x", 1, {"team": "red"}), "2")
    assert sorted(tested) == sorted([subscribers[0].selection.group] * 2
                                    + [other.selection.group] * 2), "new and old, once a group"
    assert all([(e.obj.name, k) for e, k in waiting(s)] == [("x", "DELETED_OLD")] for s in subscribers)
    assert [(e.obj.name, k) for e, k in waiting(other)] == [("x", "ADDED")]


def test_equal_selections_share_one_batch_and_one_still_skipping_makes_its_own():
    hub = ready_hub(obj("x", 1, {"team": "red"}), at=10)
    red = Selection(labels=parse_selector("team=red"))
    got = []
    subscribers = [Subscriber(red, 100) for _ in range(3)]
    ahead = Subscriber(red, 100)
    ahead.since = 12  # given version 12 by another process: x's change at 11 is its already
    for sub in (*subscribers, ahead):
        sub.sink = lambda batch, got=got: got.append(batch) or True
        hub.subscribe(sub)
    hub.apply("update", obj("x", 11, {"team": "red"}), obj("x", 1, {"team": "red"}), "11")
    shared = [batch for batch in got if batch]
    assert len(shared) == 3 and shared[0] is shared[1] is shared[2], "one batch for the selection"
    assert [(e.own, k) for e, k in shared[0]] == [(11, "MODIFIED")]
    assert not ahead.waiting and len(got) == 3, "the one ahead skipped it: nothing to send"


def test_a_sink_takes_events_without_waking_the_task_and_a_burst_in_one_call():
    hub = ready_hub(obj("a", 1))
    taken, accepting = [], [True]

    def sink(batch):
        if accepting[0]:
            taken.append([(e.obj.name, k) for e, k in batch])
        return accepting[0]

    async def scenario():
        sub = Subscriber(Selection(), 100)
        sub.sink = sink
        hub.subscribe(sub)
        change(hub, "b", 2)
        assert taken == [[("b", "ADDED")]] and not sub.waiting and not sub._wakeup.is_set()
        change(hub, "c", 3, settled=False)  # a burst: held until the view is at a point again
        change(hub, "d", 4)
        assert taken[1:] == [[("c", "ADDED"), ("d", "ADDED")]], "one write for the burst"
        accepting[0] = False  # the client's socket is full: queued, and the task woken
        change(hub, "e", 5)
        assert [(e.obj.name, k) for e, k in waiting(sub)] == [("e", "ADDED")]
        assert sub._wakeup.is_set()
        accepting[0] = True
        change(hub, "f", 6)  # queued behind what is queued, never ahead of it
        assert [(e.obj.name, k) for e, k in waiting(sub)] == [("e", "ADDED"), ("f", "ADDED")]
        assert len(taken) == 2

    asyncio.run(scenario())


def test_a_subscriber_that_cannot_take_events_keeps_a_cursor_into_the_ring_not_a_queue():
    async def scenario():
        hub = ready_hub(obj("a", 1, {"team": "red"}), ring=200)
        sub = Subscriber(Selection(labels=parse_selector("team=red")), 1000)
        hub.subscribe(sub)
        for rv in range(2, 52):
            hub.apply("update", obj("a", rv, {"team": "red"}), obj("a", rv - 1, {"team": "red"}),
                      str(rv))
            hub.apply("add", obj(f"blue{rv}", rv, {"team": "blue"}), None, str(rv))
        assert sub.waiting and sub._wakeup.is_set()
        held = [v for v in vars(sub).values() if isinstance(v, (list, deque, dict, set))]
        assert held == [], "a stream that waits holds integers, not the events"
        hub.apply("update", obj("a", 60, {"team": "red"}), obj("a", 51, {"team": "red"}), "")
        assert hub.offered < hub.seq, "held: the rest of its burst is on its way"
        batch = sub.take()
        assert [(e.own, k) for e, k in batch] == [(rv, "MODIFIED") for rv in range(2, 52)], \
            "every matching event offered, in order; the held one not yet"
        assert not sub.waiting and sub.take() == []
        await asyncio.sleep(HOLD_INEXACT * 3)
        assert [(e.own, k) for e, k in sub.take()] == [(60, "MODIFIED")]

    asyncio.run(scenario())


def test_a_waiting_subscriber_falls_behind_when_the_ring_laps_its_cursor():
    hub = ready_hub(obj("a", 1, {"team": "red"}), ring=5)
    red = Selection(labels=parse_selector("team=red"))
    quiet, other = Subscriber(red, 1000), Subscriber(red, 1000)
    for sub in (quiet, other):
        hub.subscribe(sub)
    hub.apply("update", obj("a", 2, {"team": "red"}), obj("a", 1, {"team": "red"}), "2")
    assert quiet.waiting and not quiet.overflowed
    other.take()
    for rv in range(3, 10):  # none of them its: only the ring moves on
        hub.apply("add", obj(f"b{rv}", rv, {"team": "blue"}), None, str(rv))
    assert quiet.waiting and not quiet.overflowed, "nothing matching came: not told yet"
    assert quiet.take() == [] and quiet.overflowed and quiet.fell_behind.is_set()
    assert not other.waiting and not other.overflowed, "one that kept up is not touched"
    hub.apply("update", obj("a", 10, {"team": "red"}), obj("a", 2, {"team": "red"}), "10")
    assert [e.own for e, _ in other.take()] == [10]
    for rv in range(11, 17):  # a matching event after a lap tells at once
        hub.apply("update", obj("a", rv, {"team": "red"}), obj("a", rv - 1, {"team": "red"}),
                  str(rv))
    assert other.overflowed and not other.waiting
