"""One pipeline for every stream: admission, the first state, the read loop, teardown.

A watch (``?watch=true``) and an event stream (``Accept: text/event-stream``)
differ only in how they put things into bytes and how a client names where it
left off; both are a ``StreamEncoder`` (``app.streams.watch``, ``app.streams.sse``) run by
``open_stream``:

1. admission: a slot of the stream limiter (refused as the encoder says), then
   the resource's cache, waited for however long its sync takes (a stream
   never answers 503);
2. the first state, then the subscription, with no ``await`` in between: on
   the loop nothing changes the hub meanwhile, so nothing is missed or doubled
   (a client resuming from a version this process has not reached yet — given
   by another one — is first given the moment its watch needs to get there);
3. the loop: batches of matching events as they come; the encoder's timer
   (heartbeats, bookmarks) when idle; the access checked again whenever the
   decision it was granted on expires (``Authorization.reauthorize``; at most every
   ``RECHECK_AT_MOST_EVERY`` seconds); the end
   when the subscriber fell behind, the cache went away, the caller lost the
   right to watch (an ``ERROR`` with the 401 or 403 ``Status``, and no resume
   into data they may not read), ``timeoutSeconds`` passed or the gateway
   stops, each with the encoder's last words;
4. teardown, however the stream ends: unsubscribe, release the slot, count it.

Steps 3 and 4 are a ``LiveStream``'s (``app.streams.live``); this module admits a stream,
begins it and carries it in its response (``StreamBody``).

Live events reach a client that keeps up without its task: the hub's dispatch writes
them straight to the connection (``app.streams.wire``) while nothing waits and the
task is not writing; the task wakes for its timers, events left waiting in the ring
(``Subscriber.take``) and the end.

The bytes go out as the client takes them (``StreamBody``): flow control makes a
send wait while the client's socket is full, which paces a slow reader and holds
at most one chunk of the first state in memory (it is joined lazily, slice by
slice). A client that stops reading altogether falls behind: too many events wait
behind its cursor, or the ring laps it (and it is let go at once); if its last words cannot be sent within
``stall_timeout`` either, its connection is closed. So a stream costs the same
bounded memory whether its reader reads or not, and never holds events back from
the others.

Anything that must hold for every stream (authorization re-checks, per-worker
behaviour) belongs here, once. A re-check that cannot be made (the API server
does not answer) ends the stream too: it fails closed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any, Protocol

import anyio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from app.auth.authorization import Grant
from app.cache.resources import ResourceCache
from app.cache.event import Event
from app.cache.subscriber import Subscriber
from app.kube.request import Query
from app.query.selection import Selection
from app.kube.status import StatusError
from app.streams.handover import hand_over
from app.streams.live import PARK, LiveStream
from app.streams.past import Past, past_events
from app.streams.wire import CYCLE_KEY, LOST_KEY

__all__ = ["StreamBody", "StreamEncoder", "open_stream"]

log = logging.getLogger(__name__)



class StreamEncoder(Protocol):
    """How one kind of stream is written; one instance per stream."""

    name: str  # the metrics label: "watch" or "sse"
    media_type: str
    headers: dict[str, str]

    def refuse(self, message: str) -> Response:
        """The answer when no stream slot is free (or raise a ``StatusError``)."""

    async def catch_up(self, entry: ResourceCache) -> None:
        """Wait (briefly) until the cache has reached the version the client resumes from."""

    def resumes_from(self) -> int:
        """The version the client resumes from, if it names one (0: none)."""

    def begin(self, entry: ResourceCache, subscriber: Subscriber,
              past: Past | None = None) -> tuple[Iterable[bytes], bool]:
        """The first chunks (state or replay), joined as they are taken, and whether the
        stream goes on live. What they hold is fixed when ``begin`` returns. ``past``: the
        stored events after the client's version, when the ring no longer has them."""

    def events(self, batch: list[tuple[Event, str]]) -> bytes:
        """A batch of live events."""

    @property
    def fanout_key(self) -> tuple | None:
        """What makes ``events`` the same bytes for every stream of one selection (the
        format, its projection), so the hub may make them once for all (``None``: never)."""

    def next_tick(self, now: float) -> float | None:
        """When ``tick`` wants to run next (``None``: never)."""

    def tick(self, now: float, idle: bool) -> bytes | None:
        """Bytes due at ``now`` (a heartbeat, a bookmark); ``idle``: no batch came."""

    def ended(self, why: str) -> bytes | None:
        """The last words: ``behind``, ``unloaded`` or ``shutdown``."""

    def refused(self, error: StatusError) -> bytes:
        """The last words when the caller may no longer read: an ``ERROR`` with ``error``."""


async def open_stream(gateway: Any, cluster: Any, request: Request, grant: Grant,
                      selection: Selection, query: Query, encoder: StreamEncoder) -> Response:
    """Admit, load and start a stream of ``grant.access``; see the module docstring."""
    resource = grant.access.resource
    settings = gateway.settings
    client = request.client.host if request.client else ""
    refusal = gateway.limiter.acquire(client)
    if refusal is not None:
        return encoder.refuse(f"too many open streams: {refusal}")
    try:
        entry = await cluster.caches.load(resource, wait=None)  # streams wait for the sync
    except BaseException:
        gateway.limiter.release(client)
        raise
    past = None
    try:
        await encoder.catch_up(entry)  # a version given by another process may be a moment ahead
        await entry.queries.warm(entry.hub, selection)  # filters' values read off the loop
        past = await _from_history(cluster, entry, encoder, selection)
        await entry.hub.between_bursts()
    except BaseException:
        gateway.limiter.release(client)
        raise
    gateway.metrics.stream_opened(encoder.name)
    hub = entry.hub
    subscriber = Subscriber(selection, settings.subscriber_queue, client)
    first, live = encoder.begin(entry, subscriber, past)
    if live:
        hub.subscribe(subscriber)  # no await since the first state: nothing missed
    stream = LiveStream(gateway, cluster, hub, subscriber, encoder, grant,
                        query.timeout_seconds, settings.stall_timeout)
    return StreamBody(stream.body(first, live, request.scope), subscriber,
                      settings.stall_timeout, media_type=encoder.media_type,
                      headers=encoder.headers, live=stream)


async def _from_history(cluster: Any, entry: ResourceCache, encoder: StreamEncoder,
                        selection: Selection) -> Past | None:
    """The stored events a stream resumes with, when its version is older than the ring
    and the cluster keeps history (``app.streams.past``)."""
    version = encoder.resumes_from()
    history = cluster.history
    hub = entry.hub
    if (not version or history is None or hub.events_after_rv(version) is not None
            or hub.ahead_of(version)):
        return None
    try:
        return await past_events(history, entry, version, selection.namespace)
    except StatusError as error:
        if error.code == 410:
            return None  # not kept either: the encoder says 410 (or RESET), as without history
        raise


class StreamBody(StreamingResponse):
    """A stream's bytes; a client that stopped reading is cut off (see the module docstring).

    ``subscriber``: a ``Subscriber``, or what has its ``fell_behind`` (a ``Signal``),
    ``client`` and ``hang_up`` (a merged stream, for all of its subscribers).

    Served by the gateway's own protocol, a stream has no task but its request's: the
    protocol tells it when the connection is lost (``hang_up``; the stream ends at its
    next step), and the moment its subscriber falls behind, a timer is set to close the
    connection if the stream has not ended within ``stall_timeout`` (its sends blocked on
    a full socket). A task group, its second task and two watcher tasks listened for both
    before, each with its frames, futures and timers: with them gone, and the stream's
    flags made ``Signal``s, a stream's traced memory fell from 30 to 17 KiB (``tracemalloc``,
    2,000 open streams) and its RSS from 32 to 17 KiB (``bench.scale``, 5,000). Served otherwise (another server, a test's ASGI transport), it listens
    with those tasks: Starlette stops sending when ``listen_for_disconnect`` returns (the
    client went away), and it returns as well on a stall.
    """

    def __init__(self, content: AsyncIterator[bytes], subscriber: Any, stall_timeout: float,
                 media_type: str, headers: dict[str, str], live: LiveStream | None = None) -> None:
        # Starlette's __init__ without its per-response work: a stream's head is one of a
        # few (its encoder's), built once and copied
        self.body_iterator = content
        self.status_code = 200
        self.media_type = media_type
        self.background = None
        key = (media_type, *headers.items())
        raw = _HEADS.get(key)
        if raw is None:
            self.init_headers(headers)
            raw = self.raw_headers
            if len(_HEADS) < _HEADS_KEPT:
                _HEADS[key] = raw
        self.raw_headers = list(raw)
        self._subscriber = subscriber
        self._stall_timeout = stall_timeout
        self._cycle: Any = None  # a weak reference to the request's cycle, while served on it
        self._stall: asyncio.TimerHandle | None = None
        self._live = live  # a stream that may be handed its connection (``PARK``)
        self._connection: Any = None  # the connection it was handed (StreamConnection)

    async def stream_response(self, send: Any) -> None:
        """Starlette's, for bytes only; and however it ends, the stream ends now (unsubscribe,
        free its slot) rather than whenever the garbage collector finalizes it."""
        try:
            await send({"type": "http.response.start", "status": self.status_code,
                        "headers": self.raw_headers})
            async for chunk in self.body_iterator:
                if chunk is PARK:
                    if self._hand_over():
                        return  # the stream has the connection now; its body goes on there
                    continue
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            with anyio.CancelScope(shield=True):  # its teardown does not wait
                await self.body_iterator.aclose()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Send the stream until it ends, the client goes away or it stalls, whichever first."""
        extensions = scope.get("extensions") or {}
        ref = extensions.get(CYCLE_KEY)
        if ref is None:
            await self._listening(receive, send)
            return
        # Served by the gateway's protocol: told of a lost connection, no task listening.
        subscriber = self._subscriber
        self._cycle = ref  # weakly, as the wire: no reference cycle through the request
        extensions[LOST_KEY] = subscriber.hang_up
        subscriber.fell_behind.then = self._fell_behind
        try:
            if subscriber.fell_behind.is_set():
                self._fell_behind()
            cycle = ref()
            if cycle is None or cycle.disconnected:
                subscriber.hang_up()  # gone already: the stream starts, to end at once
            del cycle
            await self.stream_response(send)
        finally:
            # what refers back to the request goes with it: no garbage cycle is left
            extensions.pop(LOST_KEY, None)
            connection = self._connection
            subscriber.fell_behind.then = None if connection is None else connection.fell_behind
            if self._stall is not None:
                self._stall.cancel()

    def _hand_over(self) -> bool:
        """At the stream's ``PARK``: hand it the connection (``app.streams.handover``), if
        served by the gateway's protocol and the connection can be taken now."""
        live, ref = self._live, self._cycle
        if live is None or ref is None:
            return False
        connection = hand_over(ref(), live)
        if connection is None:
            return False
        self._connection = connection
        live.handed_over(connection)
        return True

    def _fell_behind(self) -> None:
        """The subscriber fell behind: if the stream has not ended in time, cut it off."""
        if self._stall is None:
            self._stall = asyncio.get_running_loop().call_later(self._stall_timeout, self._cut)

    def _cut(self) -> None:
        cycle = self._cycle()
        if cycle is None or cycle.disconnected or cycle.response_complete:
            return
        self._log_cut()
        cycle.transport.abort()  # its send, waiting for room, returns; the stream ends

    async def _listening(self, receive: Any, send: Any) -> None:
        """Served otherwise: a task listens for the client's going, and one for a stall.

        Written out rather than left to Starlette, whose ``StreamingResponse`` stops
        listening for a disconnect (and so for a stall) when the server speaks ASGI 2.4
        or later: the cut-off must not depend on the server's version.
        """
        async with anyio.create_task_group() as group:

            async def first_to_end(run: Any) -> None:
                await run()
                group.cancel_scope.cancel()

            group.start_soon(first_to_end, lambda: self.stream_response(send))
            await first_to_end(lambda: self.listen_for_disconnect(receive))

    async def listen_for_disconnect(self, receive: Any) -> None:
        watchers = {asyncio.ensure_future(super().listen_for_disconnect(receive)),
                    asyncio.ensure_future(self._stalled())}
        try:
            await asyncio.wait(watchers, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for watcher in watchers:
                watcher.cancel()

    async def _stalled(self) -> None:
        await self._subscriber.fell_behind.wait()
        await asyncio.sleep(self._stall_timeout)
        self._log_cut()

    def _log_cut(self) -> None:
        log.warning("closing a stream to %s: it stopped reading (fell behind, then nothing "
                    "taken for %.0f s)", self._subscriber.client or "a client", self._stall_timeout)


_HEADS: dict[tuple, list] = {}  # each stream head's raw headers, by its media type and headers
_HEADS_KEPT = 64  # heads vary by encoder: a handful; past this many, none more is kept
