"""DeltaFIFO: client-go's queue of per-object change lists.

A producer (the reflector) calls ``add``/``update``/``delete``/``replace``/
``resync``; a consumer (the informer) calls ``pop``. For each object key the
queue keeps every delta that happened since the key was last popped, so a
consumer sees all of them at once and in order, and each key is queued once.

Invariants, held whenever the lock is free:

- a key is in ``_queue`` if and only if it is in ``_items``; no duplicates;
- every delta list in ``_items`` is non-empty and never ends in two deletions
  (the less informative of the two is dropped).

``replace`` turns every previously known key missing from the new list into a
``Deleted`` delta carrying a ``DeletedFinalStateUnknown`` tombstone: that is how
a deletion missed while the watch was down still reaches the handlers.

Versions. The queue knows the resourceVersion of each change it is given (a
watch event's object's; every item of a ``replace`` counts at the list's
version) and of the newest thing it heard of (a bookmark's, through
``update_resource_version``). The consumer's store holds exactly the server's
state at a version ``V`` when every change up to ``V`` has been popped and none
after it: deltas are queued by key, so a key popped for an old change may bring
newer ones along while an older change to another object still waits.
``settled_version`` tells a consumer, from within ``pop``'s process function,
the version its store is exactly at once the item being processed is handled
(or "" if it will not be at one).
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, Protocol

from informer_core.encoded import resource_version_of
from informer_core.errors import FIFOClosedError
from informer_core.store import KeyFunc, meta_namespace_key
from informer_core.tombstone import DeletedFinalStateUnknown

log = logging.getLogger(__name__)

__all__ = [
    "Delta",
    "DeltaFIFO",
    "DeltaType",
    "DeletedFinalStateUnknown",
    "FIFOClosedError",
    "KeyListerGetter",
]


class DeltaType(str, enum.Enum):
    """What happened to an object (client-go's ``DeltaType`` values)."""

    ADDED = "Added"
    UPDATED = "Updated"
    DELETED = "Deleted"
    REPLACED = "Replaced"  # the object came from a relist
    SYNC = "Sync"  # a periodic resync, or a relist with emit_delta_type_replaced=False


class Delta(NamedTuple):
    """One change: its type and the object after it (before it, for a deletion)."""

    type: DeltaType
    object: Any


class KeyListerGetter(Protocol):
    """What ``DeltaFIFO`` needs of the store holding already-processed objects."""

    def list_keys(self) -> list[str]: ...

    def get_by_key(self, key: str) -> Any | None: ...


PopProcessFunc = Callable[[list[Delta], bool], None]


class DeltaFIFO:
    """A producer/consumer queue of per-key delta lists; thread-safe.

    Args:
        key_func: computes an object's key.
        known_objects: the consumer's store (``list_keys``/``get_by_key``); it
            decides which deletions are news and which keys ``replace`` and
            ``resync`` consider known.
        emit_delta_type_replaced: ``replace`` emits ``Replaced`` (else ``Sync``).
        process_while_idle: an ``add``, ``update`` or ``delete`` that finds the consumer
            waiting in ``pop`` with nothing queued runs the consumer's ``process`` itself,
            on the producer's thread, under the lock, as ``pop`` would have (what it
            raises is logged, as the informer's loop logs it); the consumer is not woken.
            Why: one change then wakes one thread (the producer's, for its read) instead
            of two, and on a virtual machine a wake-up costs tens of microseconds of CPU
            (about 40 for the woken thread and 80 for the one waking it, measured here),
            more than processing a change. A burst, a ``replace`` or a busy consumer is
            handed over as before.
    """

    def __init__(self, key_func: KeyFunc = meta_namespace_key,
                 known_objects: KeyListerGetter | None = None,
                 emit_delta_type_replaced: bool = True,
                 clock: Callable[[], float] = time.monotonic,
                 process_while_idle: bool = False) -> None:
        # guards everything below; held as ``with self._lock`` (a C call), not through the
        # condition's ``__enter__``/``__exit__`` (two Python calls, several times a change)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._process_while_idle = process_while_idle
        self._idle_consumer: PopProcessFunc | None = None  # ``pop``'s process while it waits
        self._handing_over = False
        self._items: dict[str, list[Delta]] = {}
        self._queue: deque[str] = deque()
        self._populated = False
        self._initial_population_count = 0
        self._closed = False
        self._key_func = key_func
        self._known_objects = known_objects
        self._emit_replaced = emit_delta_type_replaced
        self._clock = clock
        self._resource_version = ""  # of the newest thing given to the queue (bookmarks too)
        self._versions: dict[str, tuple[int, int]] = {}  # key -> its queued deltas' first, last
        self._popped = 0  # the newest version popped so far

    # -- keys -----------------------------------------------------------------

    def key_of(self, obj: Any) -> str:
        """Return the key of an object, a tombstone, or a delta list (its newest object)."""
        if isinstance(obj, list):
            if not obj:
                raise ValueError("0 length Deltas object; can't get key")
            obj = obj[-1].object
        if isinstance(obj, DeletedFinalStateUnknown):
            return obj.key
        return self._key_func(obj)

    # -- producer side --------------------------------------------------------

    def add(self, obj: Any) -> None:
        """Queue an ``Added`` delta."""
        with self._lock:
            self._populated = True
            self._queue_action_locked(DeltaType.ADDED, obj, version=self._note_version_locked(obj),
                                      notify=False)
            handed = self._hand_over_locked()
        if handed:
            self._after_hand_over()

    def update(self, obj: Any) -> None:
        """Queue an ``Updated`` delta."""
        with self._lock:
            self._populated = True
            self._queue_action_locked(DeltaType.UPDATED, obj,
                                      version=self._note_version_locked(obj), notify=False)
            handed = self._hand_over_locked()
        if handed:
            self._after_hand_over()

    def delete(self, obj: Any) -> None:
        """Queue a ``Deleted`` delta, unless the object is unknown to queue and store.

        An object neither queued nor known was presumably deleted by a relist
        already; reporting it twice would be wrong.
        """
        key = self.key_of(obj)
        with self._lock:
            self._populated = True
            version = self._note_version_locked(obj)
            if self._known_objects is None:
                if key not in self._items:
                    return
            elif key not in self._items and self._known_objects.get_by_key(key) is None:
                return
            self._queue_action_locked(DeltaType.DELETED, obj, version=version, notify=False)
            handed = self._hand_over_locked()
        if handed:
            self._after_hand_over()

    def replace(self, objs: Iterable[Any], resource_version: str = "") -> None:
        """Queue the new full list, and a tombstone for every known key missing from it."""
        action = DeltaType.REPLACED if self._emit_replaced else DeltaType.SYNC
        with self._lock:
            self._resource_version = resource_version or self._resource_version
            version = _version_number(resource_version)
            keys: set[str] = set()
            for obj in objs:
                key = self.key_of(obj)
                keys.add(key)
                self._queue_action_locked(action, obj, key, version)

            queued_deletions = 0
            # Deletions of keys still queued (possibly never seen by the store).
            for key in [k for k in self._items if k not in keys]:
                newest = self._items[key][-1].object
                if isinstance(newest, DeletedFinalStateUnknown):
                    newest = newest.obj
                queued_deletions += 1
                self._queue_action_locked(
                    DeltaType.DELETED, DeletedFinalStateUnknown(key, newest), key, version)

            # Deletions of keys the store knows and nothing is queued for.
            if self._known_objects is not None:
                for key in self._known_objects.list_keys():
                    if key in keys or self._items.get(key):
                        continue
                    last = self._known_objects.get_by_key(key)
                    queued_deletions += 1
                    self._queue_action_locked(
                        DeltaType.DELETED, DeletedFinalStateUnknown(key, last), key, version)

            if not self._populated:
                self._populated = True
                self._initial_population_count = len(keys) + queued_deletions

    def update_resource_version(self, resource_version: str) -> None:
        """Note the version the producer has reached (a bookmark: no change up to it)."""
        with self._lock:
            self._resource_version = resource_version or self._resource_version

    def settled_version(self) -> str:
        """From ``pop``'s process function: the version the consumer's store is exactly at
        once the item being processed is handled ("" if it will not be at one).

        With nothing left queued, that is the newest version heard of; else the newest
        popped, provided every change still queued is newer (the head of the queue
        holds the oldest). Call it only there (the queue's lock is held, and this
        does not take it again).
        """
        if not self._queue:
            return self._resource_version
        popped = self._popped
        if popped and self._versions[self._queue[0]][0] > popped:
            return str(popped)
        return ""

    def _note_version_locked(self, obj: Any) -> int:
        """Record ``obj``'s version as the newest heard of; return it as a number (0: none)."""
        if isinstance(obj, DeletedFinalStateUnknown):
            return 0
        text = resource_version_of(obj)
        if text:
            self._resource_version = text
        return _version_number(text)

    def resync(self) -> None:
        """Queue a ``Sync`` delta for every known object that has nothing queued.

        An object with queued deltas is skipped: the store still holds its
        previous state, and a sync carrying that would undo the queued change.
        """
        with self._lock:
            if self._known_objects is None:
                return
            for key in self._known_objects.list_keys():
                obj = self._known_objects.get_by_key(key)
                if obj is None:
                    continue
                key = self.key_of(obj)
                if self._items.get(key):
                    continue
                self._queue_action_locked(DeltaType.SYNC, obj, key)

    def add_if_not_present(self, deltas: list[Delta]) -> None:
        """Queue a popped delta list again, unless its key was queued meanwhile.

        For a consumer that failed to process what ``pop`` gave it: newer deltas
        from the producer win over the stale retry.
        """
        key = self.key_of(deltas)
        with self._lock:
            self._populated = True
            if key in self._items:
                return
            self._items[key] = list(deltas)
            self._queue.append(key)
            self._versions[key] = (0, 0)  # its versions are no longer known: never "settled"
            self._cond.notify_all()

    def close(self) -> None:
        """Close the queue: ``pop`` drains what is left, then raises ``FIFOClosedError``."""
        with self._lock:
            self._closed = True
            self._cond.notify_all()

    # -- consumer side --------------------------------------------------------

    def pop(self, process: PopProcessFunc, timeout: float | None = None) -> list[Delta]:
        """Wait for a key, remove it, run ``process(deltas, is_in_initial_list)``, return deltas.

        ``process`` runs under the queue's lock, as in client-go: the consumer's
        store changes atomically with the queue, so ``replace`` and ``delete``
        never decide against a half-applied state. Keep ``process`` short;
        hand slow work (user handlers) to other threads.

        Raises:
            FIFOClosedError: the queue is closed and empty.
            TimeoutError: ``timeout`` seconds passed with nothing to pop.
        """
        deadline = None if timeout is None else self._clock() + timeout
        with self._lock:
            while not self._queue:
                if self._closed:
                    raise FIFOClosedError("DeltaFIFO: manipulating with closed queue")
                self._idle_consumer = process
                try:
                    if deadline is None:
                        self._cond.wait()
                    else:
                        remaining = deadline - self._clock()
                        if remaining <= 0:
                            raise TimeoutError(f"DeltaFIFO: nothing to pop within {timeout} s")
                        self._cond.wait(remaining)
                finally:
                    self._idle_consumer = None
            return self._pop_locked(process)

    def _pop_locked(self, process: PopProcessFunc) -> list[Delta]:
        """Remove the head key and run ``process`` on its deltas. Caller holds the lock."""
        is_in_initial_list = not self._has_synced_locked()
        key = self._queue.popleft()
        if self._initial_population_count > 0:
            self._initial_population_count -= 1
        deltas = self._items.pop(key)
        self._popped = max(self._popped, self._versions.pop(key, (0, 0))[1])
        process(deltas, is_in_initial_list)
        return deltas

    def _hand_over_locked(self) -> bool:
        """After a change was queued: process it here if the consumer waits idle and the
        queue allows it (``process_while_idle``), else wake the consumer; whether it was
        processed here. Caller holds the lock."""
        process = self._idle_consumer
        if (process is None or not self._process_while_idle or self._handing_over
                or self._closed or len(self._queue) != 1):
            self._cond.notify_all()
            return False
        self._handing_over = True  # (a process that queues again is handed to the consumer)
        try:
            self._pop_locked(process)
        except Exception:  # noqa: BLE001 - as the consumer's loop: logged, the queue goes on
            log.exception("failed to process deltas")
        finally:
            self._handing_over = False
        return True

    def _after_hand_over(self) -> None:
        """What the consumer does after each pop, done by a producer that did the
        processing, once the lock is free (a subclass's hook)."""

    # -- queries --------------------------------------------------------------

    def has_synced(self) -> bool:
        """Return whether the first ``replace``'s items (or any first change) were all popped."""
        with self._lock:
            return self._has_synced_locked()

    def list_keys(self) -> list[str]:
        """Return the queued keys, in queue order."""
        with self._lock:
            return list(self._queue)

    def list(self) -> list[Any]:
        """Return the newest object of every queued key."""
        with self._lock:
            return [self._items[k][-1].object for k in self._queue]

    def get(self, obj: Any) -> list[Delta] | None:
        """Return a copy of the deltas queued for ``obj``'s key, or ``None``."""
        return self.get_by_key(self.key_of(obj))

    def get_by_key(self, key: str) -> list[Delta] | None:
        """Return a copy of the deltas queued for ``key``, or ``None``."""
        with self._lock:
            deltas = self._items.get(key)
            return list(deltas) if deltas is not None else None

    def is_closed(self) -> bool:
        """Return whether ``close`` was called."""
        with self._lock:
            return self._closed

    def __len__(self) -> int:
        with self._lock:
            return len(self._queue)

    # -- internals ------------------------------------------------------------

    def _has_synced_locked(self) -> bool:
        """Caller holds the lock."""
        return self._populated and self._initial_population_count == 0

    def _queue_action_locked(self, action: DeltaType, obj: Any, key: str | None = None,
                             version: int = 0, notify: bool = True) -> None:
        """Append a delta for ``obj`` (at ``version``; 0: unknown), dropping a duplicate
        trailing deletion; wake the consumer unless not to ``notify`` (the caller hands over).

        Caller holds the lock.
        """
        if key is None:
            key = self.key_of(obj)
        old = self._items.get(key)
        new = Delta(action, obj)
        if old is None:
            self._items[key] = [new]
            self._queue.append(key)
            self._versions[key] = (version, version)
        else:
            first, last = self._versions.get(key, (0, 0))
            self._versions[key] = (first, max(last, version))
            last = old[-1]
            if action is DeltaType.DELETED and last.type is DeltaType.DELETED:
                # Two deletions in a row: keep the one that knows more (not a tombstone).
                if isinstance(last.object, DeletedFinalStateUnknown):
                    old[-1] = new
            else:
                old.append(new)
        if notify:
            self._cond.notify_all()


def _version_number(text: str) -> int:
    """A resourceVersion as a number (etcd's are); 0 when it is not one."""
    try:
        return int(text)
    except (TypeError, ValueError):
        return 0
