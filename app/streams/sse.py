"""Server-Sent Events on any collection path (``Accept: text/event-stream``): the SSE
encoder of ``app.streams.pipeline``.

The stream: ``retry:`` advice; the current matching objects as ``ADDED``;
``SYNCED`` (``data: {"resourceVersion": ...}``); then live ``ADDED``,
``MODIFIED`` and ``DELETED``, with heartbeat comments when idle.

Ids. A live event's id is the resourceVersion the cache was exactly at right
after it, when it was (nearly always: ``app.cache.hub``), else ``<hub>.<seq>``;
``SYNCED`` carries the position it was taken at, the same way. Echoing one in
``Last-Event-ID`` (EventSource does it by itself) replays exactly the matching
events after it — no duplicate, no gap — and a version does so on any gateway
process or replica whose ring covers it (resourceVersions are etcd's); one it
has not reached yet is followed from its current point, each change up to the
version skipped as the client's already (``EventHub.ahead_of``). The objects of a snapshot
carry ids of their own (``<hub>.<seq>~<n>``): a snapshot cannot be resumed
half-way, so such an id, an id older than the ring, or another hub's
``<hub>.<seq>`` (the gateway restarted, the cache was unloaded) gets ``RESET``,
then a fresh snapshot and ``SYNCED``.

A stream asked for before the cache has synced waits for it: EventSource gives
up for good on any answer but 200, so even refusals (too many streams) are a
200 stream with ``retry:`` and an ``ERROR`` event (code 429), after which the
browser reconnects by itself. A subscriber too slow to keep up gets the same
``ERROR`` (429) and resumes by ``Last-Event-ID``.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterable, Iterator

import orjson
from starlette.responses import Response, StreamingResponse

from app.cache.resources import ResourceCache
from app.cache.event import Event, frames, parse_rv
from app.cache.subscriber import Subscriber
from app.query.fieldpath import FieldPath
from app.cache.requested_version import FRESHNESS_WAIT
from app.query.projection import Projection
from app.kube.status import StatusError, status_body
from app.streams.past import Past

__all__ = ["SSEEncoder"]

_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "Connection": "keep-alive"}
_CHUNK = 256
_HEARTBEAT = b": heartbeat\n\n"
_LAST_WORDS = {
    "behind": (429, "this stream fell behind and was ended; reconnect with Last-Event-ID to resume",
               "TooManyRequests"),
    "unloaded": (503, "the resource's cache was unloaded or went away; reconnect to start again",
                 "ServiceUnavailable"),
    "shutdown": (503, "the gateway is shutting down; reconnect", "ServiceUnavailable"),
}


def _error_frame(code: int, message: str, reason: str) -> bytes:
    return b"event: ERROR\ndata: " + orjson.dumps(status_body(code, message, reason)) + b"\n\n"


def _state(objects: list, prefix: bytes, projection: Projection | None) -> Iterator[bytes]:
    """The snapshot's ``ADDED`` frames, joined a slice at a time as the stream takes them."""
    for start in range(0, len(objects), _CHUNK):
        yield b"".join(
            b"id: " + prefix + str(start + i).encode() + b"\nevent: ADDED\ndata: "
            + (o.raw if projection is None else projection.bytes_of(o)) + b"\n\n"
            for i, o in enumerate(objects[start:start + _CHUNK]))


def _retry(ms: int) -> bytes:
    return b"retry: " + str(ms).encode() + b"\n\n"


class SSEEncoder:
    """Writes an event stream; resumes from ``Last-Event-ID``."""

    name = "sse"
    media_type = "text/event-stream"
    headers = _HEADERS

    def __init__(self, last_event_id: str, retry_ms: int, heartbeat: float,
                 fields: tuple[str, tuple[FieldPath, ...]] | None = None) -> None:
        self._last_id = last_event_id.strip()
        self._fields = fields  # fields=: objects carry only those paths
        self._projection: Projection | None = None
        self._retry_ms = retry_ms
        self._heartbeat = heartbeat

    def refuse(self, message: str) -> Response:
        """A 200 stream with ``retry:`` and ERROR 429: EventSource gives up on any other answer."""
        async def once() -> AsyncIterator[bytes]:
            yield _retry(self._retry_ms) + _error_frame(429, message, "TooManyRequests")

        return StreamingResponse(once(), media_type=self.media_type, headers=self.headers)

    async def catch_up(self, entry: ResourceCache) -> None:
        version = parse_rv(self._last_id) if self._last_id.isdigit() else 0
        if version > entry.hub.rv:
            await entry.hub.placed(version, FRESHNESS_WAIT)

    def resumes_from(self) -> int:
        return parse_rv(self._last_id) if self._last_id.isdigit() else 0

    def begin(self, entry: ResourceCache, subscriber: Subscriber,
              past: Past | None = None) -> tuple[Iterable[bytes], bool]:
        """The missed events after ``Last-Event-ID`` (from the history's ``past`` where the
        ring no longer has them); else (RESET and) the state, then SYNCED."""
        hub = entry.hub
        if self._fields is not None:
            self._projection = entry.queries.projection(*self._fields)
        first: list[bytes] = [_retry(self._retry_ms)]
        last_id = self._last_id
        replay = hub.events_after_id(last_id) if last_id else None
        if replay is None and past is not None:
            tail = past.tail(hub)
            if tail is not None:  # the store's changes, read as they are sent, then the ring's
                first.append(past.replay(subscriber, self.events))
                replay = tail
        if replay is not None:
            missed = subscriber.replay(replay)
            if missed:
                first.append(self.events(missed))
            return first, True
        if last_id.isdigit() and hub.ahead_of(parse_rv(last_id)):
            subscriber.since = parse_rv(last_id)  # given by another process: it is ahead
            return first, True
        if last_id:
            first.append(b"event: RESET\ndata: " + orjson.dumps(
                {"reason": "the id is unknown or too old; a fresh state follows",
                 "lastEventId": last_id[:128]}) + b"\n\n")
        objects = entry.queries.snapshot(hub, subscriber.selection)
        prefix = f"{hub.id}.{hub.seq}~".encode()
        synced = (f"id: {hub.position_id()}\nevent: SYNCED\n".encode() + b"data: "
                  + orjson.dumps({"resourceVersion": str(hub.rv)}) + b"\n\n")
        return itertools.chain(first, _state(objects, prefix, self._projection), (synced,)), True

    def events(self, batch: list[tuple[Event, str]]) -> bytes:
        return frames(batch, "sse", self._projection)

    @property
    def fanout_key(self) -> tuple:
        """What makes ``events`` the same bytes for every stream of a selection."""
        return ("sse", self._projection.text if self._projection is not None else "")

    def next_tick(self, now: float) -> float | None:
        return now + self._heartbeat

    def tick(self, now: float, idle: bool) -> bytes | None:
        return _HEARTBEAT if idle else None

    def ended(self, why: str) -> bytes | None:
        # the reconnect advice again, so a browser comes back promptly (to another replica,
        # when this one is shutting down)
        return _retry(self._retry_ms) + _error_frame(*_LAST_WORDS[why])

    def refused(self, error: StatusError) -> bytes:
        return b"event: ERROR\ndata: " + orjson.dumps(error.body()) + b"\n\n"
