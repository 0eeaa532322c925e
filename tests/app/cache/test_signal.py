"""Signal: an asyncio.Event's flag for one waiter, with a timeout and a callback on set."""

from __future__ import annotations

import asyncio

import pytest

from app.cache.signal import Signal


def test_a_set_wakes_the_waiter_and_a_timeout_says_it_was_not_set():
    async def scenario():
        signal = Signal()
        assert await signal.wait(0.01) is False
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, signal.set)
        assert await signal.wait(5) is True
        assert signal.is_set() and await signal.wait(0) is True  # set: no wait at all
        signal.clear()
        assert not signal.is_set() and await signal.wait(0) is False

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_then_is_called_once_when_the_flag_goes_up():
    calls = []
    signal = Signal(then=lambda: calls.append(1))
    signal.set()
    signal.set()
    assert calls == [1]
    signal.clear()
    signal.set()
    assert calls == [1, 1]


def test_one_waiter_at_a_time_and_a_cancelled_wait_leaves_nothing_behind():
    def timers() -> int:
        return len([h for h in asyncio.get_running_loop()._scheduled if not h.cancelled()])

    async def scenario():
        signal = Signal()
        before = timers()
        first = asyncio.ensure_future(signal.wait())
        await asyncio.sleep(0)
        with pytest.raises(RuntimeError):
            await signal.wait(1)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert signal._waiter is None
        timed = asyncio.ensure_future(signal.wait(60))
        await asyncio.sleep(0)
        timed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await timed
        assert timers() == before, "no timer left behind"
        assert signal._waiter is None
        signal.set()  # nobody waits: nothing to wake

    asyncio.run(asyncio.wait_for(scenario(), 10))
