"""Recorder: what a hub delivered becomes rows, and spans only where the store is exact."""

from __future__ import annotations

import asyncio

from app.cache.hub import EventHub
from app.history.recorder import Recorder, resource_key
from app.history.store import ADDED, DELETED, MODIFIED, Baseline, Change, Span
from informer_core.delta_fifo import DeletedFinalStateUnknown
from tests.app.cache.hubs import change, obj


NOW = 1000.0  # the recorder's clock: every change, span and baseline is stamped with it


class _Writer:
    """What a recorder hands its writer, in order."""

    def __init__(self) -> None:
        self.ops: list = []
        self.epoch = 0

    def put(self, resource, op):
        self.ops.append((resource, op))

    def taken(self) -> list:
        ops, self.ops = self.ops, []
        return [op for _, op in ops]


def _recorded_hub(*objects, at):
    writer = _Writer()
    hub = EventHub(100)
    hub.recorder = Recorder(writer, "core/v1/pods", clock=lambda: NOW)
    for o in objects:
        hub.apply("add", o, None)
    hub.settle(str(at))
    hub.mark_ready()
    return hub, writer


def test_a_resource_is_named_as_its_path_begins():
    assert resource_key("", "v1", "pods") == "core/v1/pods"
    assert resource_key("apps", "v1", "deployments") == "apps/v1/deployments"


def test_the_ready_view_is_the_baseline_and_each_point_grows_the_span():
    async def scenario():
        hub, writer = _recorded_hub(obj("a", 5), obj("b", 7), at=12)
        (baseline,) = writer.taken()
        assert isinstance(baseline, Baseline) and baseline.version == 12
        assert baseline.received == NOW  # when the list was there, not when it is written
        assert sorted(o.name for o in baseline.objects) == ["a", "b"]
        change(hub, "c", 14)
        change(hub, "a", 15, 5)
        hub.apply("delete", obj("b", 16), None, "16")
        ops = writer.taken()
        changes = [(o.kind, o.rv, o.name) for o in ops if isinstance(o, Change)]
        assert changes == [(ADDED, 14, "c"), (MODIFIED, 15, "a"), (DELETED, 16, "b")]
        assert [o for o in ops if isinstance(o, Span)] == [Span(12, 14, NOW), Span(12, 15, NOW), Span(12, 16, NOW)]
        hub.settle("20")  # a bookmark: nothing changed up to 20
        assert writer.taken() == [Span(12, 20, NOW)]
        hub.settle("20")  # the same again: nothing to say
        assert writer.taken() == []

    asyncio.run(scenario())


def test_a_relist_burst_ends_the_span_and_its_point_begins_the_next():
    async def scenario():
        hub, writer = _recorded_hub(obj("a", 5), obj("b", 7), at=12)
        writer.taken()
        # a relist at 40: a changed at 30, b gone (when, unknown)
        hub.apply("update", obj("a", 30), obj("a", 5))
        hub.apply("delete", DeletedFinalStateUnknown("n/b", obj("b", 7)), None, "40")
        ops = writer.taken()
        assert [(o.kind, o.name) for o in ops if isinstance(o, Change)] == [
            (MODIFIED, "a"), (DELETED, "b")]
        assert [o for o in ops if isinstance(o, Span)] == [Span(40, 40, NOW)]  # not Span(12, 40, NOW)
        change(hub, "c", 41)
        assert writer.taken()[-1] == Span(40, 41, NOW)

    asyncio.run(scenario())


def test_changes_dropped_by_the_writer_need_a_baseline_again():
    async def scenario():
        hub, writer = _recorded_hub(obj("a", 5), at=12)
        writer.taken()
        writer.epoch += 1  # the store was down too long: what waited was dropped
        change(hub, "b", 14)
        ops = writer.taken()
        assert isinstance(ops[0], Change) and isinstance(ops[-1], Baseline)
        assert ops[-1].version == 14 and sorted(o.name for o in ops[-1].objects) == ["a", "b"]
        change(hub, "c", 15)
        assert writer.taken()[-1] == Span(14, 15, NOW)

    asyncio.run(scenario())
