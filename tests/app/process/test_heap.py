"""When the streams' heap is frozen and given back (app.process.heap)."""

from __future__ import annotations

import asyncio
import gc

from app.process.heap import SettledHeap


class Streams:
    def __init__(self) -> None:
        self.opened = 0
        self.closed = 0
        self.calls: list[str] = []

    def heap(self, **kwargs) -> SettledHeap:
        return SettledHeap(lambda: (self.opened, self.closed), quiet=2.0, min_closed=4,
                           freeze=lambda: self.calls.append("freeze"),
                           unfreeze=lambda: self.calls.append("unfreeze"), **kwargs)


def test_nothing_is_frozen_while_no_stream_opened():
    streams = Streams()
    heap = streams.heap()
    assert [heap.step(t) for t in range(10)] == [None] * 10
    assert streams.calls == []


def test_frozen_once_no_stream_opened_for_the_quiet_time():
    streams = Streams()
    heap = streams.heap()
    for t in range(5):  # a stream a second: never quiet
        streams.opened += 1
        assert heap.step(float(t)) is None
    assert heap.step(5.0) is None  # one second since the last
    assert heap.step(6.0) == "freeze"
    assert heap.frozen and streams.calls == ["freeze"]
    assert heap.step(7.0) is None  # nothing new: not again


def test_streams_opened_later_are_frozen_too():
    streams = Streams()
    heap = streams.heap()
    streams.opened = 10
    heap.step(0.0)
    assert heap.step(2.0) == "freeze"
    streams.opened = 20
    heap.step(3.0)
    assert heap.step(5.0) == "freeze"
    assert streams.calls == ["freeze", "freeze"]


def test_given_back_once_a_quarter_of_the_frozen_streams_closed():
    streams = Streams()
    heap = streams.heap()
    streams.opened = 100
    heap.step(0.0)
    assert heap.step(2.0) == "freeze"
    streams.closed = 24  # fewer than a quarter of 100
    assert heap.step(3.0) is None
    streams.closed = 25
    assert heap.step(4.0) == "unfreeze"
    assert not heap.frozen and streams.calls == ["freeze", "unfreeze"]
    assert heap.step(10.0) is None  # nothing opened since: nothing to freeze
    streams.opened = 110
    heap.step(11.0)
    assert heap.step(13.0) == "freeze"


def test_a_few_closed_streams_do_not_unfreeze():
    streams = Streams()
    heap = streams.heap()
    streams.opened = 8
    heap.step(0.0)
    assert heap.step(2.0) == "freeze"
    streams.closed = 3  # a quarter of 8 is 2, but at least min_closed (4) must go
    assert heap.step(3.0) is None
    streams.closed = 4
    assert heap.step(4.0) == "unfreeze"


def test_run_freezes_the_real_heap_and_gives_it_back_when_cancelled():
    streams = Streams()
    assert gc.get_freeze_count() == 0
    heap = SettledHeap(lambda: (streams.opened, streams.closed), quiet=0.0, every=0.01)

    async def scenario() -> int:
        task = asyncio.create_task(heap.run())
        streams.opened = 1
        for _ in range(100):
            await asyncio.sleep(0.01)
            if heap.frozen:
                break
        frozen = gc.get_freeze_count()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return frozen

    assert asyncio.run(scenario()) > 1000
    assert not heap.frozen and gc.get_freeze_count() == 0
