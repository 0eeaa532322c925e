"""SharedIndexInformer: a reflector, a DeltaFIFO, an indexer, and fan-out to handlers.

The pipeline, as client-go's: the reflector lists and watches into a
``DeltaFIFO``; one controller thread pops it and, for each delta, updates the
indexer and then notifies every listener. Each listener owns an unbounded
buffer and a thread of its own, so a slow handler delays nobody else.

Two shortcuts, for the cost of waking threads (tens of microseconds of CPU each on
a virtual machine, more than handling a change): a change that finds the
controller thread idle is handled by the reflector's thread itself, under the
queue's lock as a pop would be (``DeltaFIFO``'s ``process_while_idle``); and a
handler that never blocks (``InlineHandler``) is called on the thread handling the
change, with no thread of its own. A change then wakes one thread, not three,
before it leaves the informer.

Objects enter the cache encoded (``EncodedObject``): each page and watch event
is parsed once, transformed (``set_transform``), encoded once, and the parsed
form dropped. Handlers still receive plain ``dict``s, decoded when delivered;
an ``EncodedHandler`` receives the stored form itself. What a handler can take
(``EncodedHandler``, ``SettledHandler``, ``SyncedHandler``, ``InlineHandler``) is
read once, when it is added.

Relists are never silent: an object deleted while the watch was down reaches
handlers as ``on_delete`` with a ``DeletedFinalStateUnknown``; one changed while
down arrives as ``on_update``; a relisted object whose resourceVersion did not
change counts as a resync (delivered only to listeners due for one).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol, runtime_checkable

from informer_core.delta_fifo import Delta, DeletedFinalStateUnknown, DeltaFIFO, DeltaType
from informer_core.encoded import EncodedObject
from informer_core.encoding_stage import EncodingListerWatcher
from informer_core.errors import FIFOClosedError
from informer_core.listwatch import (
    ListerWatcher,
)
from informer_core.reflector import Reflector, ReflectorStats
from informer_core.stop import when_set
from informer_core.store import (
    LABEL_INDEX,
    EncodedView,
    Indexer,
    IndexFunc,
    label_index_func,
)

__all__ = [
    "EncodedHandler",
    "ResourceEventHandler",
    "ResourceEventHandlerFuncs",
    "SharedIndexInformer",
    "HandlerRegistration",
    "InlineHandler",
    "SettledHandler",
    "SyncedHandler",
]

log = logging.getLogger(__name__)

MINIMUM_RESYNC_PERIOD = 1.0
_POP_TIMEOUT = 0.25


class ResourceEventHandler(Protocol):
    """Receives notifications; called on the listener's own thread, one at a time.

    A handler may do more, each said by a protocol of its own: ``SyncedHandler``
    (told when the initial list is in), ``EncodedHandler`` (takes the stored
    form), ``SettledHandler`` (told the consistent points), ``InlineHandler``
    (called on the informer's thread instead: it never blocks).
    """

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None: ...

    def on_update(self, old: Any, new: Any) -> None: ...

    def on_delete(self, obj: Any) -> None: ...


@runtime_checkable
class SyncedHandler(Protocol):
    """A handler told when the initial list is in: ``on_synced()``, once, in order with the
    other calls, right after the last ``on_add`` of the initial list (so a handler that
    forwards its calls elsewhere can signal the sync, and nobody polls)."""

    def on_synced(self) -> None: ...


@runtime_checkable
class EncodedHandler(Protocol):
    """A handler that takes objects as the store keeps them (``EncodedObject``), never
    decoded: it says so with ``accepts_encoded = True``."""

    accepts_encoded: bool


@runtime_checkable
class SettledHandler(Protocol):
    """A handler told the consistent points; it says so with ``accepts_settled = True``.

    The store holds exactly the server's state at some resourceVersion only when
    nothing is left in the informer's queue (see ``informer_core.delta_fifo``). Such a
    handler is told so with the notification that brings the store there: its
    ``on_add``, ``on_update`` and ``on_delete`` take a keyword ``settled``, the version
    ("" when the store is not at one yet); and ``on_settled(version)`` comes alone when
    the store reaches one without a change (a bookmark, a relist that changed nothing,
    the last item of a queue not for it).
    """

    accepts_settled: bool

    def on_add(self, obj: Any, is_in_initial_list: bool, settled: str = "") -> None: ...

    def on_update(self, old: Any, new: Any, settled: str = "") -> None: ...

    def on_delete(self, obj: Any, settled: str = "") -> None: ...

    def on_settled(self, version: str) -> None: ...


@runtime_checkable
class InlineHandler(Protocol):
    """A handler that never blocks and only hands each call on (to an event loop, a
    queue): it says so with ``runs_inline = True``, and is then called on the thread
    that distributes the notifications, in their order, with no buffer or thread of
    its own. Why: each change otherwise wakes one more thread, and on a virtual machine
    a wake-up costs tens of microseconds of CPU (here about 40 for the woken thread and
    80 for the one waking it), more than the handler's own work. Such a handler must
    not call back into the informer (add or remove handlers) and must not raise; what
    it raises is logged, as for any handler, and the others still get the call."""

    runs_inline: bool


class _Capabilities(NamedTuple):
    """What one handler can take, read once when it is added."""

    encoded: bool
    settled: bool
    on_synced: Callable[[], None] | None
    on_settled: Callable[[str], None] | None
    inline: bool


def _capabilities(handler: Any) -> _Capabilities:
    settled = isinstance(handler, SettledHandler) and handler.accepts_settled is True
    return _Capabilities(
        encoded=isinstance(handler, EncodedHandler) and handler.accepts_encoded is True,
        settled=settled,
        on_synced=handler.on_synced if isinstance(handler, SyncedHandler) else None,
        on_settled=handler.on_settled if settled else None,
        inline=isinstance(handler, InlineHandler) and handler.runs_inline is True)


class ResourceEventHandlerFuncs:
    """Adapt plain callables to ``ResourceEventHandler``; a missing one ignores its event."""

    def __init__(self, add_func: Callable[[Any], None] | None = None,
                 update_func: Callable[[Any, Any], None] | None = None,
                 delete_func: Callable[[Any], None] | None = None) -> None:
        self.add_func = add_func
        self.update_func = update_func
        self.delete_func = delete_func

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        if self.add_func is not None:
            self.add_func(obj)

    def on_update(self, old: Any, new: Any) -> None:
        if self.update_func is not None:
            self.update_func(old, new)

    def on_delete(self, obj: Any) -> None:
        if self.delete_func is not None:
            self.delete_func(obj)


# -- notifications --------------------------------------------------------------

def _decode(obj: Any) -> Any:
    if isinstance(obj, EncodedObject):
        return obj.to_dict()
    if isinstance(obj, DeletedFinalStateUnknown) and isinstance(obj.obj, EncodedObject):
        return DeletedFinalStateUnknown(obj.key, obj.obj.to_dict())
    return obj


class _Notification:
    """One event for listeners; decoded at most once, on the first listener's thread."""

    __slots__ = ("kind", "old", "new", "initial", "settled", "_decoded")

    def __init__(self, kind: str, new: Any, old: Any = None, initial: bool = False) -> None:
        self.kind = kind  # "add", "update", "delete", "synced" or "settled" (new: the version)
        self.new = new
        self.old = old
        self.initial = initial
        self.settled = ""  # the version the store is exactly at after this one ("": none)
        self._decoded: tuple[Any, Any] | None = None

    def decoded(self) -> tuple[Any, Any]:
        decoded = self._decoded
        if decoded is None:  # a benign race: two threads may both decode, equal results
            decoded = self._decoded = (_decode(self.new), _decode(self.old))
        return decoded

    def deliver(self, handler: Any, can: _Capabilities) -> None:
        if self.kind == "synced":
            if can.on_synced is not None:
                can.on_synced()
            return
        if self.kind == "settled":
            if can.on_settled is not None:
                can.on_settled(self.new)
            return
        if can.encoded:
            new, old = self.new, self.old
        else:
            new, old = self.decoded()
        if can.settled:
            if self.kind == "add":
                handler.on_add(new, self.initial, settled=self.settled)
            elif self.kind == "update":
                handler.on_update(old, new, settled=self.settled)
            else:
                handler.on_delete(new, settled=self.settled)
        elif self.kind == "add":
            handler.on_add(new, self.initial)
        elif self.kind == "update":
            handler.on_update(old, new)
        else:
            handler.on_delete(new)


# -- listeners and the shared processor -------------------------------------------

class HandlerRegistration:
    """Returned by ``add_event_handler``; pass it to ``remove_event_handler``."""

    def __init__(self, listener: _ProcessorListener, informer: SharedIndexInformer) -> None:
        self._listener = listener
        self._informer = informer

    def has_synced(self) -> bool:
        """Return whether the informer synced and this handler saw the whole initial list."""
        return self._informer.has_synced() and self._listener.initial_delivered()


class _ProcessorListener:
    """One handler with its own unbounded buffer and thread; or, for a handler that runs
    inline (``InlineHandler``), neither: each notification is delivered as it is added."""

    def __init__(self, handler: Any, requested_resync: float, resync: float,
                 clock: Callable[[], float]) -> None:
        self.handler = handler
        self.can = _capabilities(handler)
        self.requested_resync_period = requested_resync
        self.resync_period = resync
        self._clock = clock
        self.next_resync = clock() + resync
        self._cond = threading.Condition()  # guards _buffer, _stopped, _pending_initial
        self._buffer: deque[_Notification] = deque()
        self._stopped = False
        self._pending_initial = 0
        self._thread: threading.Thread | None = None

    def add(self, notification: _Notification) -> None:
        if self.can.inline:
            # (callers add in order, under the processor's lock or the informer's delta block)
            if not self._stopped:
                self._deliver(notification)
            return
        with self._cond:
            if notification.initial:
                self._pending_initial += 1
            self._buffer.append(notification)
            self._cond.notify()

    def initial_delivered(self) -> bool:
        with self._cond:
            return self._pending_initial == 0

    def start(self, name: str) -> None:
        if self.can.inline:
            return  # no thread: ``add`` delivers
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def should_resync(self, now: float) -> bool:
        return self.resync_period != 0 and now >= self.next_resync

    def determine_next_resync(self, now: float) -> None:
        self.next_resync = now + self.resync_period

    def set_resync_period(self, period: float) -> None:
        self.resync_period = period

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._buffer and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                notification = self._buffer.popleft()
            try:
                self._deliver(notification)
            finally:
                if notification.initial:
                    with self._cond:
                        self._pending_initial -= 1

    def _deliver(self, notification: _Notification) -> None:
        try:
            notification.deliver(self.handler, self.can)
        except Exception:  # noqa: BLE001 - a failing handler must not stop the others
            log.exception("event handler %r failed on %s", self.handler, notification.kind)


def _determine_resync_period(desired: float, check: float) -> float:
    if desired == 0:
        return 0.0
    if check == 0:
        log.warning("resync period %s requested but the informer does not resync", desired)
        return 0.0
    return max(desired, check)


class _SharedProcessor:
    """Fans notifications out to listeners; decides which are due for a resync."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.RLock()  # guards the lists and _started
        self._listeners: list[_ProcessorListener] = []
        self._syncing: list[_ProcessorListener] = []
        self._started = False

    def add_listener(self, listener: _ProcessorListener) -> None:
        with self._lock:
            # Not "syncing" until a resync check finds it due: a listener without a
            # resync period never receives sync notifications (a relist's unchanged
            # objects included).
            self._listeners.append(listener)
            if self._started:
                listener.start(f"informer-listener-{len(self._listeners)}")

    def remove_listener(self, listener: _ProcessorListener) -> None:
        with self._lock:
            if listener not in self._listeners:
                return
            self._listeners.remove(listener)
            if listener in self._syncing:
                self._syncing.remove(listener)
        listener.stop()
        listener.join(5.0)

    def distribute(self, notification: _Notification, sync: bool) -> None:
        with self._lock:
            targets = self._syncing if sync else self._listeners
            for listener in targets:
                listener.add(notification)

    def run(self) -> None:
        with self._lock:
            self._started = True
            for i, listener in enumerate(self._listeners):
                listener.start(f"informer-listener-{i + 1}")

    def stop(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener.stop()
        for listener in listeners:
            listener.join(5.0)

    def should_resync(self) -> bool:
        with self._lock:
            now = self._clock()
            self._syncing = []
            needed = False
            for listener in self._listeners:
                if listener.should_resync(now):
                    needed = True
                    self._syncing.append(listener)
                    listener.determine_next_resync(now)
            return needed

    def resync_check_period_changed(self, check: float) -> None:
        with self._lock:
            for listener in self._listeners:
                listener.set_resync_period(
                    _determine_resync_period(listener.requested_resync_period, check))

    def listener_count(self) -> int:
        with self._lock:
            return len(self._listeners)


class _InformerFIFO(DeltaFIFO):
    """The informer's queue: after a list is in, it checks whether the informer just synced;
    whenever it is left empty, it says the store is at a consistent version.

    An empty first list queues nothing to pop, so the sync must be noticed where
    the list arrives (the reflector's thread); a non-empty one is noticed when
    its last item has been handled (the informer's thread). Likewise a version
    reached with nothing queued (a bookmark, a list with no news) is announced
    here; one reached by handling the last queued item is told with that item's
    notification (``take_settled``).
    """

    def __init__(self, on_replaced: Callable[[], None], on_settled: Callable[[str], None],
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._on_replaced = on_replaced
        self._on_settled = on_settled
        self._announced = ""  # guarded by the queue's lock

    def replace(self, objs: Any, resource_version: str = "") -> None:
        super().replace(objs, resource_version)
        self._on_replaced()
        self._settle_if_idle()

    def _after_hand_over(self) -> None:
        self._on_replaced()  # as the informer's loop after a pop: maybe that was the sync

    def update_resource_version(self, resource_version: str) -> None:
        super().update_resource_version(resource_version)
        self._settle_if_idle()

    def take_settled(self) -> str:
        """From ``pop``'s process function: ``settled_version``, noted as announced."""
        version = self.settled_version()
        if version:
            self._announced = version
        return version

    def _settle_if_idle(self) -> None:
        with self._lock:
            version = self.settled_version()
            if version and version != self._announced:
                self._announced = version
                self._on_settled(version)  # under the queue's lock: in order with pops


# -- the informer ---------------------------------------------------------------------

class SharedIndexInformer:
    """client-go's ``SharedIndexInformer``; see the module docstring.

    Args:
        lister_watcher: where objects come from.
        resync_period: default resync period of handlers (0: none).
        indexers: extra indexes; the namespace and label indexes are built in.
        page_size: ``limit`` of each list page.
    """

    def __init__(self, lister_watcher: ListerWatcher, resync_period: float = 0.0,
                 indexers: Mapping[str, IndexFunc] | None = None, *, page_size: int = 500,
                 name: str = "", clock: Callable[[], float] = time.monotonic) -> None:
        all_indexers: dict[str, IndexFunc] = {LABEL_INDEX: label_index_func}
        all_indexers.update(indexers or {})
        self._indexer = Indexer(indexers=all_indexers)
        self._lw = lister_watcher
        self._default_resync = resync_period
        self._resync_check_period = resync_period
        self._page_size = page_size
        self.name = name or type(lister_watcher).__name__
        self._clock = clock
        self._processor = _SharedProcessor(clock)
        self._transform: Callable[[dict], dict] | None = None
        self._watch_error_handler: Callable[[BaseException], None] | None = None
        self._lock = threading.Lock()  # guards _started, _stopped, _fifo, _reflector
        self._block_deltas = threading.RLock()  # held while deltas are handled
        self._sync_announced = False  # guarded by _block_deltas
        self._settled_now = ""  # the version the store is exactly at, if it is (same guard)
        self._generation = 0  # odd while deltas are handled: readers check it (read_consistently)
        self._started = False
        self._stopped = False
        self._fifo: DeltaFIFO | None = None
        self._reflector: Reflector | None = None
        self._seed: tuple[list[Any], str, float] | None = None  # ``begin_from``

    # -- configuration (before run) ---------------------------------------------------

    def set_transform(self, fn: Callable[[dict], dict] | None) -> None:
        """Apply ``fn(obj) -> obj`` to every object before it is stored or delivered.

        Raises:
            RuntimeError: the informer has already started.
        """
        self._check_not_started("set_transform")
        self._transform = fn

    def set_watch_error_handler(self, fn: Callable[[BaseException], None] | None) -> None:
        """Call ``fn(exc)`` on each failed list and each failed or broken watch.

        Raises:
            RuntimeError: the informer has already started.
        """
        self._check_not_started("set_watch_error_handler")
        self._watch_error_handler = fn

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add indexes (allowed after start too; existing objects are indexed).

        Raises:
            ValueError: an index name is already in use.
        """
        self._indexer.add_indexers(indexers)

    def _check_not_started(self, what: str) -> None:
        with self._lock:
            if self._started:
                raise RuntimeError(f"{what}: informer {self.name!r} has already started")

    def has_started(self) -> bool:
        """Whether ``run`` has been called (what may be set before it no longer can)."""
        with self._lock:
            return self._started

    # -- handlers ------------------------------------------------------------------------

    def add_event_handler(self, handler: Any, resync_period: float | None = None) -> HandlerRegistration:
        """Register a handler; after start it first gets ``on_add`` for everything cached.

        Raises:
            RuntimeError: the informer has stopped.
        """
        with self._lock:
            if self._stopped:
                raise RuntimeError(f"informer {self.name!r} has stopped; handler not added")
            started = self._started
        if resync_period is None:
            resync_period = self._default_resync
        if resync_period > 0:
            resync_period = max(resync_period, MINIMUM_RESYNC_PERIOD)
            if resync_period < self._resync_check_period:
                if started:
                    log.warning("resync period %s is below the informer's check period %s; "
                                "using %s", resync_period, self._resync_check_period,
                                self._resync_check_period)
                    resync_period = self._resync_check_period
                else:
                    self._resync_check_period = resync_period
                    self._processor.resync_check_period_changed(resync_period)
        listener = _ProcessorListener(
            handler, resync_period,
            _determine_resync_period(resync_period, self._resync_check_period), self._clock)
        registration = HandlerRegistration(listener, self)
        with self._block_deltas:
            self._processor.add_listener(listener)
            if started:
                for obj in self._indexer.list_encoded():
                    listener.add(_Notification("add", obj, initial=True))
                if self._settled_now:
                    listener.add(_Notification("settled", self._settled_now))
            if self._sync_announced:
                listener.add(_Notification("synced", None))
        return registration

    def remove_event_handler(self, registration: HandlerRegistration) -> None:
        """Stop delivering to a handler and end its thread."""
        self._processor.remove_listener(registration._listener)

    # -- running ---------------------------------------------------------------------------

    def begin_from(self, objects: list[Any], resource_version: str, current_at: float) -> None:
        """Begin from ``objects``, the state at ``resource_version`` kept elsewhere, instead
        of listing (``Reflector.seed``): they reach the indexer and the handlers as a first
        list's would, and the watch begins at that version. Call before ``run``.

        Raises:
            RuntimeError: the informer has been started.
        """
        with self._lock:
            if self._started:
                raise RuntimeError(f"informer {self.name!r} has already been started")
            self._seed = (objects, resource_version, current_at)

    def run(self, stop: threading.Event) -> None:
        """Run until ``stop`` is set (blocking); then stop every thread it started.

        Raises:
            RuntimeError: the informer was run before.
        """
        with self._lock:
            if self._started:
                raise RuntimeError(f"informer {self.name!r} has already been started")
            if self._stopped:
                raise RuntimeError(f"informer {self.name!r} has stopped")
            self._started = True
            fifo = _InformerFIFO(self._announce_sync_once, self._announce_settled,
                                 known_objects=EncodedView(self._indexer),
                                 emit_delta_type_replaced=True, process_while_idle=True)
            reflector = Reflector(
                EncodingListerWatcher(self._lw, self._transform), fifo,
                resync_period=self._resync_check_period, page_size=self._page_size,
                name=self.name, should_resync=self._processor.should_resync,
                watch_error_handler=self._on_watch_error, clock=self._clock)
            if self._seed is not None:
                reflector.seed(*self._seed)
                self._seed = None
            self._fifo, self._reflector = fifo, reflector
        self._processor.run()
        reflector_thread = threading.Thread(target=reflector.run, args=(stop,),
                                            name=f"reflector-{self.name}", daemon=True)
        reflector_thread.start()
        # a stop that tells (informer_core.stop) closes the queue, which ends a pop waiting
        # on it; one that cannot tell is looked at between pops of at most _POP_TIMEOUT
        forget = when_set(stop, fifo.close)
        pop_timeout = _POP_TIMEOUT if forget is None else None
        try:
            while not stop.is_set():
                try:
                    fifo.pop(self.handle_deltas, timeout=pop_timeout)
                except TimeoutError:
                    continue
                except FIFOClosedError:
                    break
                except Exception:  # noqa: BLE001 - e.g. a failing custom index function
                    log.exception("%s: failed to process deltas", self.name)
                self._announce_sync_once()  # maybe the initial list's last item was just handled
        finally:
            if forget is not None:
                forget()
            fifo.close()
            reflector_thread.join()
            self._processor.stop()
            with self._lock:
                self._stopped = True

    def handle_deltas(self, deltas: list[Delta], is_in_initial_list: bool) -> None:
        """Apply one key's deltas to the indexer, then notify listeners (in order).

        When these are the last deltas queued, the last notification for every
        listener carries the version the store is then exactly at (or, if there
        is none for every listener, a ``settled`` notification follows).
        """
        fifo = self._fifo
        settled = fifo.take_settled() if isinstance(fifo, _InformerFIFO) else ""
        with self._block_deltas:
            self._generation += 1
            try:
                self._handle_locked(deltas, is_in_initial_list, settled)
            finally:
                self._generation += 1

    def _handle_locked(self, deltas: list[Delta], is_in_initial_list: bool, settled: str) -> None:
        """``handle_deltas``'s work; the caller holds ``_block_deltas``."""
        indexer = self._indexer
        processor = self._processor
        pending: _Notification | None = None  # held back: it may be the one to carry ``settled``
        for delta in deltas:
            obj = delta.object
            sync = False
            if delta.type is DeltaType.DELETED:
                indexer.delete(obj)
                notification = _Notification("delete", obj)
            else:
                if not isinstance(obj, EncodedObject):
                    obj = EncodedObject.from_dict(obj)
                old = indexer.get_encoded_by_key(obj.key)
                if old is not None:
                    indexer.update(obj)
                    sync = delta.type is DeltaType.SYNC or (
                        delta.type is DeltaType.REPLACED
                        and obj.resource_version == old.resource_version)
                    notification = _Notification("update", obj, old)
                else:
                    indexer.add(obj)
                    notification = _Notification("add", obj, initial=is_in_initial_list)
            if pending is not None:
                processor.distribute(pending, sync=False)
                pending = None
            if sync:
                processor.distribute(notification, sync=True)
            else:
                pending = notification
        if settled:
            if pending is None:
                pending = _Notification("settled", settled)
            else:
                pending.settled = settled
        self._settled_now = settled
        if pending is not None:
            processor.distribute(pending, sync=False)

    def read_consistently(self, read: Callable[[], Any]) -> tuple[Any, str]:
        """Run ``read`` (a read of the store) and return its result with the version the
        store was exactly at all along, or "" when it was not at one, or changed meanwhile.

        A lock-free check (a sequence counter ``handle_deltas`` makes odd while it
        works): the reader never waits for the informer, nor the informer for it.
        """
        generation, version = self._generation, self._settled_now
        result = read()
        if generation % 2 or self._generation != generation or self._settled_now != version:
            return result, ""
        return result, version

    def settled_version(self) -> str:
        """The version the store is exactly at now, or "" while it is not at one."""
        return self.read_consistently(_read_nothing)[1]

    def _announce_sync_once(self) -> None:
        """Tell every listener, in order with its notifications, that the initial list is in."""
        if self._sync_announced or not self.has_synced():
            return
        with self._block_deltas:
            if self._sync_announced:  # the reflector's and the informer's thread may both get here
                return
            self._sync_announced = True
            self._processor.distribute(_Notification("synced", None), sync=False)

    def _announce_settled(self, version: str) -> None:
        """Tell every listener, in order, that the store is exactly at ``version`` now."""
        with self._block_deltas:
            self._settled_now = version
            self._processor.distribute(_Notification("settled", version), sync=False)

    def _on_watch_error(self, exc: BaseException) -> None:
        handler = self._watch_error_handler
        if handler is not None:
            handler(exc)

    # -- queries -----------------------------------------------------------------------------

    def has_synced(self) -> bool:
        """Return whether the initial list has been fully processed into the indexer."""
        fifo = self._fifo
        return fifo is not None and fifo.has_synced()

    def is_started(self) -> bool:
        """Return whether ``run`` was called."""
        return self._started

    def is_stopped(self) -> bool:
        """Return whether ``run`` has returned."""
        return self._stopped

    def last_sync_resource_version(self) -> str:
        """Return the resourceVersion the cache was last brought up to ("" before the list)."""
        reflector = self._reflector
        return reflector.last_sync_resource_version() if reflector is not None else ""

    def retry_now(self, within: float = 0.0) -> None:
        """The API server answers again: a reflector backing off tries within ``within``
        seconds (see ``Reflector.retry_now``); nothing before the informer runs."""
        reflector = self._reflector
        if reflector is not None:
            reflector.retry_now(within)

    def reflector_stats(self) -> ReflectorStats | None:
        """Return the reflector's counters (``None`` before start)."""
        reflector = self._reflector
        return reflector.stats if reflector is not None else None

    def get_store(self) -> Indexer:
        """Return the indexer (read-only to callers)."""
        return self._indexer

    def get_indexer(self) -> Indexer:
        """Return the indexer (read-only to callers)."""
        return self._indexer

    def handler_count(self) -> int:
        """Return the number of registered handlers."""
        return self._processor.listener_count()


def _read_nothing() -> None:
    return None
