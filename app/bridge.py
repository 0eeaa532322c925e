"""The one place where informer threads and the asyncio event loop meet.

informer_core runs on threads; the HTTP layer on one event loop. Every
crossing lives here, and nowhere else:

- thread -> loop: ``call_on_loop`` hands a call to the loop (dropped once the
  loop is closed: the gateway is stopping). ``HubHandler``, the informer
  handler of a resource's ``EventHub``, uses it once per event, whatever the
  number of subscribers, and once more when the initial list is in
  (``on_synced``): in order with the events, so a load waits on a signal,
  never by polling, and finds every initial object already in the hub;
- loop -> thread: ``run_blocking`` for calls that may block (discovery,
  shutdown), so the loop never stalls. A thread cannot be interrupted: a caller
  cancelled meanwhile (a stopping gateway cancels its background tasks) waits for
  its call to return — ``OUTLIVE_AT_MOST`` seconds at most — before it ends, so
  that a gateway that has stopped leaves no thread at work on its behalf.
  ``run_bulk`` is the same for work over many objects (a dashboard query, a Table
  of thousands of rows), with Python's cyclic collector paused meanwhile.

- loop -> a thread of its own: ``Inbox``, what the loop hands a long-lived worker (the
  history store's writer): a put is an append, and wakes the worker only when it finds
  the inbox empty, so a busy stream of changes costs one wake-up a batch and an idle one
  none.

Lister reads (a lock held for microseconds, no I/O) are made on the loop directly.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread

from informer_core.encoded import EncodedObject
from informer_core.gcpause import paused_gc
from informer_core.tombstone import DeletedFinalStateUnknown

__all__ = ["OUTLIVE_AT_MOST", "HubHandler", "Inbox", "call_on_loop", "run_blocking", "run_bulk"]

T = TypeVar("T")

# seconds a cancelled caller waits for its thread's call before it ends anyway (a call
# stuck on a host that answers nothing must not hold a shutdown for good)
OUTLIVE_AT_MOST = 10.0


async def run_blocking(fn: Callable[..., T], *args: Any,
                       limiter: anyio.CapacityLimiter | None = None, **kwargs: Any) -> T:
    """Run a blocking call on a worker thread and await its result.

    ``limiter``: the calls' own bound on threads (token reviews have one), instead of
    the shared pool's.
    """
    call = asyncio.ensure_future(anyio.to_thread.run_sync(
        functools.partial(fn, *args, **kwargs), limiter=limiter))
    try:
        return await asyncio.shield(call)
    except asyncio.CancelledError:
        await asyncio.wait([call], timeout=OUTLIVE_AT_MOST)
        raise


async def run_bulk(fn: Callable[..., T], *args: Any) -> T:
    """``run_blocking`` for work over many objects, the cyclic collector paused meanwhile.

    Such work makes a container or more per object (a column's values, a decoded
    object, a Table row) that forms no cycle and is freed by its count. Left to the
    collector, each burst of them sets off collections up to full ones, which walk the
    whole cache: at 50,000 Pods one took 47-63 ms and came every second dashboard
    refresh or so (a refresh after one change: 67 ms, 30 ms with the collector paused).
    """
    def paused() -> T:
        with paused_gc():
            return fn(*args)
    return await run_blocking(paused)


def call_on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> bool:
    """From any thread: run ``fn(*args)`` on ``loop`` soon, after what was handed over before.

    Returns False (and drops the call) when the loop is already closed.
    """
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        return False
    return True


class HubHandler:
    """The informer handler of one ``EventHub``: runs inline, on the informer's own
    thread (``informer_core.informer.InlineHandler``): all it does is hand each call to
    the loop, which never blocks, so a thread of its own would only add a wake-up per
    change.

    It receives the stored (encoded) objects — nothing is decoded on the way —
    and schedules the hub's ``apply`` on the loop, with the version the view is
    exactly at after it when there is one (``settled``: in the same call, so the
    event's id is known before any stream writes it); ``on_synced`` follows the
    initial list's last object. Calls keep their order.
    """

    accepts_encoded = True
    accepts_settled = True
    runs_inline = True

    def __init__(self, loop: asyncio.AbstractEventLoop, apply: Callable[..., None],
                 settle: Callable[[str], None], synced: Callable[[], None]) -> None:
        self._loop = loop
        self._apply = apply
        self._settle = settle
        self._synced = synced

    def on_add(self, obj: EncodedObject, is_in_initial_list: bool, settled: str = "") -> None:
        call_on_loop(self._loop, self._apply, "add", obj, None, settled)

    def on_update(self, old: EncodedObject, new: EncodedObject, settled: str = "") -> None:
        call_on_loop(self._loop, self._apply, "update", new, old, settled)

    def on_delete(self, obj: EncodedObject | DeletedFinalStateUnknown, settled: str = "") -> None:
        call_on_loop(self._loop, self._apply, "delete", obj, None, settled)

    def on_settled(self, version: str) -> None:
        call_on_loop(self._loop, self._settle, version)

    def on_synced(self) -> None:
        call_on_loop(self._loop, self._synced)


class Inbox:
    """Items handed from the loop (or any thread) to one worker thread, taken in batches.

    ``put`` never blocks and never waits for the worker; the worker's ``take`` sleeps
    until something arrives, then a moment more (``gather``) so that a burst becomes one
    batch. ``close`` wakes it for good.
    """

    def __init__(self) -> None:
        self._items: deque = deque()
        self._arrived = threading.Event()
        self._closing = threading.Event()
        self.closed = False

    def put(self, item: Any) -> None:
        items = self._items
        items.append(item)
        if len(items) == 1:
            self._arrived.set()

    def __len__(self) -> int:
        return len(self._items)

    def take(self, gather: float, timeout: float | None = None) -> list:
        """Every item there is (after waiting up to ``timeout`` for one, then ``gather``
        more seconds for the rest of its burst); ``[]`` when none came or on close."""
        if not self._items:
            self._arrived.wait(timeout)
            if self.closed:
                return self._drain()
            if gather > 0 and self._items:
                self._arrived.clear()
                self._arrived.wait(gather)  # (woken early only by close)
        return self._drain()

    def _drain(self) -> list:
        self._arrived.clear()
        items = self._items
        taken = []
        while items:  # (a put after the clear sets it again: a spare wake-up, never a lost one)
            taken.append(items.popleft())
        return taken

    def pause(self, seconds: float) -> None:
        """Sleep ``seconds`` (the worker backing off), woken early only by ``close``."""
        self._closing.wait(seconds)

    def close(self) -> None:
        self.closed = True
        self._closing.set()
        self._arrived.set()
