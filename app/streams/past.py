"""A stream resumed from further back than the ring: its first events read from the history.

A watch from ``resourceVersion=N`` or an EventSource's ``Last-Event-ID: N``, where ``N`` is
older than the hub's ring (``app.cache.hub``) but in a span of versions the history store is
exact at (``app.history``), is given the stored changes after ``N`` up to a version ``M``
the ring still has a point at, then the ring's events after ``M``, then goes live: no gap,
no duplicate, no RESET. ``M`` is a point of the hub's and a version the store is exact at
in the same span as ``N``: both are the server's state at ``M``, so the changes after it are
the same whichever told them.

The stored changes are read a page at a time as the client takes them (``Replay``, among
the stream's first chunks): a replay of any length holds one page. They become ``Event``s
as the hub's are — each with the object's previous
state, so that a selection's transitions (a label that stops matching: ``DELETED``) are
what they were live, and each standing at its own version (a point: its SSE id is its
version, resumable anywhere). A deletion a relist found (its version unknown, stored at the
relist's) goes out stamped with that version, as it went out live. A page the store cannot
give (gone away; or retention forgot the version meanwhile, which each page checks) ends the
stream with its ``ERROR`` after what was sent (``app.streams.live``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from app.cache.event import Event
from app.cache.hub import EventHub
from app.cache.resources import ResourceCache
from app.cache.subscriber import Subscriber
from app.history.recorder import resource_key
from app.history.store import TYPES, Change
from informer_core.encoded import EncodedObject

__all__ = ["Past", "Replay", "past_events"]


class Past:
    """Where a stream resumed from the store stands: the stored changes after ``version`` up
    to ``upto`` (read page by page as the client takes them: ``replay``), then the ring's."""

    def __init__(self, history: Any, resource: str, version: int, upto: int,
                 namespace: str | None, hub_id: str) -> None:
        self.history = history
        self.resource = resource
        self.version = version
        self.upto = upto
        self.namespace = namespace
        self.hub_id = hub_id

    def tail(self, hub: EventHub) -> list[Event] | None:
        """The ring's events after ``upto``; ``None`` if the ring moved past it meanwhile (the
        stream is then as old as any other the ring cannot place)."""
        return hub.events_after_rv(self.upto)

    def replay(self, subscriber: Subscriber,
               encode: Callable[[list[tuple[Event, str]]], bytes]) -> Replay:
        """The stored changes as ``subscriber`` sees them, encoded, page by page."""
        return Replay(self, subscriber, encode)

    async def pages(self) -> AsyncIterator[list[Event]]:
        """The stored changes as events, a page at a time (see the module docstring)."""
        previous: dict[tuple[str, str], EncodedObject | None] = {}
        place: tuple[int, str, str] | None = None
        while True:
            rows, before = await self.history.changes_page(
                self.resource, self.version, place, self.upto, self.namespace, set(previous))
            if not rows:
                return
            for key, raw in before.items():
                previous[key] = EncodedObject(raw)
            events = []
            for row in rows:
                key = (row.namespace, row.name)
                previous.setdefault(key, None)  # not there at the version: added since
                events.append(self._event(row, previous))
            yield events
            last = rows[-1]
            place = (last.rv, last.namespace, last.name)

    def _event(self, row: Change, previous: dict[tuple[str, str], EncodedObject | None]) -> Event:
        obj = EncodedObject(row.raw)
        key = (row.namespace, row.name)
        old = previous.get(key)
        kind = TYPES[row.kind]
        if kind == "MODIFIED" and old is None:
            kind = "ADDED"  # (its earlier state fell out of retention: new to the stream)
        event = Event(0, kind, obj, old, row.rv, self.hub_id,
                      0 if int(obj.resource_version or 0) != row.rv else None)
        event.exact = row.rv  # the store is exact at each version of the span: a point
        previous[key] = None if kind == "DELETED" else obj
        return event


class Replay:
    """The bytes of a stream's stored events, read from the store as the client takes them:
    an async iterable among a stream's first chunks (``app.streams.live``), so that a replay
    of any length holds one page in memory, and the loop waits on the store, never blocks."""

    def __init__(self, past: Past, subscriber: Subscriber,
                 encode: Callable[[list[tuple[Event, str]]], bytes]) -> None:
        self._past = past
        self._subscriber = subscriber
        self._encode = encode

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for events in self._past.pages():
            missed = self._subscriber.replay(events)
            if missed:
                yield self._encode(missed)


def _meeting(hub: EventHub, version: int, span_hi: int) -> int | None:
    """The newest version at or before ``span_hi`` (and not before ``version``) that the hub
    has a point at: where the stored events hand over to the ring's."""
    for lo, hi, _ in reversed(hub.points):
        upto = min(hi, span_hi)
        if upto >= lo and upto >= version:
            return upto
    return None


async def past_events(history: Any, entry: ResourceCache, version: int,
                      namespace: str | None) -> Past | None:
    """Where a stream the ring cannot place resumes from the store; ``None`` when the store
    cannot meet the ring (the caller then says 410, or RESET, as without history).

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
    return Past(history, key, version, upto, namespace, hub.id)
