"""Reflector: keeps a store in step with the API server by one LIST, then WATCH.

Behaviour as client-go's reflector:

- The first list asks ``resourceVersion="0"`` (the API server may answer from
  its watch cache) with ``limit=page_size``; continue pages carry no resource
  version; the pages go to the store as one ``replace``.
- A relist asks for the last synced resource version — without a limit, unless
  the first list came back in pages, so that the watch cache answers it; if
  that version is gone (410) it asks again with ``""`` (the latest, from etcd).
- Watches ask for bookmarks and a server timeout drawn from [5, 10) minutes,
  with a client read timeout a little longer, so a dead connection cannot hang
  a watch for ever. A watch that the server closes cleanly resumes from the
  last resource version seen (bookmarks advance it; a store with
  ``update_resource_version`` is told it after each event). A watch that breaks (API
  server restart) is retried from there after a backoff; a 410 relists.
- Failures are spaced by exponential backoff with jitter (0.8 s doubling to
  30 s, reset after 2 minutes without failures). Every failed list and every
  failed or broken watch is reported to the watch-error handler.
- ``retry_now`` ends a backoff early: told by someone watching the API server
  another way (the gateway's heartbeat) that it answers again, the reflector
  tries at a random moment of a short spread instead of up to a minute later.
- ``seed`` (not client-go's) begins from a state kept elsewhere instead of the first list:
  a process that restarts on a store of what it saw watches from where it stopped.
- ``stop`` is honoured within a second wherever the reflector is: a helper
  thread aborts the call in flight by shutting its socket down.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from informer_core.backoff import ExponentialBackoff
from informer_core.encoded import resource_version_of
from informer_core.errors import APIStatusError, ResourceExpiredError, WatchAbortedError
from informer_core.listwatch import (
    Abortable,
    ListerWatcher,
    ListOptions,
    ListPage,
    WatchEvent,
    WatchStream,
    status_error,
)
from informer_core.stop import when_set

__all__ = [
    "ListOptions",
    "ListPage",
    "ListerWatcher",
    "Reflector",
    "ReflectorStats",
    "ReflectorStore",
    "ResourceVersionUpdater",
    "ResourceExpiredError",
    "WatchEvent",
    "WatchStream",
    "resource_version_of",
]

log = logging.getLogger(__name__)

MIN_WATCH_TIMEOUT = 300.0  # seconds; each watch asks for [MIN, 2*MIN)
_SUPERVISE_INTERVAL = 0.2  # how often a stop event that cannot tell is looked at
_RESYNC_CHECK = 1.0  # the longest wait between looks at the clock for a resync due


class ReflectorStore(Protocol):
    """The part of a store the reflector writes to."""

    def add(self, obj: Any) -> None: ...

    def update(self, obj: Any) -> None: ...

    def delete(self, obj: Any) -> None: ...

    def replace(self, objs: list[Any], resource_version: str) -> None: ...

    def resync(self) -> None: ...


@runtime_checkable
class ResourceVersionUpdater(Protocol):
    """A store told the version after every watch event, bookmarks included (client-go's
    ``ResourceVersionUpdater``): it can then say which version it is exactly at."""

    def update_resource_version(self, resource_version: str) -> None: ...


@dataclass
class ReflectorStats:
    """Counters for operators (read without locking; each is updated atomically)."""

    lists: int = 0
    relists: int = 0
    list_pages: int = 0
    watches: int = 0
    watch_errors: int = 0
    events: int = 0
    last_event_time: float = 0.0  # time.time() of the last watch event or list
    watching: bool = False  # a watch is open: the store follows the API server
    unwatched_since: float = 0.0  # time.time() the last open watch ended (0: never had one)
    seeded: bool = False  # began from a state kept elsewhere, not a list (``Reflector.seed``)


class _VeryShortWatchError(ConnectionError):
    """A watch closed within a second having delivered nothing."""


class Reflector:
    """Lists then watches one resource into ``store``; see the module docstring.

    Args:
        lister_watcher: the source (``list``/``watch``; ``abort()`` if it has one).
        store: receives ``replace`` after each (paged) list, ``add``/``update``/
            ``delete`` per watch event, and ``resync`` every ``resync_period``.
        resync_period: seconds between resyncs; 0 for none.
        page_size: ``limit`` of each list page.
        should_resync: asked before each resync (the informer's processor
            answers whether any listener is due).
        watch_error_handler: called with each list or watch failure.
    """

    def __init__(self, lister_watcher: ListerWatcher, store: ReflectorStore,
                 resync_period: float = 0.0, page_size: int = 500, *, name: str = "",
                 should_resync: Callable[[], bool] | None = None,
                 watch_error_handler: Callable[[BaseException], None] | None = None,
                 backoff: ExponentialBackoff | None = None,
                 min_watch_timeout: float = MIN_WATCH_TIMEOUT,
                 clock: Callable[[], float] = time.monotonic,
                 rng: Callable[[], float] = random.random) -> None:
        self._lw = lister_watcher
        self._store = store
        self.resync_period = resync_period
        self.page_size = page_size
        self.name = name or type(lister_watcher).__name__
        self._should_resync = should_resync
        self.watch_error_handler = watch_error_handler
        self._backoff = backoff or ExponentialBackoff(clock=clock, rng=rng)
        self._min_watch_timeout = min_watch_timeout
        self._clock = clock
        self._rng = rng
        self._lock = threading.Lock()  # guards the fields below
        self._last_sync_rv = ""
        self._last_sync_rv_unavailable = False
        self._stream: WatchStream | None = None
        self._paginated = False  # the first list came in pages: the server honours limit
        # set by retry_now (and by the supervisor on stop): a backoff being waited out ends;
        # cleared as each list or watch begins, so one that fails after it retries at once
        self._nudged = threading.Event()
        self._retry_at = 0.0  # guarded by _lock: when a nudged reflector tries again
        self._seed: tuple[list[Any], str] | None = None  # a state to begin from (``seed``)
        self.stats = ReflectorStats()

    # -- public ----------------------------------------------------------------

    def last_sync_resource_version(self) -> str:
        """Return the resourceVersion the store was last brought up to."""
        with self._lock:
            return self._last_sync_rv

    def run(self, stop: threading.Event) -> None:
        """List and watch until ``stop`` is set, backing off between failures."""
        with self._supervised(stop):
            while not stop.is_set():
                try:
                    self._list_and_watch(stop)
                except WatchAbortedError:
                    pass
                except Exception as exc:  # noqa: BLE001 - every failure is reported, then retried
                    self._report(exc)
                if self._back_off(stop):
                    break

    def retry_now(self, within: float = 0.0) -> None:
        """The API server answers again: end the backoff being waited out, trying at a
        random moment in the next ``within`` seconds, and start the backoff over.

        client-go has no such call: a reflector finds a returning API server by its backoff
        alone, up to a minute late (30 s at most, stretched by jitter up to twice). A caller
        that follows the API server another way can say so as soon as it knows; the random
        moment keeps the reflectors of one API server from all listing in the same instant.
        A reflector that is not backing off carries the word until its next list or watch
        begins: if that attempt fails, it tries again at once.
        """
        with self._lock:
            self._retry_at = self._clock() + self._rng() * max(within, 0.0)
        self._backoff.reset()
        self._nudged.set()

    def seed(self, items: list[Any], resource_version: str, current_at: float) -> None:
        """Begin from ``items``, the state at ``resource_version`` kept elsewhere (a store of
        the changes this process saw before it restarted), instead of a first list: they go
        to the store as a list's would, and the watch begins from that version. Where the
        API server no longer has it (410), the reflector lists as after any expired watch,
        and the store is told the differences. ``current_at``: when that state was last
        known current (``time.time()``): until a watch opens, the store is as old as that.

        client-go has no such call: its reflector always lists first. Call before ``run``.
        """
        with self._lock:
            self._seed = (items, resource_version)
        self.stats.unwatched_since = current_at
        self.stats.last_event_time = current_at

    def list_and_watch(self, stop: threading.Event) -> None:
        """List everything, then watch until the watch fails or ``stop`` is set.

        Returns normally when a relist is due; raises the list's error if the
        list fails.
        """
        with self._supervised(stop):
            self._list_and_watch(stop)

    def _list_and_watch(self, stop: threading.Event) -> None:
        with self._lock:
            seed, self._seed = self._seed, None
        if seed is None:
            self._list(stop)
        else:
            items, version = seed
            self._store.replace(items, version)
            del items, seed
            self._set_last_sync_rv(version)
            self.stats.seeded = True
        self._watch_loop(stop)

    @contextlib.contextmanager
    def _supervised(self, stop: threading.Event) -> Iterator[None]:
        """For the block's duration, abort the call in flight when ``stop`` is set and run
        resyncs when due. A stop that tells (``informer_core.stop``) aborts the call from
        the thread that sets it, and a helper thread runs only for resyncs; one that cannot
        tell is looked at by the helper every ``_SUPERVISE_INTERVAL``."""
        done = threading.Event()

        def stopped() -> None:
            done.set()
            self._stop_now()

        forget = when_set(stop, stopped)
        helper = None
        if forget is None or self.resync_period > 0:
            helper = threading.Thread(target=self._supervise, args=(stop, done, forget is None),
                                      name=f"reflector-supervisor-{self.name}", daemon=True)
            helper.start()
        try:
            yield
        finally:
            done.set()
            if forget is not None:
                forget()
            if helper is not None:
                helper.join()

    # -- list ------------------------------------------------------------------

    def _relist_resource_version(self) -> str:
        with self._lock:
            if self._last_sync_rv_unavailable:
                return ""  # the last version is gone: ask for the latest, from etcd
            return self._last_sync_rv or "0"

    def _list(self, stop: threading.Event) -> None:
        self._nudged.clear()  # an attempt begins: an earlier retry_now is answered by it
        rv = self._relist_resource_version()
        relist = rv != "0"
        try:
            items, list_rv = self._list_pages(rv, stop)
        except ResourceExpiredError as exc:
            if rv == "":
                raise
            self._report(exc)
            with self._lock:
                self._last_sync_rv_unavailable = True
            items, list_rv = self._list_pages(self._relist_resource_version(), stop)
        with self._lock:
            self._last_sync_rv_unavailable = False
        if stop.is_set():
            raise WatchAbortedError("stopped during list")
        self._store.replace(items, list_rv)
        del items
        self._set_last_sync_rv(list_rv)
        self.stats.lists += 1
        if relist:
            self.stats.relists += 1
        self.stats.last_event_time = time.time()

    def _list_pages(self, rv: str, stop: threading.Event) -> tuple[list[Any], str]:
        # A relist at a specific version must not page unless the server is known to
        # page (its watch cache is off): with a limit, the list is an exact-version
        # read from etcd — stale, and followed by a watch the fresh watch cache calls
        # too old. Without one, the watch cache answers with a state not older than rv.
        limit = self.page_size
        if rv not in ("", "0") and not self._paginated:
            limit = 0
        options = ListOptions(resource_version=rv, limit=limit)
        items: list[Any] = []
        while True:
            if stop.is_set():
                raise WatchAbortedError("stopped during list")
            try:
                page = self._lw.list(options)
            except ResourceExpiredError:
                if not options.continue_token:
                    raise
                # The continue token expired mid-way: fall back to one full list.
                log.info("%s: continue token expired; listing in one request", self.name)
                page = self._lw.list(ListOptions(resource_version=""))
                self.stats.list_pages += 1
                return list(page.items), page.resource_version
            self.stats.list_pages += 1
            items.extend(page.items)
            if not page.continue_token:
                return items, page.resource_version
            if rv == "0":
                self._paginated = True
            options = ListOptions(limit=self.page_size, continue_token=page.continue_token)

    # -- watch -----------------------------------------------------------------

    def _watch_loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            timeout = int(self._min_watch_timeout * (self._rng() + 1.0))
            options = ListOptions(resource_version=self.last_sync_resource_version(),
                                  timeout_seconds=timeout, allow_watch_bookmarks=True)
            self._nudged.clear()
            try:
                stream = self._lw.watch(options)
            except WatchAbortedError:
                return
            except ConnectionError as exc:
                # Most likely the API server is restarting: retry the watch, no relist.
                self._report(exc)
                if self._back_off(stop):
                    return
                continue
            except ResourceExpiredError as exc:
                self._report(exc)
                return  # relist
            with self._lock:
                self._stream = stream
            self.stats.watches += 1
            self.stats.watching = True
            try:
                self._handle_watch(stream, stop)
            except WatchAbortedError:
                return
            except (ConnectionError, OSError) as exc:
                if stop.is_set():
                    return
                self._report(exc)  # broken stream: resume from the last version
                if self._back_off(stop):
                    return
            except ResourceExpiredError as exc:
                self._report(exc)
                return  # relist
            except APIStatusError as exc:
                self._report(exc)
                return  # relist after backoff
            finally:
                self.stats.watching = False
                self.stats.unwatched_since = time.time()
                with self._lock:
                    self._stream = None
                stream.stop()

    def _handle_watch(self, stream: WatchStream, stop: threading.Event) -> None:
        started = self._clock()
        count = 0
        store = self._store
        # Told the version after every event, bookmarks included (client-go's
        # ResourceVersionUpdater): a store that knows it can say where it is exactly.
        update_version = (store.update_resource_version
                          if isinstance(store, ResourceVersionUpdater) else None)
        for event in stream:
            if stop.is_set():
                return
            kind, obj = event.type, event.object
            if kind == "ERROR":
                code = obj.get("code", 500) if isinstance(obj, dict) else 500
                raise status_error(int(code or 500), obj, "watch error event")
            if kind == "ADDED":
                store.add(obj)
            elif kind == "MODIFIED":
                store.update(obj)
            elif kind == "DELETED":
                store.delete(obj)
            elif kind != "BOOKMARK":
                raise APIStatusError(f"unable to understand watch event type {kind!r}", code=500)
            rv = resource_version_of(obj)
            if rv:
                self._set_last_sync_rv(rv)
                if update_version is not None:
                    update_version(rv)
            count += 1
            self.stats.events += 1
            self.stats.last_event_time = time.time()
        if stop.is_set():
            return
        if count == 0 and self._clock() - started < 1.0:
            raise _VeryShortWatchError(
                f"{self.name}: very short watch: closed within a second with no events")

    # -- helpers ---------------------------------------------------------------

    def _back_off(self, stop: threading.Event) -> bool:
        """Wait out the next backoff delay, or less after ``retry_now``; whether stopped."""
        if self._nudged.wait(self._backoff.next_delay()):  # also set by the supervisor on stop
            with self._lock:
                rest = self._retry_at - self._clock()
            if rest > 0:
                stop.wait(rest)
        return stop.is_set()

    def _set_last_sync_rv(self, rv: str) -> None:
        with self._lock:
            self._last_sync_rv = rv

    def _report(self, exc: BaseException) -> None:
        self.stats.watch_errors += 1
        if isinstance(exc, ResourceExpiredError):
            log.info("%s: %s (will relist)", self.name, exc)
        else:
            log.warning("%s: %s: %s", self.name, type(exc).__name__, exc)
        handler = self.watch_error_handler
        if handler is not None:
            try:
                handler(exc)
            except Exception:  # noqa: BLE001 - a handler must not kill the reflector
                log.exception("%s: watch error handler failed", self.name)

    def _supervise(self, stop: threading.Event, done: threading.Event, poll: bool) -> None:
        """Run resyncs when due until ``done``; ``poll``: also look at ``stop`` (one that
        cannot tell) and abort the call in flight when it is set."""
        next_resync = self._clock() + self.resync_period if self.resync_period > 0 else None
        while not done.is_set():
            if poll:
                if stop.wait(_SUPERVISE_INTERVAL):
                    self._stop_now()
                    return
            elif done.wait(min(max(next_resync - self._clock(), 0.0), _RESYNC_CHECK)
                           if next_resync is not None else None):
                return
            if next_resync is not None and self._clock() >= next_resync:
                next_resync = self._clock() + self.resync_period
                if self._should_resync is None or self._should_resync():
                    try:
                        self._store.resync()
                    except Exception:  # noqa: BLE001
                        log.exception("%s: resync failed", self.name)

    def _stop_now(self) -> None:
        """``stop`` was set: a backoff being waited out ends, the call in flight is aborted."""
        self._nudged.set()
        self._abort()

    def _abort(self) -> None:
        if isinstance(self._lw, Abortable):
            self._lw.abort()
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.stop()
