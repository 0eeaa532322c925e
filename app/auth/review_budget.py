"""How many token reviews strangers may cause: per client address, in flight, and waiting.

A review of a bearer token the gateway has not seen is a round trip to the API server.
Anyone who can reach the port can send a new random token with every request, before
any right is checked: without a budget, 3,000 random tokens in 15 s from one client made
3,000 ``TokenReview``s, on the thread pool that discovery, gzip and query evaluation
share. So new tokens are budgeted:

- per client address, a token bucket (``rate`` reviews a second, bursts of ``burst``):
  past it, 429 with ``Retry-After``, as the API server's own priority and fairness
  answers a flood;
- in flight, at most ``in_flight`` reviews at once, on threads of their own limiter (not
  the shared pool's), and at most ``waiting`` more queued for one: past that, 429 too.

Known tokens, kept by the authenticator, never touch the budget: a caller whose review is
kept is answered as fast during a flood as without one.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

import anyio

from app.kube.status import StatusError

__all__ = ["AccessBudget", "Buckets", "ReviewBudget"]


class ReviewBudget:
    """Token buckets per client address, and a bound on reviews in flight; on the loop."""

    def __init__(self, rate: float = 10.0, burst: int = 20, in_flight: int = 8,
                 waiting: int = 64, max_clients: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.in_flight = in_flight
        self.waiting = waiting
        self.clients = Buckets(rate, float(burst), max_keys=max_clients, clock=clock)
        self._limiter: anyio.CapacityLimiter | None = None
        self._queued = 0
        self.refused = 0  # reviews refused with 429, for the figures

    @property
    def limiter(self) -> anyio.CapacityLimiter:
        """The reviews' own thread limiter (made on the loop, when first needed)."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.in_flight)
        return self._limiter

    def admit(self, client: str) -> None:
        """Take one review from ``client``'s bucket and a place in line.

        Raises:
            StatusError: 429 when the client's bucket is empty or the line is full.
        """
        if self.clients.available(client) < 1.0:
            self.refused += 1
            raise _too_many(f"too many new credentials from {client or 'this client'}: at most "
                            f"{self.clients.rate:g} token reviews a second are made for one address")
        if self._queued >= self.in_flight + self.waiting:
            self.refused += 1
            raise _too_many("too many token reviews are waiting for the API server")
        self.clients.spend(client, 1.0)
        self._queued += 1

    def done(self) -> None:
        """Give back the place in line ``admit`` took."""
        self._queued -= 1


class AccessBudget:
    """How many access reviews callers may cause, per user and in all, across every cluster.

    A decision not kept is a ``SubjectAccessReview``: a signed-in caller asking for ever new
    namespaces, or a merged read of every cluster (one review per cluster, and per namespace
    when a partition is computed), would otherwise make as many as they like. One budget for
    the gateway, shared by every cluster's ``Authorization``: ten clusters give a caller no
    more reviews than one. A set of reviews (a partition's namespaces) is taken whole or not
    at all; past the budget, 429 with ``Retry-After``. Kept decisions never touch it.
    """

    def __init__(self, per_user: tuple[float, float] = (100.0, 5_000.0),
                 in_all: tuple[float, float] = (1_000.0, 20_000.0),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.per_user = Buckets(*per_user, clock=clock)
        self.in_all = Buckets(*in_all, clock=clock)
        self.refused = 0

    def take(self, user: str, cost: int, what: str) -> None:
        """Take ``cost`` reviews for ``user`` (``what`` they are for, said in the 429).

        Raises:
            StatusError: 429 when ``user``'s budget or everyone's cannot cover them.
        """
        if self.per_user.available(user) < cost or self.in_all.available("") < cost:
            self.refused += 1
            raise StatusError(429, f"{what} would take {cost} more access reviews than this "
                                   f"gateway makes for now; retry shortly",
                              "TooManyRequests", headers={"Retry-After": "5"})
        self.per_user.spend(user, cost)
        self.in_all.spend("", cost)


def _too_many(message: str) -> StatusError:
    return StatusError(429, message, "TooManyRequests", headers={"Retry-After": "1"})


class Buckets:
    """Token buckets by key: ``rate`` tokens a second, at most ``burst`` saved; on the loop.

    For reviews that come in sets (a caller's namespaces, one review each): ``spend``
    takes a whole set or nothing.
    """

    def __init__(self, rate: float, burst: float, max_keys: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = burst
        self.max_keys = max_keys
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def available(self, key: str) -> float:
        """Tokens ``key`` has now (a key never seen has a full bucket)."""
        tokens, at = self._buckets.get(key, (self.burst, self._clock()))
        return min(self.burst, tokens + (self._clock() - at) * self.rate)

    def __len__(self) -> int:
        """Keys remembered (at most ``max_keys``: the least recently spent go first)."""
        return len(self._buckets)

    def spend(self, key: str, count: float) -> None:
        """Take ``count`` tokens from ``key``'s bucket (callers check ``available`` first)."""
        left = self.available(key) - count
        self._buckets.pop(key, None)  # to the end: the most recently used
        self._buckets[key] = (left, self._clock())
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
