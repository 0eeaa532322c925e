"""uvicorn's server, woken once a second while idle instead of ten times.

Why. uvicorn's server loop sleeps 0.1 s between checks of ``should_exit`` (and once every
ten, renews the ``Date`` header). On this VM a thread woken from sleep costs 40-85 µs of
CPU, and each of those ticks about 260 µs all told: an idle gateway's loop spent 3 ms/s
on them, most of what an idle gateway spent at all (measured per thread from
``/proc``; the fan-out floor, ``bench.fanout_floor``, spends none). Under load the same
ticks are paid per second whatever the traffic, and ``bench.fanout`` divides them into
every delivery.

So the loop sleeps until the next whole second, when the ``Date`` header is renewed as
uvicorn renews it (so it is never older than uvicorn's), and asking it to exit wakes it at
once: ``should_exit`` set from anywhere — uvicorn's signal handler, another thread, a
test — wakes the sleeping loop, instead of waiting for the next tick to notice.

The delay is computed on the wall clock and slept on the loop's monotonic one. The two can
disagree: a wall clock stepped back or held (a VM whose host sets its time) leaves the
second's boundary always a little ahead, and a loop that trusted it woke ten times a second
in one CI run. A delay under 0.1 s is therefore taken as the second already reached and
the loop sleeps to the next one: at worst the ``Date`` header is then two seconds old, as
uvicorn's own is when its tick falls just before a second.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import uvicorn

from app.bridge import call_on_loop

__all__ = ["SecondTickServer"]


class SecondTickServer(uvicorn.Server):
    """A ``uvicorn.Server`` whose loop ticks once a second and wakes at once to exit."""

    def __init__(self, config: Any) -> None:
        self._exiting = False
        self._wake: asyncio.Future | None = None
        self._tick_loop: asyncio.AbstractEventLoop | None = None
        self.ticks = 0  # ticks run (uvicorn's ``on_tick``): how often the idle loop woke
        super().__init__(config)

    @property  # type: ignore[override]
    def should_exit(self) -> bool:
        return self._exiting

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._exiting = value
        loop, wake = self._tick_loop, self._wake
        if value and loop is not None and wake is not None:
            call_on_loop(loop, _set, wake)  # from any thread; nothing to wake once it closed

    async def main_loop(self) -> None:
        loop = self._tick_loop = asyncio.get_running_loop()
        counter = 0  # uvicorn renews the Date header when the counter is a multiple of 10
        while not await self._tick(counter):
            counter = (counter + 10) % 864000
            self._wake = wake = loop.create_future()
            if self._exiting:  # asked while the tick ran
                break
            timer = loop.call_later(_until_next_second(), _set, wake)
            try:
                await wake
            finally:
                timer.cancel()
                self._wake = None

    async def _tick(self, counter: int) -> bool:
        self.ticks += 1
        return await self.on_tick(counter)


def _until_next_second() -> float:
    """Seconds to the next whole second of the wall clock, never under 0.1 (see above)."""
    delay = 1.0 - time.time() % 1.0
    return delay + 1.0 if delay < _EARLY else delay


_EARLY = 0.1  # a wake this close before a second is that second's (clocks disagree)


def _set(wake: asyncio.Future) -> None:
    if not wake.done():
        wake.set_result(None)
