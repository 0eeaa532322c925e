"""One stream's place in its hub: its selection, what each change means to it, and a cursor.

A ``Subscriber`` lives on the event loop. Its hub offers it each dispatch's events
(``offer``); it sends them to its connection (``sink``) or, when it cannot take them now,
keeps a cursor into the hub's ring instead of a queue of its own. It knows of its hub only
what ``SubscribedHub`` names, so the hub stands above it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from app.cache.event import Event
from app.cache.signal import Signal
from app.kube.status import StatusError
from app.query.selection import Selection

__all__ = ["SubscribedHub", "Subscriber"]


class SubscribedHub(Protocol):
    """What a subscriber reads of its hub (``app.cache.hub.EventHub``)."""

    ring: deque[Event]

    def offered_after(self, seq: int) -> list[Event] | None: ...

    def indirect(self, subscriber: Subscriber) -> None: ...


class Subscriber:
    """One stream's selection, and where it stands in its hub's ring; lives on the loop.

    A stream that keeps up holds nothing: each dispatch's events go to its ``sink`` (its
    connection) or wake its task. One that cannot take them now (its client's socket is
    full, or its task is writing) keeps a cursor into the hub's ring instead of a queue of
    its own, as kube-apiserver's watchers keep a buffer each and steve's readers a cursor:
    the events wait in the ring every stream shares, and the task takes all of them in
    one go when it can write again (``take``). It falls behind — its stream ends with
    the encoder's last words, and the client resumes — when more than ``max_queue``
    matching events wait, or when the ring moves a lap past its cursor. Either way a
    stalled reader costs a few integers, not a reference per event.
    """

    def __init__(self, selection: Selection, max_queue: int, client: str = "",
                 wakeup: Signal | None = None, fell_behind: Signal | None = None) -> None:
        """``wakeup`` and ``fell_behind``: shared by the subscribers of one stream over
        several hubs (a merged stream waits for any of them)."""
        self.selection = selection
        self.client = client
        self._max = max_queue
        self.hub: SubscribedHub | None = None  # set by EventHub.subscribe
        self._cursor = -1  # the last event the stream has, when events wait after it (-1: none)
        self._pending = 0  # matching events waiting after the cursor
        self._wakeup = wakeup or Signal()
        self.overflowed = False
        # set with overflowed: the stall watch starts
        self.fell_behind = fell_behind or Signal()
        self.closed = False
        self.hung_up = False  # the client went away: the stream ends, with nobody to tell
        self.error: StatusError | None = None  # the stream's last word, when it has one
        # (key, connection) while written to in a group by the hub (``EventHub.direct``)
        self.direct: tuple[tuple, Any] | None = None
        # where events go without waking the stream (its connection), while its task allows:
        # takes a batch, says whether it took it (see ``offer``)
        self.sink: Callable[[list[tuple[Event, str]]], bool] | None = None
        # while its stream waits with no task: takes a change of what its access rests on in
        # place (``memo``: answers shared by the streams checked in one sweep), or says it
        # cannot (``False``: it is woken, ``nudge``)
        self.regrant: Callable[[dict], bool] | None = None
        self.after_seq = 0  # events up to this one came with the first state or replay
        # resumed from a version this process had not reached: the changes up to it are the
        # client's already (see EventHub.ahead_of); 0 once the view has passed it
        self.since = 0
        # the last event ``since`` still applies to, once the view has passed it (events
        # waiting in the ring from before that moment are still told apart by it)
        self.since_until = 0

    def transition(self, event: Event) -> str | None:
        """Return what ``event`` means to this subscriber, as the apiserver's watch cache.

        ``MODIFIED`` that makes the object stop matching is ``DELETED_OLD`` (its
        last matching state at the new version); one that makes it start
        matching is ``ADDED``; changes to objects that never matched are dropped.
        """
        sel = self.selection
        if sel.namespace_only:  # the namespace alone, which no change moves an object out of
            namespace = sel.namespace
            return event.type if namespace is None or event.obj.namespace == namespace else None
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

    def offer(self, events: list[Event], shared: dict[int, tuple[list, list]] | None = None) -> None:
        """Send, or leave waiting in the ring, what ``events`` (one dispatch's) mean here.

        ``shared``: what the events mean to each selection, and the batch they make, filled
        as the dispatch goes, so subscribers with equal selections filter them once and
        share one batch (a subscriber still skipping what its client has makes its own). With a ``sink`` (its stream's
        connection, see ``app.streams.wire``) and nothing waiting, the events go straight to
        it in one write, without waking the stream's task; otherwise (or if the sink cannot
        take them now: the client's socket is full) they wait in the ring behind the
        cursor and the task is woken. Too many waiting ends the stream.
        """
        if self.closed or self.overflowed:
            return
        group = self.selection.group
        found = None if shared is None else shared.get(group)
        if found is None:
            kinds = [self.transition(event) for event in events]
            found = (kinds, [(e, k) for e, k in zip(events, kinds) if k is not None])
            if shared is not None:
                shared[group] = found
        if self.since or events[0].seq <= self.after_seq:
            batch = self._select(events, found[0])
        else:
            batch = found[1]  # what every subscriber of its selection sends: never changed
        if not batch:
            return
        if self._cursor < 0:
            if self.sink is not None and self.sink(batch):
                return
            self._cursor = events[0].seq - 1
        self._pending += len(batch)
        hub = self.hub
        if self._pending > self._max or (hub is not None and hub.ring
                                         and hub.ring[0].seq > self._cursor + 1):
            # Nothing waiting will be sent now (the client resumes from what it got): a
            # reader that stopped reading holds no more than its socket's.
            self._fall_behind()
            return
        self._wakeup.set()

    def _select(self, events: Iterable[Event], kinds: Iterable[str | None]) -> list[tuple[Event, str]]:
        """The events this stream sends, with what each means to it (``kinds``)."""
        batch: list[tuple[Event, str]] = []
        for event, kind in zip(events, kinds):
            if kind is None or event.seq <= self.after_seq:
                continue
            if self.since and (not self.since_until or event.seq <= self.since_until):
                if not event.own:
                    # a relist's deletion: whether the client has it is unknown. End the
                    # stream as one that fell behind: it resumes, from a point this time.
                    self._fall_behind()
                    return []
                if event.own <= self.since:
                    continue  # the client has this change
            batch.append((event, kind))
        return batch

    def _fall_behind(self) -> None:
        self._leave_group()
        self.overflowed = True
        self.sink = None
        self._cursor, self._pending = -1, 0
        self.fell_behind.set()
        self._wakeup.set()

    def replay(self, events: Iterable[Event]) -> list[tuple[Event, str]]:
        """Return what earlier ``events`` mean to this subscriber (a resume), as ``transition``."""
        return [(e, kind) for e in events if (kind := self.transition(e)) is not None]

    async def next_batch(self, timeout: float | None) -> list[tuple[Event, str]]:
        """Wait up to ``timeout`` for events; return what waits (maybe nothing)."""
        if self._cursor < 0 and not (self.overflowed or self.closed or self.hung_up):
            self._wakeup.clear()
            if not await self._wakeup.wait(timeout):
                return []
        return self.take()

    def take(self) -> list[tuple[Event, str]]:
        """Every event waiting for this stream, read from the ring (maybe nothing), without
        waiting; a ring that moved a lap past the cursor makes it fall behind instead."""
        if self._cursor < 0:
            return []
        cursor, self._cursor, self._pending = self._cursor, -1, 0
        if self.overflowed or self.hub is None:
            return []
        events = self.hub.offered_after(cursor)
        if events is None:
            self._fall_behind()
            return []
        return self._select(events, [self.transition(event) for event in events])

    def _leave_group(self) -> None:
        if self.direct is not None and self.hub is not None:
            self.hub.indirect(self)

    def on_wakeup(self, then: Callable[[], None] | None) -> None:
        """Call ``then`` when events come to wait or the stream is to end, as a task waiting
        in ``next_batch`` would wake (a parked stream: ``app.streams.pipeline``); ``None``:
        no longer."""
        self._wakeup.clear()
        self._wakeup.then = then

    def nudge(self) -> None:
        """Wake the stream with nothing new: something it rests on changed (the cluster's
        RBAC), and it is to look again."""
        self._wakeup.set()

    @property
    def waiting(self) -> bool:
        """Whether events wait, not yet taken (a bookmark now would pass them by)."""
        return self._cursor >= 0

    def close(self, error: StatusError | None = None) -> None:
        """End the stream: ``error`` is its last word (a resource or cluster that went away)."""
        self._leave_group()
        self.closed = True
        self.sink = None
        self.error = error
        self._wakeup.set()

    def hang_up(self) -> None:
        """The client's connection is gone (``StreamBody``): end the stream now."""
        self._leave_group()
        self.hung_up = True
        self.sink = None
        self._wakeup.set()
