"""Change events of one resource: a consistent view, a bounded ring, and fan-out.

One ``EventHub`` per resource lives on the event loop. The informer's single
``HubHandler`` (see ``app.bridge``) feeds it; the hub keeps:

- ``view``: key -> object, exactly the state after the last event in the ring,
  so a snapshot and a ring position are always consistent (no lock: the loop
  is the only writer and reader);
- ``ring``: the last N events (``app.cache.event``), each encoded once per wire format
  and shared by every subscriber, for resuming by id (SSE) or resourceVersion (watch);
- ``subscribers``: each with its selection, and a cursor into the ring while it
  cannot take events (``app.cache.subscriber``); per-subscriber work is the selector
  match only, once per group of equal selections; a parked stream's subscriber is
  written to in a group of those that send the same bytes, one write each (``direct``).

Why a view beside the indexer. The indexer is the informer's, written on its
thread, a moment ahead of the loop; a stream's first state must be taken at the
same point of the event sequence as its subscription, on the loop, with no lock
and no wait: the view is that state. It is not a second copy of the objects: it
maps keys to the very ``EncodedObject``s the indexer holds (the handler takes
them encoded). Measured on 10,000 Pods of the benchmark's shape: objects and
indexer 14.7 MiB, the view 0.20 MiB more (1.4 %; ``tracemalloc``, both filled
from the same encoded objects). Making the indexer the only copy would put a
lock and a version check on every stream's first state, for 1.4 %.

Resource versions. Watch events normally arrive in increasing resourceVersion
order, and an event's ``rv`` is its object's. Events found by a relist carry
old versions (a tombstone's is its last known state's), and a burst may come
grouped by object: such an event goes out on the watch stamped with the hub's
current ``rv``, so versions on the wire only increase.

Consistent points. The view is exactly the server's state at some version only
at moments the informer says so (``settled``: its queue was empty; see
``informer_core.informer``). The hub keeps those points — ``(lo, hi, seq)``:
after event ``seq`` the view was the server's state at every version from
``lo`` to ``hi`` — for as far back as the ring reaches. A stream resumes from a
version exactly where such a point covers it, and nowhere else (a watch gets
410, an event stream ``RESET``): whatever process or replica gave the client
that version, resourceVersions are etcd's, so the events after it are the same
changes. An event that left the view at a point carries the point's version as
its SSE id (portable); any other event an id of this hub's own (``<hub>.<seq>``,
exact here only).
"""


from __future__ import annotations

import asyncio
import secrets
import time
from collections import deque
from collections.abc import Callable
from itertools import islice
from typing import Any

from app.cache.event import Event, RecentCopies, frames, parse_rv
from app.cache.subscriber import Subscriber
from app.kube.status import StatusError
from app.query.selection import Selection
from informer_core.encoded import EncodedObject
from informer_core.tombstone import DeletedFinalStateUnknown

# The event and the subscriber have rooms of their own (``app.cache.event``,
# ``app.cache.subscriber``); their names stay importable from here.
__all__ = ["Event", "EventHub", "RecentCopies", "Subscriber", "frames", "parse_rv"]


HOLD_INEXACT = 0.05  # seconds an event not at a point waits for the rest of its burst


class EventHub:
    """The event view of one resource on the loop; see the module docstring."""

    def __init__(self, ring_size: int) -> None:
        self.id = secrets.token_hex(4)
        self._ring_size = ring_size
        self.view: dict[str, EncodedObject] = {}
        self.ring: deque[Event] = deque()
        self.copies = RecentCopies()  # merged streams' tagged objects, made once for all
        self.seq = 0
        self.offered = 0  # the last event offered to the subscribers (later ones are held)
        self.rv = 0  # the newest version the view has applied (or is exactly at)
        self.exact: int | None = None  # the version the view is exactly at now, if it is
        self.points: deque[tuple[int, int, int]] = deque()  # (lo, hi, seq); see the docstring
        self._changed = False  # the view changed since the last point
        self._held: list[Event] = []  # published, not yet offered: see _publish
        self._flush: asyncio.TimerHandle | None = None
        self._inexact: set[int] = set()  # watch versions that went out on events not at a point
        self._wire = 0  # the version the last event offered stood at on the watch
        self.subscribers: set[Subscriber] = set()
        self._catching_up: set[Subscriber] = set()  # subscribers with a ``since``
        # Subscribers offered each dispatch one by one (``Subscriber.offer``), and those
        # written to in groups (``direct``): together, ``subscribers``.
        self._one_by_one: set[Subscriber] = set()
        self._direct: dict[tuple, tuple[Callable, dict[Any, Subscriber]]] = {}
        self.ready = False
        # told of each delivered burst, each point, and the ready view (``app.history.recorder``)
        self.recorder: Any = None
        self.events_published = 0
        self._waiters: list[tuple[int, asyncio.Future]] = []  # (version, woken once reached)

    # -- feeding (from the HubHandler, on the loop) -------------------------------

    def apply(self, kind: str, obj: Any, old: Any, settled: str = "") -> None:
        """Apply one informer notification to the view and publish its event; ``settled``:
        the version the view is exactly at after it, if it is (informer's word)."""
        if kind == "delete":
            if isinstance(obj, DeletedFinalStateUnknown):
                key, tombstone = obj.key, True
                last = self.view.pop(key, None) or obj.obj
            else:
                key, tombstone = obj.key, False
                before = self.view.pop(key, None)
                last = obj
            self._changed = True
            if self.ready and isinstance(last, EncodedObject):
                # (a watch's deletion carries its state before: the history's previous change)
                self._publish("DELETED", last, None if tombstone else before, tombstone, settled)
                return
        else:
            previous = self.view.get(obj.key)
            self.view[obj.key] = obj
            if previous is None or previous.resource_version != obj.resource_version:
                self._changed = True
                if self.ready:
                    self._publish("ADDED" if previous is None else "MODIFIED", obj, previous,
                                  False, settled)
                    return
        if settled:
            self.settle(settled)

    def settle(self, version: str) -> None:
        """The view is exactly the server's state at ``version`` now (informer's word)."""
        value = parse_rv(version)
        if value < self.rv or (value == self.rv and self._changed and self.exact == value):
            return  # never behind what was applied; a change needs a new version
        if self._held:
            self._deliver(value)  # the burst is whole: in order, each where it stands
        else:
            last = self.points[-1] if self.points else None
            if last is not None and not self._changed:
                self.points[-1] = (last[0], value, last[2])  # nothing changed: the point widens
            else:
                if last is not None and last[2] == self.seq:
                    self.points.pop()  # changes before ready: only the newest state is a point
                self.points.append((value, value, self.seq))
            if self.recorder is not None and self.ready:
                self.recorder.settled(value)
        self._changed = False
        self.exact = value
        if value > self.rv:
            self.rv = value
            if self._waiters:
                self._wake()
        if self._catching_up:
            for subscriber in [s for s in self._catching_up if s.since <= value]:
                # every change up to it has been offered: none after this one is skipped
                subscriber.since_until = self.offered
                self._catching_up.discard(subscriber)

    def mark_ready(self) -> None:
        """The initial population is in the view: start publishing events."""
        newest = max((parse_rv(o.resource_version) for o in self.view.values()), default=0)
        self.rv = self._wire = max(self.rv, newest)
        self.ready = True
        if self.recorder is not None:
            self.recorder.ready(self.view, self.exact)
        self._wake()

    def _publish(self, type_: str, obj: EncodedObject, old: EncodedObject | None,
                 stale: bool, settled: str) -> None:
        own = 0 if stale else parse_rv(obj.resource_version)
        if own > self.rv:
            self.rv = own
            if self._waiters:
                self._wake()
        self.exact = None
        self.seq += 1
        event = Event(self.seq, type_, obj, old, self.rv, self.id, own)
        self.ring.append(event)
        if len(self.ring) > self._ring_size:
            evicted = self.ring.popleft()
            self._inexact.discard(evicted.rv)
            oldest = self.ring[0].seq - 1  # a point after this event still has every event after it
            while self.points and self.points[0][2] < oldest:
                self.points.popleft()
        self.events_published += 1
        self._held.append(event)
        if settled:
            self.settle(settled)  # at a point: delivers the burst, this event included
        elif self._flush is None:
            # Not at a point: the rest of its burst is on its way. Held (a moment at most)
            # until it is whole, so that it goes out in order and a stream's last event is
            # one it can resume from.
            self._flush = asyncio.get_running_loop().call_later(HOLD_INEXACT, self._deliver)

    def _deliver(self, point: int = 0) -> None:
        """Offer the held events (a burst) to every subscriber.

        At a ``point``, the burst holds every change since the last point: put in the
        order of their versions (the informer hands them grouped by object), each is the
        server's state at its own version — a point of its own, its object's version on
        the wire. A relist's deletions (their versions unknown) come last, stamped with
        the last version sent, the final one with the point's: then only the point is
        one. Without a point (the burst outlasted the hold, or a straggler), events go out
        as they came, one out of order stamped with the last version sent. Versions on the
        wire never go back, and a version that went out on an event not at a point is
        never resumed from.
        """
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        held, self._held = self._held, []
        if point and len(held) > 1:
            held = self._in_version_order(held)
        wire = self._wire
        placed = bool(point)  # every event at its own version: each one a point
        for event in held:
            if event.own > wire:
                event.rv = wire = event.own
            else:
                event.rv = wire  # stamped with the last version sent: a deletion's, or late
                placed = False
        if placed:
            for event in held:
                event.exact = event.rv
                self.points.append((event.rv, event.rv, event.seq))
        if point:
            last = held[-1]
            if placed:
                self.points[-1] = (last.rv, point, last.seq)
            else:
                if last.restamped and point > wire:
                    last.rv = wire = point  # the burst ends at the point, and says so
                self.points.append((point, point, last.seq))
            last.exact = point
        for event in held:
            if not event.exact:
                self._inexact.add(event.rv)
        self._wire = wire
        if self.recorder is not None:
            self.recorder.delivered(held, point, placed)
        # One pass: each subscriber gets the whole burst at once (one write, for a stream
        # whose events go straight to its connection); equal selections filter it once.
        shared: dict[int, tuple[list, list]] = {}
        self.offered = held[-1].seq
        if self._direct:
            for key, (encode, group) in list(self._direct.items()):
                self._write_direct(held, shared, key[0], encode, group)
        for subscriber in list(self._one_by_one):
            subscriber.offer(held, shared)
        for event in held:
            event.release()

    def _write_direct(self, held: list[Event], shared: dict[int, tuple[list, list]],
                      selection_group: int, encode: Callable, group: dict[Any, Subscriber]) -> None:
        """Write one dispatch to a group of direct subscribers (see ``direct``): its batch
        and bytes made once, then one write per connection, as the least a server can do.
        A connection that cannot take it now (its socket full, or gone) is offered the
        dispatch as any other subscriber, and leaves the group."""
        found = shared.get(selection_group)
        if found is None:
            some = next(iter(group.values()))
            kinds = [some.transition(event) for event in held]
            found = shared[selection_group] = (
                kinds, [(e, k) for e, k in zip(held, kinds) if k is not None])
        batch = found[1]
        if not batch:
            return
        chunk = encode(batch)
        if chunk is None:
            late = list(group)  # a burst: each stream's task sends it, piece by piece
        else:
            late = []
            for connection in group:
                if connection.clear:
                    connection.transport.write(chunk)
                    connection.wrote = True
                else:
                    late.append(connection)
        for connection in late:
            subscriber = group.get(connection)
            if subscriber is not None:
                self.indirect(subscriber)
                subscriber.offer(held, shared)

    def direct(self, subscriber: Subscriber, connection: Any, key: tuple,
               encode: Callable[[list[tuple[Event, str]]], bytes]) -> bool:
        """Write ``subscriber``'s events to ``connection`` with every other subscriber of
        ``key`` (its first item the selection's ``group``), a group whose members send the
        same bytes for the same events (equal selections, one wire format): ``encode`` makes
        them once per dispatch, ready to write, or says ``None`` (a burst, sent otherwise).
        ``connection`` has ``clear`` (a write goes out now), ``transport`` and
        ``wrote`` (set on each write). Whether it joined: a subscriber with events waiting,
        ended, skipping what its client has, or still owed events held before its start is
        offered them one by one.

        Why. A parked stream's events go out from the dispatch (``app.streams.live``);
        offered one by one, each delivery ran the subscriber's checks, its sink, its
        encoder and its wire — objects spread over the heap, read between the kernel's
        sends (which evict them from the caches) — where the fan-out floor
        (``bench.fanout_floor``) writes the same frame to each transport.
        """
        if subscriber.hub is not self or subscriber not in self.subscribers or \
                subscriber.since or subscriber.waiting or subscriber.closed or \
                subscriber.overflowed or subscriber.hung_up or subscriber.after_seq > self.offered:
            return False
        self.indirect(subscriber)
        self._one_by_one.discard(subscriber)
        found = self._direct.get(key)
        if found is None:
            found = self._direct[key] = (encode, {})
        found[1][connection] = subscriber
        subscriber.direct = (key, connection)
        return True

    def indirect(self, subscriber: Subscriber) -> None:
        """Offer ``subscriber`` each dispatch one by one again (it left its group)."""
        joined = subscriber.direct
        if joined is None:
            return
        subscriber.direct = None
        key, connection = joined
        found = self._direct.get(key)
        if found is not None:
            found[1].pop(connection, None)
            if not found[1]:
                del self._direct[key]
        if subscriber in self.subscribers:
            self._one_by_one.add(subscriber)

    def _in_version_order(self, held: list[Event]) -> list[Event]:
        """``held`` (the ring's last events) sorted by their own versions, deletions of unknown
        version last; the ring's order and the events' ``seq`` follow."""
        order = sorted(held, key=lambda e: (e.own == 0, e.own, e.seq))
        if order == held:
            return held
        seqs = sorted(e.seq for e in held)
        for event, seq in zip(order, seqs):
            event.seq = seq
        if len(self.ring) >= len(held):
            for _ in held:
                self.ring.pop()
            self.ring.extend(order)
        return order

    def _wake(self) -> None:
        waiting = []
        for version, future in self._waiters:
            if version <= self.rv and self.ready:
                if not future.done():
                    future.set_result(None)
            elif not future.done():
                waiting.append((version, future))
        self._waiters = waiting

    async def between_bursts(self) -> None:
        """Wait until no burst is held (a moment at most): a stream begins from whole bursts."""
        deadline = time.monotonic() + 2 * HOLD_INEXACT
        while self._held and time.monotonic() < deadline:
            await asyncio.sleep(HOLD_INEXACT / 5)

    async def placed(self, version: int, timeout: float) -> None:
        """Wait (at most ``timeout``) until the view has reached ``version`` or is at a point:
        either way a client resuming from ``version`` can be placed (``ahead_of``)."""
        deadline = time.monotonic() + timeout
        while version > self.rv and self.exact is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await self.reached(version, min(left, HOLD_INEXACT))

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

    def snapshot(self, selection: Selection, ordered: bool = True) -> list[EncodedObject]:
        """Return the current matching objects, in key order unless not ``ordered``
        (consistent with ``seq``)."""
        view = self.view
        if selection.namespace_only and selection.namespace is None:
            objects = list(view.values())
        else:
            objects = [o for o in view.values() if selection.matches(o)]
        if ordered:
            objects.sort(key=lambda o: o.key)
        return objects

    @property
    def oldest(self) -> int:
        """The oldest version a stream may resume from (0: none yet)."""
        return self.points[0][0] if self.points else 0

    def point_of(self, version: int) -> int | None:
        """The ``seq`` after which the view was exactly at ``version``; ``None`` if no point
        covers it (too old, between points, or not reached yet: see ``reached``)."""
        for lo, hi, seq in reversed(self.points):
            if version < lo:
                continue
            if version <= hi:
                return seq
            # Past the point: the view stayed the server's state until the next change,
            # the first event after the point (the informer hands the oldest change first).
            after = self._event(seq + 1)
            if after is not None and not after.restamped and after.rv > version:
                return seq
            return None
        return None

    def _event(self, seq: int) -> Event | None:
        if not self.ring or not self.ring[0].seq <= seq <= self.seq:
            return None
        return self.ring[seq - self.ring[0].seq]

    def events_after_seq(self, seq: int, upto: int | None = None) -> list[Event] | None:
        """The events after ``seq`` (up to ``upto``, else the newest); ``None`` if the ring
        no longer holds them all. Read from the newest end: a stream catching up asks for
        the last few of thousands."""
        last = self.seq if upto is None else upto
        if seq > last:
            return None
        if not self.ring:
            return [] if seq == self.seq else None
        if seq < self.ring[0].seq - 1:
            return None
        skip, count = self.seq - last, last - seq
        newest = islice(reversed(self.ring), skip, skip + count)
        return list(newest)[::-1]

    def offered_after(self, seq: int) -> list[Event] | None:
        """The events offered to the subscribers after ``seq`` (what a stream that stood
        there has not had); ``None`` if the ring moved a lap past it."""
        return self.events_after_seq(seq, self.offered)

    def events_after_rv(self, rv: int, watch: bool = False) -> list[Event] | None:
        """Return the events after resourceVersion ``rv``; ``None`` if no point covers it.

        ``watch``: ``rv`` is a version a watch sent; one that went out on an event not
        at a point (the state after it was no version's) is not resumed from.
        """
        if watch and rv in self._inexact:
            return None
        seq = self.point_of(rv)
        return None if seq is None else self.events_after_seq(seq)

    def events_after_id(self, event_id: str) -> list[Event] | None:
        """Return the events after an SSE id; ``None`` if it is unknown or too old.

        A version (portable) is resumed wherever a point covers it; ``<hub>.<seq>``
        only on this hub.
        """
        if event_id.isdigit():
            return self.events_after_rv(parse_rv(event_id))
        hub_id, _, seq_text = event_id.partition(".")
        if hub_id != self.id or not seq_text.isdigit():
            return None
        return self.events_after_seq(int(seq_text))

    def ahead_of(self, version: int) -> bool:
        """Whether a client at ``version`` (from another process) is ahead of this view while
        the view is at a point: then it is followed from here on, each change up to
        ``version`` skipped as the client's already (``Subscriber.since``) — exact, since
        the changes still to come are told apart by their own versions."""
        return self.exact is not None and version > self.exact

    def position_id(self) -> str:
        """The SSE id of the current position (``SYNCED``'s): portable when the view is exact."""
        return str(self.exact) if self.exact is not None else f"{self.id}.{self.seq}"

    def subscribe(self, subscriber: Subscriber) -> None:
        """Add a subscriber whose first state or replay went up to the current ``seq``."""
        subscriber.after_seq = self.seq
        subscriber.hub = self
        self.subscribers.add(subscriber)
        self._one_by_one.add(subscriber)
        if subscriber.since:
            self._catching_up.add(subscriber)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self.indirect(subscriber)
        self.subscribers.discard(subscriber)
        self._one_by_one.discard(subscriber)
        self._catching_up.discard(subscriber)

    def close_all(self, error: StatusError | None = None) -> None:
        """End every subscriber's stream: unloaded, or with ``error`` (the resource went
        away from its API server, or its cluster from the gateway)."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        for subscriber in list(self.subscribers):
            subscriber.close(error)
