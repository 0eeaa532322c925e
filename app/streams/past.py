"""A stream resumed from further back than the ring: its first events read from the history.

A watch from ``resourceVersion=N`` or an EventSource's ``Last-Event-ID: N``, where ``N`` is
older than the hub's ring (``app.cache.hub``) but in a span of versions the history store is
exact at (``app.history``), is given the stored changes after ``N`` up to a version ``M``
the ring still has a point at, then the ring's events after ``M``, then goes live: no gap,
no duplicate, no RESET. ``M`` is a point of the hub's and a version the store is exact at
in the same span as ``N``: both are the server's state at ``M``, so the changes after it are
the same whichever told them.

The stored changes become ``Event``s as the hub's are — each with the object's previous
state, so that a selection's transitions (a label that stops matching: ``DELETED``) are
what they were live, and each standing at its own version (a point: its SSE id is its
version, resumable anywhere). A deletion a relist found (its version unknown, stored at the
relist's) goes out stamped with that version, as it went out live.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.cache.event import Event
from app.cache.hub import EventHub
from app.cache.resources import ResourceCache
from app.history.recorder import resource_key
from app.history.store import TYPES
from informer_core.encoded import EncodedObject

__all__ = ["Past", "past_events"]


@dataclass
class Past:
    """Stored events after a version, up to ``upto``, where the ring takes over."""

    events: list[Event]
    upto: int

    def joined(self, hub: EventHub) -> list[Event] | None:
        """The stored events then the ring's after ``upto``; ``None`` if the ring moved past
        it meanwhile (the stream is then as old as any other the ring cannot place)."""
        tail = hub.events_after_rv(self.upto)
        return None if tail is None else self.events + tail


def _meeting(hub: EventHub, version: int, span_hi: int) -> int | None:
    """The newest version at or before ``span_hi`` (and not before ``version``) that the hub
    has a point at: where the stored events hand over to the ring's."""
    for lo, hi, _ in reversed(hub.points):
        upto = min(hi, span_hi)
        if upto >= lo and upto >= version:
            return upto
    return None


async def past_events(history: object, entry: ResourceCache, version: int,
                      namespace: str | None) -> Past | None:
    """The stored events after ``version`` for a stream the ring cannot place; ``None`` when
    the store cannot meet the ring (the caller then says 410, or RESET, as without history).

    Raises:
        StatusError: 410 for a version the store does not hold either, 503 when it cannot
            be read.
    """
    hub = entry.hub
    resource = entry.resource
    key = resource_key(resource.group, resource.version, resource.resource)
    _, span_hi = await history.span_of(key, version, hub.rv)
    upto = _meeting(hub, version, span_hi)
    if upto is None:  # the writer behind the ring's oldest point: it catches up in a moment
        await history.flushed()
        _, span_hi = await history.span_of(key, version, hub.rv)
        upto = _meeting(hub, version, span_hi)
        if upto is None:
            return None
    before, rows = await history.changes(key, version, upto, namespace)
    events = []
    previous = {k: EncodedObject(raw) for k, raw in before.items()}
    for row in rows:
        obj = EncodedObject(row.raw)
        place = (row.namespace, row.name)
        old = previous.get(place)
        kind = TYPES[row.kind]
        if kind == "MODIFIED" and old is None:
            kind = "ADDED"  # (its earlier state fell out of retention: new to the stream)
        event = Event(0, kind, obj, old, row.rv, hub.id,
                      0 if int(obj.resource_version or 0) != row.rv else None)
        event.exact = row.rv
        events.append(event)
        if kind == "DELETED":
            previous.pop(place, None)
        else:
            previous[place] = obj
    return Past(events, upto)
