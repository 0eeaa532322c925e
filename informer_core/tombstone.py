"""The tombstone: an object deleted while nobody was watching.

Its own module because both the queue that makes tombstones (``delta_fifo``)
and the stores that accept them (``store``) need the type, and the store must
not depend on the queue.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["DeletedFinalStateUnknown"]


class DeletedFinalStateUnknown(NamedTuple):
    """An object deleted while unobserved; ``obj`` is its last known state (may be stale)."""

    key: str
    obj: Any
