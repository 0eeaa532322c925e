"""A flag one task waits on: what a stream's task sleeps on between events.

Why not ``asyncio.Event``. Each open stream held two (its wake-up and its fall-behind),
and each ``asyncio.Event`` carries a deque for its waiters: 760 bytes apiece, measured
with ``tracemalloc``, where a stream has one waiter at most. Waiting with a timeout
through ``asyncio.wait_for`` also made a task per wait. A ``Signal`` holds a flag, the
one waiter's future while it waits, and what to call when it is set; a timeout is a
timer on the loop. Thousands of open streams are thousands of these, so the bytes count
(``bench.scale``: memory per subscriber).

``then``: called when the flag goes from clear to set, on the loop, at once — how a
stream's connection is given a deadline the moment its reader falls behind, with no
task waiting for it (``app.streams.pipeline.StreamBody``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["Signal"]


def _release(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Signal:
    """``set``, ``clear``, ``is_set`` and ``wait`` as ``asyncio.Event``'s, for one waiter."""

    __slots__ = ("_set", "_waiter", "then")

    def __init__(self, then: Callable[[], None] | None = None) -> None:
        self._set = False
        self._waiter: asyncio.Future | None = None
        self.then = then

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        if self._set:
            return
        self._set = True
        if self._waiter is not None:
            _release(self._waiter)
        if self.then is not None:
            self.then()

    def clear(self) -> None:
        self._set = False

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until the flag is set or ``timeout`` seconds pass; whether it is set."""
        if self._set:
            return True
        if self._waiter is not None:
            raise RuntimeError("a Signal has one waiter at a time")
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(timeout, _release, waiter) if timeout is not None else None
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()
        return self._set
