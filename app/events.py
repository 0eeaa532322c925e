"""Change events of one resource: a consistent view, a bounded ring, and fan-out.

One ``EventHub`` per resource lives on the event loop. The informer's single
``HubHandler`` (see ``app.bridge``) feeds it; the hub keeps:

- ``view``: key -> object, exactly the state after the last event in the ring,
  so a snapshot and a ring position are always consistent (no lock: the loop
  is the only writer and reader);
- ``ring``: the last N events, each encoded once per wire format and shared by
  every subscriber, for resuming by id (SSE) or resourceVersion (watch);
- ``subscribers``: each with its selection and a bounded queue; per-subscriber
  work is the selector match only.

Resource versions. Watch events normally arrive in increasing resourceVersion
order, and an event's ``rv`` is its object's. Events found by a relist carry
old versions (a tombstone's is its last known state's); such an event gets the
hub's current ``rv`` instead, which therefore no longer names one position:
those versions are remembered as ambiguous, and a watch asking to resume from
one is told 410 (it relists) instead of being silently given a gap. SSE ids
(``<hub>.<seq>``) are exact in every case.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import deque
from collections.abc import Iterable
from typing import Any

import orjson

from app.selection import Selection
from informer_core.encoded import EncodedObject
from informer_core.tombstone import DeletedFinalStateUnknown

__all__ = ["Event", "EventHub", "Subscriber", "parse_rv"]


_NAMES = {"ADDED": b"ADDED", "MODIFIED": b"MODIFIED", "DELETED": b"DELETED",
          "DELETED_OLD": b"DELETED"}
_WATCH_PREFIX = {name: b'{"type":"' + name + b'","object":' for name in set(_NAMES.values())}


def parse_rv(text: str) -> int:
    """Return a resourceVersion as an integer (etcd's are); 0 if it is not one."""
    try:
        value = int(text)
    except (TypeError, ValueError):
        return 0
    return value if value >= 0 else 0


class Event:
    """One change, as the hub saw it; immutable once published."""

    __slots__ = ("seq", "type", "obj", "old", "rv", "hub_id", "_frames", "_decoded")

    def __init__(self, seq: int, type_: str, obj: EncodedObject, old: EncodedObject | None,
                 rv: int, hub_id: str) -> None:
        self.seq = seq
        self.type = type_  # ADDED, MODIFIED or DELETED
        self.obj = obj
        self.old = old
        self.rv = rv
        self.hub_id = hub_id
        self._frames: dict[str, bytes] = {}
        self._decoded: dict[str, dict] = {}

    @property
    def id(self) -> str:
        """The SSE id: opaque, increasing within one hub."""
        return f"{self.hub_id}.{self.seq}"

    def decoded(self, which: str = "new") -> dict[str, Any]:
        """The object (``new``) or its previous state (``old``) as a dict, decoded once."""
        found = self._decoded.get(which)
        if found is None:
            source = self.obj if which == "new" else self.old
            found = self._decoded[which] = source.to_dict() if source is not None else {}
        return found

    @property
    def restamped(self) -> bool:
        """Whether the event stands at a version other than its object's own (a relist's
        event, found behind newer ones, or a tombstone): see ``object_bytes``."""
        return self.rv != parse_rv(self.obj.resource_version)

    def object_bytes(self, kind: str, fmt: str = "sse") -> bytes:
        """The object as sent for ``kind`` in ``fmt``.

        ``DELETED_OLD`` is the old state at the new version. On the watch
        protocol an object always carries its event's version: a client resumes
        from the last object's ``metadata.resourceVersion`` (client-go does), so
        a relist's event, whose object is older than events already sent, goes
        out stamped with the event's version — versions on the wire only
        increase, and a resume from one gets exactly the rest or a 410. SSE,
        resumed by its exact ids, sends objects as they are.
        """
        stamp = fmt == "watch" and self.restamped
        if kind != "DELETED_OLD" and not stamp:
            return self.obj.raw
        key = f"{kind}|{fmt}" if stamp else kind
        cached = self._frames.get(key)
        if cached is None:
            source = dict(self.decoded("old" if kind == "DELETED_OLD" else "new"))
            meta = dict(source.get("metadata") or {})
            meta["resourceVersion"] = str(self.rv) if stamp else self.obj.resource_version
            source["metadata"] = meta
            cached = self._frames[key] = orjson.dumps(source)
        return cached

    def frame_parts(self, kind: str, fmt: str) -> tuple[bytes, bytes, bytes]:
        """Return the event in a wire format (``watch`` or ``sse``) as (prefix, object, suffix).

        The object bytes are the cached ones, shared by every subscriber; a
        writer joins the parts of a whole batch into one buffer.
        """
        name = _NAMES[kind]
        raw = self.object_bytes(kind, fmt)
        if fmt == "watch":
            return _WATCH_PREFIX[name], raw, b"}\n"
        return (b"id: " + self.id.encode() + b"\nevent: " + name + b"\ndata: ", raw, b"\n\n")

    def release(self) -> None:
        """Drop decoded copies once fan-out is done (the ring keeps only bytes)."""
        self._decoded.clear()


class Subscriber:
    """One stream's selection and bounded queue; lives on the loop."""

    def __init__(self, selection: Selection, max_queue: int, client: str = "") -> None:
        self.selection = selection
        self.client = client
        self._max = max_queue
        self._queue: deque[tuple[Event, str]] = deque()
        self._wakeup = asyncio.Event()
        self.overflowed = False
        self.fell_behind = asyncio.Event()  # set with overflowed: the stall watch starts
        self.closed = False
        self.why = ""  # why it was closed: "unloaded" or "gone"

    def transition(self, event: Event) -> str | None:
        """Return what ``event`` means to this subscriber, as the apiserver's watch cache.

        ``MODIFIED`` that makes the object stop matching is ``DELETED_OLD`` (its
        last matching state at the new version); one that makes it start
        matching is ``ADDED``; changes to objects that never matched are dropped.
        """
        sel = self.selection
        if sel.everything() and sel.namespace is None:
            return event.type
        new_match = sel.matches(event.obj, lambda: event.decoded("new"))
        if event.type != "MODIFIED":
            return event.type if new_match else None
        old_match = event.old is not None and sel.matches(event.old, lambda: event.decoded("old"))
        if new_match and old_match:
            return "MODIFIED"
        if new_match:
            return "ADDED"
        if old_match:
            return "DELETED_OLD"
        return None

    def offer(self, event: Event) -> None:
        """Queue ``event`` if it concerns this subscriber; overflow ends the stream."""
        if self.closed or self.overflowed:
            return
        kind = self.transition(event)
        if kind is None:
            return
        if len(self._queue) >= self._max:
            # Nothing queued will be sent now (the client resumes from what it got), so let
            # the events go: a reader that stopped reading holds no more than its socket's.
            self.overflowed = True
            self._queue.clear()
            self.fell_behind.set()
        else:
            self._queue.append((event, kind))
        self._wakeup.set()

    def replay(self, events: Iterable[Event]) -> list[tuple[Event, str]]:
        """Return what earlier ``events`` mean to this subscriber (a resume), as ``transition``."""
        return [(e, kind) for e in events if (kind := self.transition(e)) is not None]

    async def next_batch(self, timeout: float | None) -> list[tuple[Event, str]]:
        """Wait up to ``timeout`` for events; return what is queued (maybe nothing)."""
        if not self._queue and not self.overflowed and not self.closed:
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout)
            except asyncio.TimeoutError:
                return []
        batch = list(self._queue)
        self._queue.clear()
        return batch

    def close(self, why: str = "unloaded") -> None:
        self.closed = True
        self.why = why
        self._wakeup.set()


class EventHub:
    """The event view of one resource on the loop; see the module docstring."""

    def __init__(self, ring_size: int) -> None:
        self.id = secrets.token_hex(4)
        self._ring_size = ring_size
        self.view: dict[str, EncodedObject] = {}
        self.ring: deque[Event] = deque()
        self.seq = 0
        self.rv = 0
        self.base_rv = 0  # every event with rv > base_rv is in the ring
        self.ambiguous: set[int] = set()
        self.subscribers: set[Subscriber] = set()
        self.ready = False
        self.events_published = 0
        self._waiters: list[tuple[int, asyncio.Future]] = []  # (version, woken once reached)

    # -- feeding (from the HubHandler, on the loop) -------------------------------

    def apply(self, kind: str, obj: Any, old: Any) -> None:
        """Apply one informer notification to the view and publish its event."""
        if kind == "delete":
            if isinstance(obj, DeletedFinalStateUnknown):
                key, tombstone = obj.key, True
                last = self.view.pop(key, None) or obj.obj
            else:
                key, tombstone = obj.key, False
                self.view.pop(key, None)
                last = obj
            if self.ready and isinstance(last, EncodedObject):
                self._publish("DELETED", last, None, tombstone)
            return
        previous = self.view.get(obj.key)
        self.view[obj.key] = obj
        if not self.ready:
            return
        if previous is None:
            self._publish("ADDED", obj, None, False)
        elif previous.resource_version != obj.resource_version:
            self._publish("MODIFIED", obj, previous, False)

    def mark_ready(self) -> None:
        """The initial population is in the view: start publishing events."""
        self.rv = max((parse_rv(o.resource_version) for o in self.view.values()), default=0)
        self.base_rv = self.rv
        self.ready = True
        self._wake()

    def _publish(self, type_: str, obj: EncodedObject, old: EncodedObject | None,
                 stale: bool) -> None:
        own = 0 if stale else parse_rv(obj.resource_version)
        if own > self.rv:
            self.rv = own
            if self._waiters:
                self._wake()
        else:
            self.ambiguous.add(self.rv)  # this version now names more than one position
        self.seq += 1
        event = Event(self.seq, type_, obj, old, self.rv, self.id)
        self.ring.append(event)
        if len(self.ring) > self._ring_size:
            evicted = self.ring.popleft()
            self.base_rv = max(self.base_rv, evicted.rv)
            self.ambiguous = {v for v in self.ambiguous if v >= self.base_rv}
        self.events_published += 1
        for subscriber in self.subscribers:
            subscriber.offer(event)
        event.release()

    def _wake(self) -> None:
        waiting = []
        for version, future in self._waiters:
            if version <= self.rv and self.ready:
                if not future.done():
                    future.set_result(None)
            elif not future.done():
                waiting.append((version, future))
        self._waiters = waiting

    async def reached(self, rv: int, timeout: float) -> bool:
        """Wait until the view holds every change up to ``rv`` (at most ``timeout`` s)."""
        if self.ready and self.rv >= rv:
            return True
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((rv, future))
        try:
            await asyncio.wait_for(future, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            self._waiters = [w for w in self._waiters if w[1] is not future]

    # -- reading ------------------------------------------------------------------

    def snapshot(self, selection: Selection) -> list[EncodedObject]:
        """Return the current matching objects, in key order (consistent with ``seq``)."""
        view = self.view
        if selection.everything() and selection.namespace is None:
            objects = list(view.values())
        else:
            objects = [o for o in view.values() if selection.matches(o)]
        objects.sort(key=lambda o: o.key)
        return objects

    def events_after_rv(self, rv: int) -> list[Event] | None:
        """Return the events after resourceVersion ``rv``; ``None`` if it is too old or ambiguous."""
        if rv < self.base_rv or rv in self.ambiguous:
            return None
        found: list[Event] = []
        for event in reversed(self.ring):
            if event.rv <= rv:
                break
            found.append(event)
        found.reverse()
        return found

    def events_after_id(self, event_id: str) -> list[Event] | None:
        """Return the events after an SSE id; ``None`` if it is unknown or too old."""
        hub_id, _, seq_text = event_id.partition(".")
        if hub_id != self.id or not seq_text.isdigit():
            return None
        seq = int(seq_text)
        if seq > self.seq:
            return None
        if not self.ring:
            return [] if seq == self.seq else None
        first = self.ring[0].seq
        if seq < first - 1:
            return None
        return list(self.ring)[seq - first + 1:]

    def subscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.add(subscriber)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.discard(subscriber)

    def close_all(self, why: str = "unloaded") -> None:
        """End every subscriber's stream: ``unloaded``, or ``gone`` (the resource was deleted)."""
        for subscriber in list(self.subscribers):
            subscriber.close(why)
