"""One cluster's history writer: a thread that writes what the recorders hand it, in batches.

Why a thread of its own. A write is I/O (a file's lock, a round trip to PostgreSQL) and the
event loop must never wait on it: the recorders (``app.history.recorder``) only append to an
``Inbox`` (``app.bridge``), and this thread takes what arrived — one wake-up a burst, none
while nothing changes — and writes it in one transaction. Reads of the present never touch
the store, so a store that is slow or down slows nothing but history.

Nothing is written before the store is claimed for the cluster (``claim``: a store that
holds another cluster's history under this name is never written, and the waiting changes
are dropped); a claim that fails otherwise (the cluster or the store not reachable yet) is
tried again with the batch.

A store that fails: the batch is kept and tried again (with a backoff, the reason kept in
``problem`` for ``/readyz?verbose`` and the history reads' 503, and logged once), so nothing
is lost and, the store's rows being keyed, nothing is written twice when it is back. What
waits is bounded (``max_pending``): beyond it the waiting changes are dropped, ``epoch`` says
so, and each recorder starts again from a baseline of its cache — the store then has a gap,
which answers 410 as any version it cannot answer for.

Retention runs here too, between batches: once a minute what only versions received longer
ago than ``retention`` needed is forgotten, and while the store is larger than ``max_bytes``
the oldest tenth of what is left is, each resource's span beginning later accordingly.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from app.bridge import Inbox
from app.history.store import ForeignStore, HistoryStore, StoreUnavailable

__all__ = ["HistoryWriter"]

log = logging.getLogger(__name__)

GATHER = 0.05  # seconds a batch waits for the rest of its burst
RETAIN_EVERY = 60.0  # seconds between retention passes
_BACKOFF = (0.2, 0.5, 1.0, 2.0, 5.0)


class HistoryWriter:
    """Writes one cluster's changes to ``store`` from a thread; ``put`` from anywhere."""

    def __init__(self, store: HistoryStore, cluster: str, retention: float,
                 max_bytes: int | None = None, max_pending: int = 1_000_000,
                 clock: Callable[[], float] = time.time,
                 claim: Callable[[], None] | None = None) -> None:
        self.store = store
        # binds the store to the cluster before anything is written (``ClusterHistory``):
        # raises ``ForeignStore``, or another error to be tried again
        self._claim = claim
        self.claimed = claim is None
        self.refused: str | None = None  # the store is another cluster's: nothing is written
        self.cluster = cluster
        self.retention = retention
        self.max_bytes = max_bytes
        self.max_pending = max_pending
        self._clock = clock
        self.inbox = Inbox()
        self.epoch = 0  # bumped when waiting changes were dropped: recorders start again
        self.problem: str | None = None  # why the store cannot be written now
        self.written = 0  # changes written
        self.batches = 0
        self.forgotten = 0  # rows retention deleted
        self.pending: list[tuple[str, Any]] = []  # taken, not yet written
        self._thread: threading.Thread | None = None
        self._next_retention = 0.0
        self._idle = threading.Condition()

    def put(self, resource: str, op: Any) -> None:
        """Hand ``op`` (``Change``, ``Span`` or ``Baseline``) of ``resource`` to the thread."""
        if self.refused is None:
            self.inbox.put((resource, op))

    def start(self) -> None:
        self._next_retention = time.monotonic() + RETAIN_EVERY
        self._thread = threading.Thread(target=self._run, name=f"history-{self.cluster}",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Write what was handed over (for ``timeout`` at most), then end the thread."""
        self.inbox.close()
        if self._thread is not None:
            self._thread.join(timeout)

    def flushed(self, timeout: float) -> bool:
        """Wait until everything handed over so far is written (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while len(self.inbox) or self.pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(min(left, 0.05))
        return True

    # -- the thread -------------------------------------------------------------------

    def _run(self) -> None:
        failures = 0
        while True:
            wait = max(0.0, self._next_retention - time.monotonic())
            taken = self.inbox.take(GATHER, timeout=wait if not self.pending else 0.0)
            self.pending.extend(taken)
            if self.refused is not None:
                return
            if self.pending:
                if self._write():
                    failures = 0
                else:
                    failures += 1
                    if self.inbox.closed:
                        log.error("history of %s: %d changes not written at shutdown: %s",
                                  self.cluster, len(self.pending), self.problem)
                        return
                    self.inbox.pause(_BACKOFF[min(failures, len(_BACKOFF)) - 1])
                    continue
            with self._idle:
                self._idle.notify_all()
            if self.inbox.closed and not len(self.inbox):
                return
            if time.monotonic() >= self._next_retention and self.claimed:
                self._next_retention = time.monotonic() + RETAIN_EVERY
                self.retain()

    def _write(self) -> bool:
        batch = self.pending
        try:
            if not self.claimed:
                self.claim()
            self.written += self.store.write(self.cluster, batch, round(self._clock(), 6))
        except ForeignStore as exc:
            self.refused = self.problem = str(exc)
            log.error("history of %s is not kept: %s", self.cluster, exc)
            self.pending = []
            self.inbox.close()
            return False
        except (StoreUnavailable, OSError, ValueError) as exc:
            if self.problem is None:
                log.warning("history of %s cannot be written (%d changes wait): %s",
                            self.cluster, len(batch), exc)
            self.problem = str(exc)
            if len(batch) > self.max_pending:
                log.error("history of %s: %d changes waited for the store, more than %d: "
                          "dropped; the history has a gap until each cache's next baseline",
                          self.cluster, len(batch), self.max_pending)
                self.pending = []
                self.epoch += 1
            return False
        if self.problem is not None:
            log.info("history of %s is written again (%d changes caught up)", self.cluster,
                     len(batch))
            self.problem = None
        self.batches += 1
        self.pending = []
        return True

    def claim(self) -> None:
        assert self._claim is not None
        self._claim()
        self.claimed = True

    def retain(self) -> None:
        """Forget what falls out by time, then by size (see the module docstring)."""
        try:
            resources = self.store.resources(self.cluster)
            cutoff = self._clock() - self.retention
            for resource in resources:
                version = self.store.version_received_before(self.cluster, resource, cutoff)
                if version is not None:
                    self.forgotten += self.store.forget_before(self.cluster, resource, version)
            if self.max_bytes is None:
                return
            for _ in range(10):
                if self.store.size_bytes() <= self.max_bytes:
                    return
                oldest = self.store.oldest_received(self.cluster)
                if oldest is None:
                    return
                cutoff = oldest + (self._clock() - oldest) / 10
                for resource in resources:
                    version = self.store.version_received_before(self.cluster, resource, cutoff)
                    if version is not None:
                        self.forgotten += self.store.forget_before(self.cluster, resource,
                                                                   version)
        except StoreUnavailable as exc:
            log.warning("history of %s: retention not applied now: %s", self.cluster, exc)
