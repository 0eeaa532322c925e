"""A stream's life once admitted: its first state, then its loop, in its request or parked.

The loop (``LiveStream.live``): batches of matching events as they come, the encoder's
timer (heartbeats, bookmarks) when idle, the access checked again whenever the decision it
was granted on expires, and the end, each with the encoder's last words. It runs in the
request's task (``app.streams.pipeline.StreamBody``) until it has nothing to do but wait.
There it yields ``PARK``, and a stream served by the gateway's protocol is handed its
connection (``app.streams.handover``) and *parked*: no task, no coroutine, a timer for its
next tick or check, its subscriber's wake-up and its sink. Measured with 2,000 open event
streams on one worker: 15.7 KiB of RSS a stream in its request, 3.1 KiB parked. A timer that
finds only a tick due writes it and parks the stream again; anything else (events waiting
behind a full socket or a burst, an access check, the end) starts a task that runs the loop
from where it stood — its state is the ``LiveStream``'s, not a coroutine's frame — until it
can park again or the stream ends.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from app.auth.authorization import Grant
from app.cache.event import Event
from app.cache.subscriber import Subscriber
from app.kube.status import StatusError
from app.streams.past import Replay
from app.streams.wire import Wire, frame

__all__ = ["PARK", "RECHECK_AT_MOST_EVERY", "LiveStream", "pieces"]

log = logging.getLogger(__name__)

# A stream's access is checked again when its decision expires, but never more often than
# this (seconds): with decisions kept briefly, or not at all (--authz-cache-ttl 0), an open
# stream would otherwise review its caller in a tight loop.
RECHECK_AT_MOST_EVERY = 2.0
_UNKNOWN = object()  # a sweep's memo: not decided yet

PARK = object()  # yielded by a stream's loop where it would wait, free to be taken over


class LiveStream:
    """One stream after admission: its first state, its loop, parked or not (see the module),
    and its teardown, once. ``encoder``: the stream's ``StreamEncoder``
    (``app.streams.pipeline``)."""

    __slots__ = ("_gateway", "_cluster", "_hub", "subscriber", "encoder", "client",
                 "_granted", "_recheck", "_deadline", "_closing", "wrote", "stall_timeout",
                 "_wire", "_connection", "_timer", "parked", "_handed", "_finished")

    def __init__(self, gateway: Any, cluster: Any, hub: Any, subscriber: Subscriber,
                 encoder: Any, grant: Grant, timeout_seconds: float | None,
                 stall_timeout: float) -> None:
        self._gateway, self._cluster, self._hub = gateway, cluster, hub
        self.subscriber, self.encoder, self.client = subscriber, encoder, subscriber.client
        self._granted = grant
        now = time.monotonic()
        self._recheck = max(grant.expires, now + RECHECK_AT_MOST_EVERY)
        self._deadline = now + timeout_seconds if timeout_seconds else None
        self._closing = gateway.closing
        self.wrote = False  # the sink wrote since the last tick: the stream was not idle
        self.stall_timeout = stall_timeout
        self._wire: Any = None  # what events are written to from the dispatch (its sink)
        self._connection: Any = None  # the connection, once handed over (StreamConnection)
        self._timer: asyncio.TimerHandle | None = None
        self.parked = False
        self._handed = False  # its connection was handed over: the request no longer ends it
        self._finished = False

    @property
    def stopping(self) -> bool:
        """Whether the gateway is stopping (a connection is closed after its stream)."""
        return self._closing.is_set()

    async def body(self, first: Iterable[bytes], live: bool, scope: dict) -> AsyncIterator[bytes]:
        """The request's body: the first state, then the loop (see the module docstring)."""
        subscriber = self.subscriber
        try:
            for chunk in first:
                if subscriber.hung_up:
                    return  # nobody to take the rest
                if not isinstance(chunk, Replay):
                    yield chunk
                    continue
                # read as it is sent (a replay from the history store: ``app.streams.past``)
                try:
                    async for piece in chunk:
                        if subscriber.hung_up:
                            return
                        yield piece
                except StatusError as error:  # the store went away, or retention passed it
                    yield self.encoder.refused(error)
                    return
            del first
            if not live:
                return
            # the head and the first state are out: the connection (see app.streams.wire)
            loop = self.live(Wire.of(scope))
            del scope
            try:
                async for chunk in loop:
                    yield chunk
            finally:
                await loop.aclose()
        finally:
            if not self._handed:
                self.finish()

    async def live(self, wire: Any) -> AsyncIterator[Any]:
        """The loop: batches as they come, ticks when idle, access checks, the end; ``PARK``
        wherever it would wait with nothing waiting. ``wire``: what the hub's dispatch may
        write events to straight away (``None``: every event through here)."""
        subscriber, encoder, closing = self.subscriber, self.encoder, self._closing
        self._wire = wire
        sink = self._sink if wire is not None else None
        try:
            while not closing.is_set() and not subscriber.hung_up:
                now = time.monotonic()
                if self._check_due(now):
                    subscriber.sink = None  # nothing more goes out until access is confirmed
                    try:
                        # the cluster's authorization now, not the stream's first: it
                        # follows the identity cluster (a removed one reviews nothing);
                        # from its caches when they can say
                        authorization = self._cluster.authorization
                        self._granted = authorization.regranted(self._granted) or \
                            await authorization.reauthorize(self._granted)
                    except StatusError as error:
                        yield encoder.refused(error)
                        return
                    self._recheck = max(self._granted.expires, now + RECHECK_AT_MOST_EVERY)
                waits = [t - now for t in (self._deadline, encoder.next_tick(now), self._recheck)
                         if t is not None and t != math.inf]
                if not self._cluster.authorization.current(self._granted):
                    # RBAC changed while the access was being checked: its wake-up came
                    # before this wait, which would not see it — check again at once
                    waits.append(0.0)
                if not subscriber.waiting and not subscriber.overflowed and not subscriber.closed:
                    subscriber.sink = sink  # nothing waits: what comes may go straight out
                    if sink is not None:
                        yield PARK  # taken over here, or not: then it waits as below
                batch = await subscriber.next_batch(max(0.0, min(waits)) if waits else None)
                subscriber.sink = None  # what the task writes goes first
                if subscriber.hung_up:
                    return  # nobody to tell
                for piece in pieces(batch):
                    yield encoder.events(piece)
                if subscriber.closed and subscriber.error is not None:
                    yield encoder.refused(subscriber.error)  # its resource or cluster went away
                    return
                if subscriber.overflowed or subscriber.closed:
                    if subscriber.overflowed:
                        self._gateway.metrics.stream_cut_off(encoder.name)
                    last = encoder.ended("behind" if subscriber.overflowed else "unloaded")
                    if last:
                        yield last
                    return
                now = time.monotonic()
                if self._deadline is not None and now >= self._deadline:
                    return
                due = encoder.tick(now, idle=not batch and not self.wrote)
                self.wrote = False
                if due:
                    yield due
            if subscriber.hung_up:
                return  # nobody to tell
            last = encoder.ended("shutdown")
            if last:
                yield last
        finally:
            if not self.parked:
                subscriber.sink = None

    def finish(self) -> None:
        """Teardown, once, however the stream ended: unsubscribe, free its slot, count it."""
        if self._finished:
            return
        self._finished = True
        self.parked = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        subscriber = self.subscriber
        subscriber.sink = None
        subscriber.regrant = None
        subscriber.on_wakeup(None)
        self._hub.unsubscribe(subscriber)  # (out of its group too)
        self._gateway.limiter.release(self.client)
        self._gateway.metrics.stream_closed(self.encoder.name)

    # -- parked: no task (app.streams.handover) ----------------------------------------------

    def _only_waits(self) -> bool:
        """Nothing to do but wait: no events held, not fallen behind, not ended by the
        hub, the client or the gateway stopping, the access not to be checked again."""
        subscriber = self.subscriber
        return not (subscriber.waiting or subscriber.overflowed or subscriber.closed or
                    subscriber.hung_up or self._closing.is_set() or
                    not self._cluster.authorization.current(self._granted))

    def _check_due(self, now: float) -> bool:
        """Whether the access is to be checked again now: its decision expired, or the
        cluster's RBAC changed since (``Cluster.access_changed`` wakes every stream)."""
        return now >= self._recheck or not self._cluster.authorization.current(self._granted)

    def park(self, connection: Any) -> bool:
        """Wait with no task, events going straight to ``connection``; ``False`` (and not
        parked) if something is to be done now."""
        if not self._only_waits():
            return False
        subscriber, now = self.subscriber, time.monotonic()
        times = [t for t in (self._deadline, self.encoder.next_tick(now), self._recheck)
                 if t is not None and t != math.inf]
        at = min(times) if times else None
        if at is not None and at <= now:
            return False
        self._connection = self._wire = connection
        self.parked = True
        subscriber.sink = self._sink  # offered one by one: its events go out here
        subscriber.regrant = self._regrant
        subscriber.on_wakeup(self._wake)
        if at is not None:
            self._timer = asyncio.get_running_loop().call_later(at - now, self._wake)
        key = self.encoder.fanout_key
        if key is not None:  # or written to in a group, the same bytes for all of it
            self._hub.direct(subscriber, connection,
                             (subscriber.selection.group, connection.chunked, *key),
                             self._direct_bytes)
        return True

    def _regrant(self, memo: dict) -> bool:
        """Parked, and RBAC changed: granted again from the caches where it waits, with no
        wake-up (``Cluster._sweep``); ``False`` when the caches cannot say (it is woken and
        checks in full). One answer for every stream of the same identity and access in a
        sweep: ten thousand streams of one caller cost one decision and a lookup each."""
        if not self.parked:
            return False
        granted = self._granted
        credentials = granted.credentials
        key = (id(granted.identity), granted.access,
               credentials.certificate if credentials is not None else None)
        found = memo.get(key, _UNKNOWN)
        if found is _UNKNOWN:
            found = memo[key] = self._cluster.authorization.regranted(granted)
        if found is None:
            return False
        self._granted = found if found.credentials is credentials else \
            found._replace(credentials=credentials)
        self._recheck = max(found.expires, time.monotonic() + RECHECK_AT_MOST_EVERY)
        return True

    def _direct_bytes(self, batch: list[tuple[Event, str]]) -> bytes | None:
        """A batch as the hub writes it to this stream's group (``EventHub.direct``): one
        chunk, or ``None`` for a burst (each stream's task sends it piece by piece)."""
        if not _one_piece(batch):
            return None
        data = self.encoder.events(batch)
        return frame(data) if self._connection.chunked else data

    def _sink(self, batch: list[tuple[Event, str]]) -> bool:
        """Where the hub's dispatch offers this stream's events: written to its wire now,
        or (``False``) left to wait in the ring. A burst larger than one piece goes through
        the task, which waits for the client between pieces: a connection's buffer never
        holds a burst."""
        wire = self._wire
        if not wire.ready() or not _one_piece(batch):
            return False
        wire.write(self.encoder.events(batch))
        self.wrote = True
        return True

    def handed_over(self, connection: Any) -> None:
        """The request's connection is the stream's now (``app.streams.handover``): park, or
        go on in a task of its own."""
        self._handed = True
        self._connection = connection
        if not self.park(connection):
            self._start()

    def _wake(self) -> None:
        """Parked, and its timer fired or its subscriber was woken (events wait, its end
        came): a tick alone is written here, anything else gets a task."""
        if not self.parked:
            return
        self.parked = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        subscriber, connection = self.subscriber, self._connection
        self._hub.indirect(subscriber)
        subscriber.on_wakeup(None)
        subscriber.sink = None
        subscriber.regrant = None
        if connection.wrote:  # the hub wrote to it in its group
            self.wrote, connection.wrote = True, False
        if not self._tick_alone():
            self._start()

    def _start(self) -> None:
        task = asyncio.get_running_loop().create_task(self._run())
        tasks = self._connection.tasks
        tasks.add(task)  # the server's: a stopping server waits for it, then cancels it
        task.add_done_callback(tasks.discard)

    def _tick_alone(self) -> bool:
        """Only a tick is due (a heartbeat, a bookmark), and the socket has room: write it,
        park again; whether it did."""
        connection, now = self._connection, time.monotonic()
        if self._check_due(now):  # from the caches alone, when they can say: no task
            granted = self._cluster.authorization.regranted(self._granted)
            if granted is None:
                return False
            self._granted = granted
            self._recheck = max(granted.expires, now + RECHECK_AT_MOST_EVERY)
        if not self._only_waits() or \
                (self._deadline is not None and now >= self._deadline) or \
                not connection.ready():
            return False
        due = self.encoder.tick(now, idle=not self.wrote)
        self.wrote = False
        if due:
            connection.write(due)
        return self.park(connection)

    async def _run(self) -> None:
        """The loop in a task of its own, writing to the connection, until it parks again
        or the stream ends (then the connection's body ends too)."""
        connection = self._connection
        loop = self.live(connection)
        parked = False
        try:
            async for chunk in loop:
                if chunk is PARK:
                    parked = self.park(connection)
                    if parked:
                        return
                    continue
                await connection.send(chunk)
        except Exception:
            log.exception("a stream to %s failed", self.client or "a client")
            connection.abort()
        finally:
            await loop.aclose()
            if not parked:
                self.finish()
                connection.end()

    def hang_up(self) -> None:
        """The client's connection is gone: the stream ends at its next step (now, if parked)."""
        self.subscriber.hang_up()

    def log_cut(self) -> None:
        log.warning("closing a stream to %s: it stopped reading (fell behind, then nothing "
                    "taken for %.0f s)", self.client or "a client", self.stall_timeout)


_PIECE = 64 * 1024  # bytes of objects per write: what one stalled reader's buffer may hold


def _one_piece(batch: list[tuple[Event, str]]) -> bool:
    """Whether ``batch`` is no more than one piece (``pieces`` would not split it)."""
    if len(batch) == 1:
        return len(batch[0][0].obj.raw) < _PIECE
    return sum(len(event.obj.raw) for event, _ in batch) < _PIECE


def pieces(batch: list[tuple[Event, str]]) -> Iterator[list[tuple[Event, str]]]:
    """Split a batch into runs of about ``_PIECE`` bytes, so no write joins a whole burst."""
    start, size = 0, 0
    for i, (event, _) in enumerate(batch):
        size += len(event.obj.raw)
        if size >= _PIECE:
            yield batch[start:i + 1]
            start, size = i + 1, 0
    if start < len(batch):
        yield batch[start:]
