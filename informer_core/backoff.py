"""Exponential backoff with jitter, reset after a healthy stretch (client-go's backoff manager)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

__all__ = ["ExponentialBackoff"]


class ExponentialBackoff:
    """Delays of ``initial * factor**n`` (capped), each stretched by up to ``jitter``.

    If no delay was asked for during ``reset_after`` seconds the sequence starts
    over: a component that has been healthy that long is not punished for an
    old failure. Thread-safe.
    """

    def __init__(self, initial: float = 0.8, cap: float = 30.0, reset_after: float = 120.0,
                 factor: float = 2.0, jitter: float = 1.0,
                 clock: Callable[[], float] = time.monotonic,
                 rng: Callable[[], float] = random.random) -> None:
        self._initial, self._cap, self._reset_after = initial, cap, reset_after
        self._factor, self._jitter = factor, jitter
        self._clock, self._rng = clock, rng
        self._lock = threading.Lock()  # guards _current and _last
        self._current = initial
        self._last: float | None = None

    def next_delay(self) -> float:
        """Return the next delay and advance the sequence."""
        with self._lock:
            now = self._clock()
            if self._last is not None and now - self._last > self._reset_after:
                self._current = self._initial
            self._last = now
            delay = min(self._current, self._cap)
            self._current = min(self._current * self._factor, self._cap)
        return delay * (1.0 + self._jitter * self._rng())

    def reset(self) -> None:
        """Start the sequence over."""
        with self._lock:
            self._current = self._initial
            self._last = None
