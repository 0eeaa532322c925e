"""The bridge's loop -> thread crossing: a cancelled caller ends after its thread's call."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from app import bridge
from app.bridge import run_blocking


def test_a_call_returns_its_result_and_raises_its_error():
    async def scenario():
        assert await run_blocking(lambda a, b=0: a + b, 2, b=3) == 5
        with pytest.raises(ZeroDivisionError):
            await run_blocking(lambda: 1 / 0)

    asyncio.run(scenario())


def test_a_cancelled_caller_ends_only_once_its_threads_call_has_returned():
    returned = threading.Event()

    def slow() -> None:
        time.sleep(0.5)
        returned.set()

    async def scenario() -> None:
        task = asyncio.ensure_future(run_blocking(slow))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert returned.is_set(), "the task ended while its thread was still at work"

    asyncio.run(scenario())


def test_a_call_that_does_not_return_holds_its_cancelled_caller_a_bounded_while(monkeypatch):
    monkeypatch.setattr(bridge, "OUTLIVE_AT_MOST", 0.2)
    release = threading.Event()

    async def scenario() -> float:
        try:
            task = asyncio.ensure_future(run_blocking(release.wait, 10))
            await asyncio.sleep(0.05)
            began = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return time.monotonic() - began
        finally:
            release.set()  # the thread's call returns: the loop's end does not wait on it

    assert 0.15 <= asyncio.run(scenario()) < 2.0


def test_bulk_work_runs_on_a_thread_with_the_collector_paused_and_restores_it():
    import gc

    def work(a, b):
        return threading.get_ident(), gc.isenabled(), a + b

    async def scenario():
        thread, enabled, total = await bridge.run_bulk(work, 2, 3)
        assert (thread != threading.get_ident(), enabled, total) == (True, False, 5)
        with pytest.raises(ZeroDivisionError):
            await bridge.run_bulk(lambda: 1 / 0)

    assert gc.isenabled()
    asyncio.run(scenario())
    assert gc.isenabled(), "the collector stayed paused"
