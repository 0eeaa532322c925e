"""What one resource's hub saw, handed to the history writer: each change, and where it is exact.

A ``Recorder`` hangs on a resource's ``EventHub`` (``app.cache.hub``), which calls it on the
event loop with each burst it delivers, each point it settles at, and once with its whole
view when it is ready. All it does there is make the rows (a tuple's worth each: the
object's bytes are the cache's own, shared) and append them to the cluster writer's inbox.

Spans (``app.history.store``). A span opens at a baseline — the cache's whole state at a
version the informer vouched for, written as the changes that make the store's state that —
and grows with every burst whose events each stand at their own version (a watch's), to the
burst's point (never to a version between points: a change older than a burst's last
may still be on its way). A burst that does not (a relist's: its deletions' versions are unknown)
closes the span; the next point opens another, exact from there. Dropped changes (the
store was down too long: the writer's ``epoch``) need a baseline again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from app.history.store import ADDED, DELETED, MODIFIED, Baseline, Change, Span
from app.history.writer import HistoryWriter

__all__ = ["Recorder", "resource_key"]

_KINDS = {"ADDED": ADDED, "MODIFIED": MODIFIED, "DELETED": DELETED}


def _previous(event: Any) -> int:
    """The version of the object's change before ``event``'s, where the hub knows it: the old
    state of a change or a watch's deletion, the last state of a relist's deletion."""
    if event.old is not None:
        return int(event.old.resource_version or 0)
    if event.type == "DELETED" and event.restamped:
        return int(event.obj.resource_version or 0)
    return 0


def resource_key(group: str, version: str, resource: str) -> str:
    """A resource as the store names it: its path's start (``core/v1/pods``, ``apps/v1/deployments``)."""
    return f"{group or 'core'}/{version}/{resource}"


class Recorder:
    """Hands one resource's changes and spans to ``writer``; called by its hub on the loop."""

    def __init__(self, writer: HistoryWriter, resource: str,
                 clock: Callable[[], float] = time.time) -> None:
        self.writer = writer
        self.resource = resource
        self._clock = clock
        self.lo: int | None = None  # where the open span begins (None: none open)
        self.hi = 0
        self._epoch = writer.epoch
        self._needs_baseline = True
        self._view: dict[str, Any] | None = None

    def resume(self, lo: int, hi: int) -> None:
        """The cache begins from the store's own state at ``hi``, in the span from ``lo``
        (a restart): the span goes on, with no baseline to write."""
        self.lo, self.hi = lo, hi
        self._needs_baseline = False

    def ready(self, view: dict[str, Any], exact: int | None) -> None:
        """The hub's initial state is in ``view``, exactly the server's at ``exact`` (if known)."""
        self._view = view
        if exact and self._needs_baseline:
            self._baseline(exact)

    def delivered(self, held: list, point: int, placed: bool) -> None:
        """A burst the hub delivered: its events (stamped), the point it ended at (0: none),
        and whether each stood at its own version."""
        # (to the microsecond, as the time is written: ``since`` a change's time includes it)
        put, resource, now = self.writer.put, self.resource, round(self._clock(), 6)
        if self.writer.epoch != self._epoch:  # changes were dropped: a baseline again
            self._epoch = self.writer.epoch
            self.lo, self._needs_baseline = None, True
        gap = self._needs_baseline  # a change before may be missing: its writer searches
        for event in held:
            obj = event.obj
            put(resource, Change(_KINDS[event.type], event.own or event.rv, obj.namespace,
                                 obj.name, now, obj.raw, 0 if gap else _previous(event)))
        if self._needs_baseline:
            if point:
                self._baseline(point)
            return
        if point:
            if not placed:  # a relist's burst, whole: exact again from its point
                self.lo = None
            self._grow(point)
        elif any(event.restamped for event in held):
            self.lo = None  # out of order: exact again from the next point
        # (else: in order, yet a change older than the last may still be on its way — the
        # informer hands a burst grouped by object — so the span waits for the point)

    def settled(self, version: int) -> None:
        """The hub is at a point with nothing new: the open span reaches ``version``."""
        if self.writer.epoch != self._epoch:
            self._epoch = self.writer.epoch
            self.lo, self._needs_baseline = None, True
        if self._needs_baseline:
            self._baseline(version)
        elif version > self.hi or self.lo is None:
            self._grow(version)

    def _grow(self, version: int) -> None:
        if self.lo is None:
            self.lo = version
        self.hi = max(self.hi, version)
        self.writer.put(self.resource, Span(self.lo, self.hi, round(self._clock(), 6)))

    def _baseline(self, version: int) -> None:
        if self._view is None:
            return  # not ready yet: the ready view's version will be the baseline's
        self.writer.put(self.resource, Baseline(version, list(self._view.values()),
                                                round(self._clock(), 6)))
        self._needs_baseline = False
        self.lo = self.hi = version
