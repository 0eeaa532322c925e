"""Limits on open streams, in total and per client address."""

from __future__ import annotations

from collections import Counter

__all__ = ["StreamLimiter"]


class StreamLimiter:
    """Counts open streams; lives on the event loop (no lock needed)."""

    def __init__(self, max_total: int, max_per_client: int) -> None:
        self.max_total = max_total
        self.max_per_client = max_per_client
        self.open = 0
        self._by_client: Counter[str] = Counter()

    def acquire(self, client: str) -> str | None:
        """Take a slot; return ``None``, or why there is none."""
        if self.open >= self.max_total:
            return f"the gateway serves at most {self.max_total} streams at once"
        if self._by_client[client] >= self.max_per_client:
            return f"at most {self.max_per_client} streams per client address"
        self.open += 1
        self._by_client[client] += 1
        return None

    def release(self, client: str) -> None:
        self.open -= 1
        self._by_client[client] -= 1
        if self._by_client[client] <= 0:
            del self._by_client[client]
