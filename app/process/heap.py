"""Keep the cyclic collector off what settled streams hold: ``gc.freeze`` once they settle.

Each open stream holds a few hundred tracked objects for as long as it lasts (its
tasks and their frames, the connection's protocol, parser and request). With
thousands of streams that is millions of objects, and every full pass of the
collector walks all of them: measured at 5,000 subscribers, 470–580 ms each,
during which no event goes out — the fan-out's p99 was those passes. Streams are
long-lived by design, so walking them again and again finds nothing.

``SettledHeap`` watches the stream limiter's counts. Once streams were opened and
then none for ``quiet`` seconds, it moves everything the collector tracks into the
permanent generation (``gc.freeze()``, a constant-time splice of lists), so later
passes walk only what was made since. Objects frozen are still freed by reference
counting when a stream ends; only those in reference cycles wait. So once as many
streams closed as a quarter of those open at the freeze (at least ``min_closed``),
it gives them back to the collector (``gc.unfreeze()``): one full pass then reclaims
the cycles, and the heap is frozen again when streams settle. What can wait
uncollected is bounded by that share of the frozen streams.

No stream is touched: this changes only when the collector runs and what it walks.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable

__all__ = ["SettledHeap"]

log = logging.getLogger(__name__)


class SettledHeap:
    """Freeze the heap once streams settle, unfreeze once enough of them closed.

    ``counts``: the streams opened and closed so far (ever-growing counters).
    ``step(now)`` decides; ``run()`` calls it every ``every`` seconds on the loop.
    """

    def __init__(self, counts: Callable[[], tuple[int, int]], quiet: float = 2.0,
                 every: float = 1.0, min_closed: int = 64,
                 freeze: Callable[[], None] = gc.freeze,
                 unfreeze: Callable[[], None] = gc.unfreeze) -> None:
        self._counts = counts
        self.quiet = quiet
        self.every = every
        self.min_closed = min_closed
        self._freeze, self._unfreeze = freeze, unfreeze
        self.frozen = False
        self.freezes = 0
        self.unfreezes = 0
        opened, closed = counts()
        self._seen_opened = opened  # opens counted at the last step
        self._last_open = -float("inf")  # when the count of opens last grew
        self._opened_at_freeze = opened
        self._closed_at_freeze = closed
        self._open_at_freeze = 0

    def step(self, now: float) -> str | None:
        """Freeze, unfreeze or neither (``"freeze"``, ``"unfreeze"``, ``None``)."""
        opened, closed = self._counts()
        if opened != self._seen_opened:
            self._seen_opened = opened
            self._last_open = now
        if self.frozen:
            gone = closed - self._closed_at_freeze
            if gone >= max(self.min_closed, self._open_at_freeze // 4):
                self._unfreeze()
                self.frozen = False
                self.unfreezes += 1
                self._opened_at_freeze, self._closed_at_freeze = opened, closed
                return "unfreeze"
        if opened != self._opened_at_freeze and now - self._last_open >= self.quiet:
            # new streams since the last freeze, and none for a while: they settled
            self._freeze()  # also takes in what was frozen before (nothing is lost)
            if not self.frozen:
                self._closed_at_freeze = closed  # closes count from the first freeze on
            self.frozen = True
            self.freezes += 1
            self._open_at_freeze = opened - closed
            self._opened_at_freeze = opened
            return "freeze"
        return None

    async def run(self) -> None:
        """Step every ``every`` seconds until cancelled; the heap is given back at the end."""
        try:
            while True:
                await asyncio.sleep(self.every)
                did = self.step(time.monotonic())
                if did:
                    log.debug("streams' heap: %s (frozen objects: %d)", did, gc.get_freeze_count())
        finally:
            if self.frozen:
                self._unfreeze()
                self.frozen = False
