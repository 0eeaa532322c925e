"""One cluster's history: its writer, a recorder per cached resource, and the reads of the past.

``ClusterHistory`` is what a ``Cluster`` holds when the gateway keeps history
(``--history``): the caches ask it for a ``Recorder`` as each resource loads, and the HTTP
layer asks it for the state at a past version. It binds the store to the cluster first
(``claim``: the store refuses another cluster's history under the same name), from the
cluster's own identity, its ``kube-system`` namespace's UID — what stays the same for the
cluster's whole life and differs between clusters.

What is never recorded: Secrets (their history would be every credential the cluster ever
held, readable by whoever may list Secrets today), and resources the resource policy denies
(they are never cached in the first place).

What a read of the past may cost. Reads run on threads, at most ``MAX_READS`` at once per
cluster and ``MAX_WAITING`` waiting: beyond that 429 with ``Retry-After``, as the API
server's priority and fairness answers, so that a caller asking for every version at once
cannot take the store (or the threads) from everyone else.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from app.bridge import run_blocking
from app.history.patches import change_item
from app.history.recorder import Recorder, resource_key
from app.history.store import Change, ForeignStore, HistoryStore, StoreUnavailable
from app.history.writer import HistoryWriter
from app.kube.status import StatusError
from informer_core.encoded import EncodedObject, by_key, object_key

__all__ = ["NEVER_KEPT", "PLACE", "ClusterHistory", "Seed", "expired"]

log = logging.getLogger(__name__)

NEVER_KEPT = frozenset({("", "secrets")})  # (group, resource)
MAX_READS = 4
MAX_WAITING = 64
PLACE = "_place"  # where an item of a page stands: (rv, namespace, name), for the next page
PAGE_SCAN = 10_000  # rows read at most for one page of /history/
REPLAY_PAGE = 1000  # changes read at once for a stream resumed from the store
CATCH_UP_WAIT = 3.0  # seconds a read of a version the cache has passed waits for the writer


def expired(version: int, oldest: int | None) -> StatusError:
    """The API server's 410 for a version it no longer has, with what the store still has."""
    told = (f"the oldest version kept is {oldest}" if oldest is not None else
            "nothing is kept for it yet")
    return StatusError(410, f"too old resource version: {version} ({told}): the gateway's "
                            f"history does not hold this version", "Expired")


class ClusterHistory:
    """One cluster's recorders, writer and reads of the past; see the module docstring."""

    def __init__(self, store: HistoryStore, cluster: str, retention: float,
                 max_bytes: int | None = None) -> None:
        self.store = store
        self.cluster = cluster
        self.writer = HistoryWriter(store, cluster, retention, max_bytes, claim=self._claim)
        self._uid: Callable[[], str] | None = None
        self._reads = asyncio.Semaphore(MAX_READS)
        self._waiting = 0
        self.recorders: dict[str, Recorder] = {}

    @property
    def refused(self) -> str | None:
        """Why this cluster's history is not kept (the store is another cluster's)."""
        return self.writer.refused

    async def start(self, cluster_uid: Callable[[], str]) -> None:
        """Claim the store for this cluster (``cluster_uid``: its identity, asked on a thread)
        and start writing. A claim that cannot be made now (the API server or the store not
        reachable) is the writer's to make again before it writes anything: a history of a
        cluster not known could be another's.

        Raises:
            ForeignStore: the store holds another cluster's history under this name.
        """
        self._uid = cluster_uid
        try:
            await run_blocking(self.writer.claim)
        except ForeignStore as exc:
            self.writer.refused = str(exc)
            raise
        except (StoreUnavailable, OSError, ValueError) as exc:
            self.writer.problem = str(exc)
            log.warning("history of cluster %s: the store is not claimed yet (tried again "
                        "before the first write): %s", self.cluster, exc)
        self.writer.start()

    def _claim(self) -> None:
        assert self._uid is not None
        self.store.create()  # (idempotent: a store is made on first use, by whichever replica)
        self.store.claim(self.cluster, self._uid())

    async def stop(self) -> None:
        await run_blocking(self.writer.stop)

    def recorder_for(self, group: str, version: str, resource: str) -> Recorder | None:
        """The recorder of a resource loading now; ``None`` for what is never kept."""
        if (group, resource) in NEVER_KEPT or self.refused is not None:
            return None
        key = resource_key(group, version, resource)
        recorder = self.recorders[key] = Recorder(self.writer, key)
        return recorder

    # -- reading ------------------------------------------------------------------------

    def problem(self) -> str | None:
        """Why the past cannot be read now, if it cannot."""
        if not self.writer.claimed:
            return self.writer.problem or "the store is not claimed for the cluster yet"
        return self.writer.problem

    def _unavailable(self, why: str) -> StatusError:
        return StatusError(503, f"the history of cluster {self.cluster} cannot be read now: "
                                f"{why}", "ServiceUnavailable", headers={"Retry-After": "5"})

    async def _read(self, fn: Callable[..., Any], *args: Any) -> Any:
        problem = self.problem()
        if problem is not None:
            raise self._unavailable(problem)
        if self._waiting >= MAX_WAITING:
            raise StatusError(429, "too many reads of the past at once; try again shortly",
                              "TooManyRequests", headers={"Retry-After": "1"})
        self._waiting += 1
        try:
            async with self._reads:
                return await run_blocking(fn, *args)
        except StoreUnavailable as exc:
            raise self._unavailable(str(exc)) from None
        finally:
            self._waiting -= 1

    async def span_of(self, resource: str, version: int, current: int) -> tuple[int, int]:
        """The span of versions the store is exact at that holds ``version`` (waiting for the
        writer while the cache has passed the version and the store has not yet).

        Raises:
            StatusError: 410 for a version the store does not hold; 503 when it cannot be read.
        """
        spans = await self._read(self.store.spans, self.cluster, resource)
        found = _span_of(spans, version)
        if found is None and max((hi for _, hi in spans), default=0) < version <= current:
            await run_blocking(self.writer.flushed, CATCH_UP_WAIT)
            spans = await self._read(self.store.spans, self.cluster, resource)
            found = _span_of(spans, version)
        if found is None:
            raise expired(version, spans[0][0] if spans else None)
        return found

    async def flushed(self, timeout: float = CATCH_UP_WAIT) -> bool:
        """Wait until what the recorders handed over so far is written."""
        return await run_blocking(self.writer.flushed, timeout)

    async def changes_page(self, resource: str, version: int,
                           place: tuple[int, str, str] | None, upto: int,
                           namespace: str | None, known: set[tuple[str, str]],
                           limit: int | None = None
                           ) -> tuple[list[Change], dict[tuple[str, str], bytes]]:
        """One page (``limit``, default ``REPLAY_PAGE``) of the changes after ``version``
        (after ``place``, ``(rv, namespace, name)`` of the last one read, when given) up to
        ``upto``, oldest first (in ``namespace`` if given), and the state at ``version`` of
        each object they change that is not in ``known`` (a watch's transitions need an
        object's state before its change).

        Raises:
            StatusError: 410 when retention forgot ``version`` meanwhile; 503 when the store
                cannot be read.
        """
        return await self._read(self._changes_page, resource, version, place, upto, namespace,
                                known, limit or REPLAY_PAGE)

    def _changes_page(self, resource: str, version: int, place: tuple[int, str, str] | None,
                      upto: int, namespace: str | None, known: set[tuple[str, str]],
                      limit: int) -> tuple[list[Change], dict[tuple[str, str], bytes]]:
        rows = self.store.changes_from(self.cluster, resource, version, place, upto, limit,
                                       namespace)
        new = sorted({(r.namespace, r.name) for r in rows} - known)
        states = self.store.states_at(self.cluster, resource, version, new)
        # retention may have run since the replay began, or between these reads: the rows it
        # took would be missing without a word. Read after them, a span still holding
        # ``version`` says they were all there; else the stream ends as the API server's
        # does when its window passes it: 410
        spans = self.store.spans(self.cluster, resource)
        if _span_of(spans, version) is None:
            raise expired(version, spans[0][0] if spans else None)
        return rows, states

    async def seed(self, group: str, version: str, resource: str) -> Seed | None:
        """The stored state a resource's cache may begin from instead of a list (a restart,
        or a replica started later on a shared store): the newest span's, at its ``hi``.
        ``None`` when there is none, or the store cannot be read now (the cache lists)."""
        if (group, resource) in NEVER_KEPT or self.problem() is not None:
            return None
        try:
            return await self._read(self._seed, resource_key(group, version, resource))
        except StatusError as error:
            log.warning("history of %s: %s not begun from the store: %s", self.cluster,
                        resource, error.message)
            return None

    def _seed(self, key: str) -> Seed | None:
        span = self.store.newest_span(self.cluster, key)
        if span is None:
            return None
        lo, hi, at = span
        objects = [EncodedObject(bytes(raw)) for _, _, _, raw in
                   self.store.live_at(self.cluster, key, hi)]
        return Seed(objects, lo, hi, at)

    async def page(self, resource: str, below: tuple[int, str, str] | None,
                   namespace: str | None, name: str | None, since: float | None,
                   until: float | None, limit: int, matches: Callable[[Any], bool] | None,
                   with_object: bool) -> tuple[list[dict[str, Any]], tuple[int, str, str] | None]:
        """One page of changes for people, newest first (``app.history.patches``): the items,
        and the place the next page starts below (``None``: the last page). ``matches``: a
        selection a change's object (or its previous state) must match. At most
        ``PAGE_SCAN`` rows are read for one page: a selection that matches little answers a
        short page and a place to go on from, as the API server's ``limit`` is a maximum."""
        return await self._read(self._page, resource, below, namespace, name, since, until,
                                limit, matches, with_object)

    def _page(self, resource: str, below: tuple[int, str, str] | None, namespace: str | None,
              name: str | None, since: float | None, until: float | None, limit: int,
              matches: Callable[[Any], bool] | None, with_object: bool
              ) -> tuple[list[dict[str, Any]], tuple[int, str, str] | None]:
        items: list[dict[str, Any]] = []
        scanned = 0
        while len(items) < limit and scanned < PAGE_SCAN:
            rows = self.store.newest_first(self.cluster, resource, below, namespace, name,
                                           since, until, min(PAGE_SCAN - scanned, 4 * limit))
            if not rows:
                return items, None
            for row in rows:
                scanned += 1
                below = (row.rv, row.namespace, row.name)
                before = self.store.previous(self.cluster, resource, row.namespace, row.name,
                                             row.rv)
                if matches is not None and not (
                        matches(StoredObject(row.raw, row.namespace, row.name, row.rv)) or
                        (before is not None and matches(EncodedObject(before)))):
                    continue
                item = change_item(row, before, with_object)
                item[PLACE] = below  # (taken out before it is sent: a merged page's place)
                items.append(item)
                if len(items) >= limit:
                    break
        return items, below

    async def state_at(self, resource: str, version: int,
                       namespace: str | None) -> list[EncodedObject]:
        """The objects there at ``version`` (in ``namespace`` if given), in key order;
        ``span_of`` first."""
        return await self._read(self._state_at, resource, version, namespace)

    def _state_at(self, resource: str, version: int, namespace: str | None) -> list[EncodedObject]:
        rows = self.store.live_at(self.cluster, resource, version, namespace)
        objects = [StoredObject(bytes(raw), ns, name, rv) for ns, name, rv, raw in rows]
        objects.sort(key=by_key)
        return objects


class StoredObject(EncodedObject):
    """An object read back from the store: its key and version from the row, its labels read
    from its JSON only when a selection asks (a list of every object at a past version
    never parses one: 10,000 Pods made as ``EncodedObject``s took 100 ms, two thirds of
    the read)."""

    __slots__ = ("_labels",)

    def __init__(self, raw: bytes, namespace: str, name: str, rv: int) -> None:
        # (no parse: the parent's fields set from the row)
        self.raw = raw
        self.namespace = namespace
        self.resource_version = str(rv)
        self.key = object_key(namespace, name)
        self._labels: Mapping[str, str] | None = None

    @property  # type: ignore[override]
    def labels(self) -> Mapping[str, str]:
        if self._labels is None:
            found = (orjson.loads(self.raw).get("metadata") or {}).get("labels")
            self._labels = ({str(k): str(v) for k, v in found.items()}
                            if isinstance(found, dict) else {})
        return self._labels


@dataclass(frozen=True, slots=True)
class Seed:
    """A resource's stored state at ``hi``, in the span from ``lo``, last current at ``at``."""

    objects: list[EncodedObject]
    lo: int
    hi: int
    at: float


def _span_of(spans: list[tuple[int, int]], version: int) -> tuple[int, int] | None:
    """The widest span holding ``version`` (spans of replicas overlap)."""
    found = [(lo, hi) for lo, hi in spans if lo <= version <= hi]
    return max(found, key=lambda span: span[1]) if found else None
