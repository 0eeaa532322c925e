"""Answers that expire: a bounded LRU cache with single-flight, on the event loop.

Token reviews and access reviews are round trips to the API server; their
answers are kept for a while (as the API server keeps its webhooks' answers)
so that a request costs a dictionary lookup, not a review. ``DecisionCache``
holds them:

- each entry expires at its own time (an allowed access lives longer than a
  denied one; a token's review never outlives the token);
- at most ``max_entries`` are kept, the least recently used going first, so
  hostile variety (a new token per request) cannot grow memory without bound;
- concurrent misses for one key share one computation (single-flight): a
  hundred streams opening at once by one user make one review, not a hundred.

Failed computations are not cached: the next caller tries again.
All methods run on the event loop; nothing here needs a lock.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["DecisionCache"]

V = TypeVar("V")


class DecisionCache(Generic[V]):
    """Values by key, each with an expiry; LRU-bounded; one computation per missing key."""

    def __init__(self, max_entries: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self.clock = clock  # what the expiry times are read against
        self._entries: OrderedDict[Hashable, tuple[float, V]] = OrderedDict()
        self._flights: dict[Hashable, asyncio.Future] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def peek(self, key: Hashable) -> tuple[float, V] | None:
        """The live ``(expires_at, value)`` for ``key``, or ``None``; counts as a use."""
        found = self._entries.get(key)
        if found is None:
            return None
        if found[0] <= self.clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return found

    def computing(self, key: Hashable) -> bool:
        """Whether a computation for ``key`` is in flight (a caller joining it costs nothing)."""
        return key in self._flights

    async def get(self, key: Hashable,
                  compute: Callable[[], Awaitable[tuple[V, float]]]) -> tuple[float, V, bool]:
        """``(expires_at, value, cached)`` for ``key``, computing it when missing or expired.

        ``compute`` returns the value and its time to live in seconds (0 or
        less: use it once, keep nothing). Its exceptions reach every waiter.
        """
        found = self.peek(key)
        if found is not None:
            self.hits += 1
            return found[0], found[1], True
        flight = self._flights.get(key)
        if flight is None:
            self.misses += 1
            # A task of its own: a caller that goes away (a closed connection)
            # does not cancel the review the other waiters share.
            flight = self._flights[key] = asyncio.ensure_future(self._compute(key, compute))
            flight.add_done_callback(_retrieve)
        expires, value = await asyncio.shield(flight)
        return expires, value, False

    async def _compute(self, key: Hashable,
                       compute: Callable[[], Awaitable[tuple[V, float]]]) -> tuple[float, V]:
        try:
            value, ttl = await compute()
        finally:
            del self._flights[key]
        expires = self.clock() + ttl
        if ttl > 0:
            self.keep(key, value, expires)
        return expires, value

    def keep(self, key: Hashable, value: V, expires: float) -> None:
        """Keep ``value`` for ``key`` until ``expires`` (this cache's clock): a value
        derived from other kept answers, which must not outlive the first of them."""
        self._entries[key] = (expires, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def drop(self, key: Hashable) -> None:
        """Forget ``key``'s value (it no longer holds, for a reason its expiry does not know)."""
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()


def _retrieve(task: asyncio.Future) -> None:
    """Mark a failed review's error as seen (its waiters may all have gone)."""
    if not task.cancelled():
        task.exception()
