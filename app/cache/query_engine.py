"""The query engine: lists filtered, sorted, paged, projected and counted from the cache.

After the namespace and the selectors have cut the candidates with the
indexer's indexes, ``filter`` is tested, ``sortBy`` orders, ``summary``
counts — all on the resource's columns (``app.query.values``: values kept per
object version, so a repeated query parses only what changed) — and
``fields`` projects each item of the page (bytes kept per version too).

A dashboard refreshes the same query every few seconds, often with nothing
changed under it: its whole answer is kept with the plain lists' answers, while the
index buckets it was read from are unchanged (``app.cache.kept_lists``), so such a
refresh sends stored bytes without selecting anything, even while the rest of the
resource changes; and the filtered, sorted result is kept per (query,
resourceVersion) (the last ``MAX_RESULTS``), so another page of it costs a
slice and a join. Work over many objects runs on a worker thread with the
cyclic collector paused (``app.bridge.run_bulk``), so a first query over
10,000 Pods never stalls the event loop, nor a refresh at 50,000 Pods sets off
a collection of the whole cache.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from app.bridge import run_bulk
from app.cache.hub import EventHub
from app.kube.request import Query
from app.query.budget import QueryMemory
from app.query.fieldpath import FieldPath
from app.query.filters import Filter
from app.query.ordering import Ordering
from app.query.projection import Projection
from app.query.selection import Selection
from app.query.summary import summary_bytes
from app.query.values import ValueCache
from informer_core.encoded import EncodedObject

__all__ = ["Result", "QueryEngine"]

MAX_RESULTS = 32
MAX_PROJECTIONS = 32
_INLINE_BELOW = 1000  # objects evaluated on the loop itself; more go to a thread


@dataclass(frozen=True)
class Result:
    """What a dashboard query selects, in order, at one version."""

    objects: list[EncodedObject]
    places: Sequence[tuple] | None  # each object's place in the sort order (sortBy only)
    summary: bytes | None


class QueryEngine:
    """One resource's columns, projections and recent results; used on the loop
    and, for large evaluations, on worker threads."""

    def __init__(self, memory: QueryMemory | None = None) -> None:
        self.memory = memory if memory is not None else QueryMemory()
        self.columns = ValueCache(self.memory)
        self._projections: OrderedDict[str, Projection] = OrderedDict()
        self._results: OrderedDict[tuple, Result] = OrderedDict()
        self._lock = asyncio.Lock()  # one large evaluation at a time per resource

    def projection(self, text: str, paths: tuple[FieldPath, ...]) -> Projection:
        """The kept projection of ``fields=text``."""
        found = self._projections.get(text)
        if found is None:
            found = self._projections[text] = Projection(text, paths, self.memory)
            while len(self._projections) > MAX_PROJECTIONS:
                self._projections.popitem(last=False)[1].forget()
        else:
            self._projections.move_to_end(text)
        return found

    async def result(self, objects: list[EncodedObject], query: Query, fingerprint: str,
                     resource_version: str) -> Result:
        """The filtered (sorted, counted) objects of a query, from the kept results if
        the same query was answered at the same version."""
        key = (fingerprint, resource_version)
        found = self._results.get(key)
        if found is not None:
            self._results.move_to_end(key)
            return found
        if len(objects) < _INLINE_BELOW:
            found = self.evaluate(objects, query.filters, query.ordering, query.summary,
                                  resource_version)
        else:
            async with self._lock:  # a burst of the same cold query parses once
                found = self._results.get(key)
                if found is None:
                    found = await run_bulk(self.evaluate, objects, query.filters,
                                        query.ordering, query.summary, resource_version)
        for old in [k for k in self._results if k[1] != resource_version]:
            del self._results[old]  # results at another version will not be asked for again
        self._results[key] = found
        while len(self._results) > MAX_RESULTS:
            self._results.popitem(last=False)
        self.columns.forget_absent(len(objects))
        return found

    def evaluate(self, objects: list[EncodedObject], filters: Sequence[Filter],
                 ordering: Ordering | None, summary: Sequence[FieldPath] | None,
                 resource_version: str) -> Result:
        """Filter, then sort or count: the work behind ``result``."""
        if filters:
            objects = self.keep(objects, filters)
        if summary is not None:
            return Result(objects, None, summary_bytes(summary, self.columns, objects,
                                                       resource_version))
        if ordering is not None:
            ordered, places = ordering.sort(self.columns, objects)
            return Result(ordered, places, None)
        return Result(objects, None, None)

    def keep(self, objects: list[EncodedObject], filters: Sequence[Filter]) -> list[EncodedObject]:
        """The objects that pass every filter, tested on the columns."""
        table = self.columns.table([f.path for f in filters], objects)
        keep = filters[0].mask(table[0])
        for f, values in zip(filters[1:], table[1:]):
            keep = [k and m for k, m in zip(keep, f.mask(values))]
        return [o for o, k in zip(objects, keep) if k]

    def snapshot(self, hub: EventHub, selection: Selection) -> list[EncodedObject]:
        """A stream's first state: the hub's matching objects, filters tested on the columns."""
        if not selection.filters:
            return hub.snapshot(selection)
        return self.keep(hub.snapshot(selection.unfiltered()), selection.filters)

    async def warm(self, hub: EventHub, selection: Selection) -> None:
        """Before a filtered stream's first state: fill the filters' columns on a thread
        when many objects are not in them yet, so that ``snapshot`` is quick on the loop."""
        if not selection.filters:
            return
        objects = hub.snapshot(selection.unfiltered(), ordered=False)
        paths = [f.path for f in selection.filters]
        if len(objects) >= _INLINE_BELOW and self.columns.stale(paths, objects) >= _INLINE_BELOW // 4:
            await run_bulk(self.columns.table, paths, objects)

    async def project(self, projection: Projection, objects: Sequence[EncodedObject]) -> list[bytes]:
        """Each object's projected bytes: those kept are taken on the loop, the rest made
        there too when few, else on a thread."""
        items, missing = projection.kept_bytes(objects)
        if len(missing) < _INLINE_BELOW // 4:
            for i in missing:
                items[i] = projection.bytes_of(objects[i])
        else:
            made = await run_bulk(lambda: [projection.bytes_of(objects[i]) for i in missing])
            for i, raw in zip(missing, made):
                items[i] = raw
            projection.forget_absent(len(objects))
        return items
