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


# -- the rule: every crossing between a thread and the loop is the bridge's ---------------

# What crosses between threads and the event loop, by the name it is called or imported by:
# a call handed to a loop from a thread, a call handed to a thread from the loop.
_CROSSINGS = {"call_soon_threadsafe", "run_coroutine_threadsafe", "run_in_executor",
              "to_thread", "from_thread", "wrap_future"}
_CROSSING_MODULES = {"anyio.to_thread", "anyio.from_thread", "concurrent.futures"}


def crossings(source: str) -> list[str]:
    """Where ``source`` crosses between a thread and the loop itself: ``line: name``."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names = [module] + [f"{module}.{alias.name}" for alias in node.names] + \
                [alias.name for alias in node.names]
        for name in names:
            if name in _CROSSINGS or name in _CROSSING_MODULES:
                found.append((node.lineno, name))
                break
    return [f"{line}: {name}" for line, name in sorted(set(found))]


def test_the_crossing_finder_finds_each_way_to_cross():
    source = ("import asyncio, anyio.to_thread\nfrom concurrent.futures import Future\n"
              "async def f(loop):\n    await asyncio.to_thread(g)\n"
              "    loop.call_soon_threadsafe(g)\n    await loop.run_in_executor(None, g)\n"
              "from anyio import from_thread\n")
    assert [line.split(": ")[0] for line in crossings(source)] == ["1", "2", "4", "5", "6", "7"]
    assert crossings("import asyncio\nasync def f():\n    await asyncio.sleep(1)\n") == []


def test_every_crossing_between_threads_and_the_loop_goes_through_the_bridge():
    """``app/bridge.py`` is the one place a thread hands a call to the loop or the loop one
    to a thread: its rules (dropped once the loop is closed; a cancelled caller outlives
    its thread's call at most ``OUTLIVE_AT_MOST``) then hold everywhere."""
    import pathlib

    root = pathlib.Path(bridge.__file__).parent
    found = {str(path.relative_to(root.parent)): hits
             for path in sorted(root.rglob("*.py")) if path.name != "bridge.py" or path.parent != root
             if (hits := crossings(path.read_text()))}
    assert found == {}, found


def test_an_inbox_hands_a_burst_over_as_one_batch_and_wakes_its_worker_once():
    inbox = bridge.Inbox()
    batches = []

    def worker():
        while not inbox.closed:
            taken = inbox.take(0.05, timeout=5)
            if taken:
                batches.append(taken)

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        for n in range(100):
            inbox.put(n)
        deadline = time.monotonic() + 5
        while sum(len(b) for b in batches) < 100 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [n for b in batches for n in b] == list(range(100))
        assert len(batches) == 1  # the burst gathered: one wake-up, one batch
    finally:
        inbox.close()
        thread.join(5)
    assert not thread.is_alive()


def test_an_idle_inbox_returns_nothing_after_its_timeout_and_close_ends_a_pause_at_once():
    inbox = bridge.Inbox()
    started = time.monotonic()
    assert inbox.take(0.0, timeout=0.1) == []
    assert time.monotonic() - started >= 0.09
    threading.Timer(0.1, inbox.close).start()
    started = time.monotonic()
    inbox.pause(10)
    assert time.monotonic() - started < 5
