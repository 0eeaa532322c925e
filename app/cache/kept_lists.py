"""Answers kept whole while the index buckets they were read from are unchanged.

A list's work grows with its answer: candidates from the label index, each object
fetched under the store's lock, sorted, sized, joined (``app.http.resources``); a
dashboard's adds its filters, order, projection or counts (``app.cache.query_engine``).
Callers ask the same lists again and again — a dashboard's refresh, a namespace's pods, a
controller's relist — and between two asks most of a busy cache changed, but rarely the
bucket the list came from. Every one of these answers is a function of the objects under
its buckets, so one mechanism keeps them all: plain lists, merged lists and dashboards'
(a dashboard's answer, kept per version before, was made anew after any change anywhere in
the resource). So an answer is kept with the buckets that bound it (the
smallest of its namespace and its positive label requirements: ``Selection.read_from``)
and the store's write mark when it was read; an ask while no object under those buckets
was written since (``ThreadSafeStore.unchanged_since``) is answered with the kept bytes,
only the envelope's ``resourceVersion`` made new — nothing selected, sorted or joined.
An answer is an envelope up to its items (``head``: the version is there), the items, and
its ``tail``: a list's ``]}``, or a dashboard's ``Summary`` counts' ``}``; only the head is
made again at a newer version. What an answer was read from is its ``Mark``s: one per cache read (one for a cluster's
list, one per cluster for a merged list, ``app.http.merged``, which is kept only after each
of those clusters authorized the caller); one check (``KeptLists.current``) tells for both
whether the kept bytes are still the answer, and at which versions.

A label list over plain HTTP at eight connections served 34 % of the floor's rate (the
same bytes from a bare ASGI app) with its selection and join per ask, 57 % kept and written
in one piece (``docs/benchmarks.md``, 2026-11-28; ``bench/notes.md`` says what is left).

Memory: every kept answer is charged to the process's query budget
(``app.query.budget``), least recently used first out, with the dashboards' columns and
projections; one answer may take at most half the budget. A large answer (over
``JOIN_BELOW``, which is otherwise sent in slices and never joined whole) is kept only
when asked a second time with its buckets unchanged, so that a list that changes between
every ask never costs a whole copy. A compressed answer (over ``GZIP_ABOVE``, to a caller
that accepts gzip) up to ``JOIN_BELOW`` is kept beside its bytes at the version it was made
for, made once however many ask for it at once, and made again only when the version moves;
a larger one is compressed slice by slice as it is sent, never joined whole (fifty callers
at once would each have held a whole copy).
"""

from __future__ import annotations

import asyncio
import gzip
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.bridge import run_blocking
from app.kube.envelope import JOIN_BELOW, LIST_TAIL
from app.query.budget import QueryMemory

__all__ = ["KeptList", "KeptLists", "Mark"]

MAX_KEPT = 256  # answers per resource, whatever the budget
_ASKED_KEPT = 1024  # large answers' first asks remembered per resource


@dataclass(slots=True, frozen=True)
class Mark:
    """What one cache read of a kept answer was read from: the cache (weakly: a cache
    reloaded since is another store, with other marks), the store's write mark before the
    read, and the buckets that bound it (``index`` ``None``: the whole store)."""

    cache: weakref.ref
    tick: int
    index: str | None
    values: tuple[str, ...]

    @classmethod
    def of(cls, entry: Any, tick: int, selection: Any) -> Mark:
        """The mark of ``selection`` read from ``entry``'s store at ``tick``."""
        return cls(weakref.ref(entry), tick, *selection.read_from(entry.indexer))

    def unchanged_since(self, tick: int) -> bool:
        """Whether nothing under this mark's buckets was written since ``tick``."""
        entry = self.cache()
        return entry is not None and entry.indexer.thread_safe_store.unchanged_since(
            tick, self.index, self.values)


@dataclass(slots=True)
class KeptList:
    """One kept answer: its bytes at ``version``, and what they were read from — one mark
    for a cluster's list, one per cluster read, in order, for a merged one."""

    marks: tuple[Mark, ...]
    version: str  # the resourceVersion written in ``whole``
    whole: bytes
    items: tuple[int, int]  # where the joined items lie in ``whole``
    token: str  # the page's continue token and remaining count, the same while unchanged
    remaining: int | None
    tail: bytes = LIST_TAIL  # what follows the items
    gzipped: tuple[str, bytes] | None = None  # (version, ``whole`` at it compressed)
    compressing: asyncio.Lock = field(default_factory=asyncio.Lock)  # one at a time

    @classmethod
    def of(cls, marks: tuple[Mark, ...], version: str, head: bytes, whole: bytes, token: str,
           remaining: int | None, tail: bytes = LIST_TAIL) -> KeptList:
        """The answer ``whole``, whose envelope up to its items is ``head`` and whose items
        are followed by ``tail`` (a list's, unless said)."""
        return cls(marks, version, whole, (len(head), len(whole) - len(tail)), token,
                   remaining, tail)


class KeptLists:
    """One resource's kept answers; used on the event loop (the budget may drop one from a
    worker thread)."""

    def __init__(self, memory: QueryMemory) -> None:
        self.memory = memory
        self._kept: OrderedDict[Hashable, KeptList] = OrderedDict()
        self._asked: OrderedDict[Hashable, tuple[int, ...]] = OrderedDict()  # key -> ticks of a large ask
        self._lock = threading.Lock()
        self.hits = 0

    def get(self, key: Hashable) -> KeptList | None:
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
        return found

    def current(self, kept: KeptList, entries: Sequence[Any]) -> list[str] | None:
        """The version each of ``entries`` (the caches read now, in the order of
        ``kept.marks``) is exactly at, if each is the cache ``kept`` was read from and
        nothing under its buckets was written since; else ``None`` (read it again). Counts
        a hit."""
        versions = []
        for mark, entry in zip(kept.marks, entries):
            if mark.cache() is not entry:  # reloaded since: another store, other marks
                return None
            store = entry.indexer.thread_safe_store
            tick, index, values = mark.tick, mark.index, mark.values
            unchanged, version = entry.informer.read_consistently(
                lambda: store.unchanged_since(tick, index, values))  # called at once
            if not unchanged or not version:
                return None
            versions.append(version)
        self.hits += 1
        return versions

    def worth_keeping(self, key: Hashable, size: int, marks: tuple[Mark, ...]) -> bool:
        """Whether an answer of ``size`` bytes read as ``marks`` say should be kept: a small
        one always, a large one if asked before with nothing under its buckets written
        since, none over half the budget."""
        if size > self.memory.room():  # a new item: keep() gives back the one it replaces
            return False
        if size <= JOIN_BELOW:
            return True
        ticks = tuple(mark.tick for mark in marks)
        with self._lock:
            before = self._asked.pop(key, None)
            self._asked[key] = ticks
            while len(self._asked) > _ASKED_KEPT:
                self._asked.popitem(last=False)
        return before is not None and all(mark.unchanged_since(tick)
                                          for mark, tick in zip(marks, before))

    def keep(self, key: Hashable, kept: KeptList) -> None:
        """Keep ``kept`` as the answer for ``key``, in place of any before it (whose bytes are
        given back to the budget: an answer is charged once, however often it is made)."""
        with self._lock:
            gone = [key] if key in self._kept else []
            self._kept[key] = kept
            self._kept.move_to_end(key)
            while len(self._kept) > MAX_KEPT:
                gone.append(self._kept.popitem(last=False)[0])
        for old in gone:
            self.memory.release(("list", id(self), old))
        self.memory.charge(("list", id(self), key), len(kept.whole) + 300,
                           lambda: self.forget(key))

    def renew(self, key: Hashable, kept: KeptList, version: str, whole: bytes,
              items: tuple[int, int]) -> None:
        """The same answer at a newer ``version`` (only its envelope differs)."""
        with self._lock:
            if self._kept.get(key) is kept:
                kept.version, kept.whole, kept.items = version, whole, items

    def renewed(self, key: Hashable, kept: KeptList, version: str,
                head: bytes) -> tuple[bytes | memoryview, ...]:
        """The pieces of ``kept`` at ``version`` (``head``: its envelope then). A small answer
        is joined once and kept so (the next ask at the same version is its bytes as they
        are); a large one is sent as a view of the kept bytes, never joined again."""
        if version == kept.version:
            return (kept.whole,)
        start, end = kept.items
        items = memoryview(kept.whole)[start:end]
        if len(kept.whole) > JOIN_BELOW:
            return (head, items, kept.tail)
        whole = b"".join((head, items, kept.tail))
        self.renew(key, kept, version, whole, (len(head), len(head) + end - start))
        return (whole,)

    @staticmethod
    def compresses(kept_size: int) -> bool:
        """Whether an answer of ``kept_size`` bytes is kept compressed too (``compressed``)."""
        return kept_size <= JOIN_BELOW

    async def compressed(self, key: Hashable, kept: KeptList, version: str,
                         pieces: tuple[bytes | memoryview, ...]) -> bytes:
        """``pieces`` (``kept`` at ``version``, from ``renewed``; at most ``JOIN_BELOW``)
        gzipped: the kept copy while the version is the one it was made for, else made on a
        thread — once, whoever else asks meanwhile waits for it — and kept instead (charged
        to the budget with the answer)."""
        found = kept.gzipped
        if found is not None and found[0] == version:
            return found[1]
        async with kept.compressing:
            found = kept.gzipped
            if found is not None and found[0] == version:
                return found[1]  # made while this one waited
            body = await run_blocking(lambda: gzip.compress(b"".join(pieces), 1))
            return self._keep_compressed(key, kept, version, body)

    def _keep_compressed(self, key: Hashable, kept: KeptList, version: str, body: bytes) -> bytes:
        with self._lock:
            if self._kept.get(key) is not kept:
                return body  # let go meanwhile: sent, not kept
            before, kept.gzipped = kept.gzipped, (version, body)
        self.memory.charge(("list", id(self), key), len(body) - (len(before[1]) if before else 0),
                           lambda: self.forget(key))
        return body

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._kept.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            keys = list(self._kept)
            self._kept.clear()
            self._asked.clear()
        for key in keys:
            self.memory.release(("list", id(self), key))

    def __len__(self) -> int:
        return len(self._kept)
