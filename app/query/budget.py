"""One memory budget for everything queries keep, across every resource of the process.

Dashboards' queries keep values per path (``app.query.values``), projected bytes per
``fields`` list (``app.query.projection``) and whole answers (``app.cache.kept_lists``), each
bounded by count alone before. Counts are not bytes: 50 distinct queries on 2,000 Pods,
half of them over ``*`` paths, kept 189 MiB where the Pods themselves cost 24 MiB. Now
each kept thing is charged its estimated bytes to one ``QueryMemory``; past its limit the
least recently used things are dropped (a dropped column or projection is simply read
again when next asked for). The limit defaults to twice the bytes of the objects the
process caches (at least 64 MiB), so queries cost at most a few times what the objects
themselves cost; ``--query-memory-bytes`` sets it.

Charged from the event loop and from worker threads (large evaluations): the ledger has
a lock; what is dropped is dropped after the lock is let go (its owner takes its own).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

__all__ = ["MIN_LIMIT", "QueryMemory"]

MIN_LIMIT = 64 * 1024 * 1024


class QueryMemory:
    """Bytes kept by queries, per item, least recently used first; see the module."""

    def __init__(self, limit: int = MIN_LIMIT) -> None:
        self.limit = limit
        self.used = 0
        self.dropped = 0  # items dropped to stay within the limit
        self._lock = threading.Lock()  # guards used and _items
        self._items: OrderedDict[Hashable, list] = OrderedDict()  # key -> [bytes, drop]

    def charge(self, key: Hashable, size: int, drop: Callable[[], None]) -> None:
        """Add ``size`` bytes (negative: give back) to ``key``'s item, made with ``drop`` (what
        frees it) if new, and mark it used; then drop others, oldest first, past the limit."""
        victims = []
        with self._lock:
            item = self._items.get(key)
            if item is None:
                item = self._items[key] = [0, drop]
            else:
                self._items.move_to_end(key)
            item[0] += size
            self.used += size
            while self.used > self.limit and len(self._items) > 1:
                oldest = next(iter(self._items))
                if oldest == key:  # the item being charged is the last to go
                    break
                size_of, drop_of = self._items.pop(oldest)
                self.used -= size_of
                victims.append(drop_of)
        self.dropped += len(victims)
        for drop_of in victims:
            drop_of()

    def room(self, key: Hashable | None = None) -> int:
        """How many more bytes ``key``'s item may hold (none: a new item): half the limit
        less what it holds now. ``charge`` keeps the item it is charging whatever its size,
        so an owner that let one item grow past this would have every other dropped for it;
        those that keep large things ask here first, and make the rest for the answer."""
        if key is None:  # a new item (the kept lists' question, once per answer): no lock
            return self.limit // 2
        with self._lock:
            item = self._items.get(key)
            return self.limit // 2 - (item[0] if item is not None else 0)

    def release(self, key: Hashable) -> None:
        """Forget ``key``'s item: its owner dropped it."""
        with self._lock:
            item = self._items.pop(key, None)
            if item is not None:
                self.used -= item[0]

    def __len__(self) -> int:
        return len(self._items)
