"""Server-Sent Events on any collection path (``Accept: text/event-stream``).

The stream: ``retry:`` advice; the current matching objects as ``ADDED``;
``SYNCED`` (``data: {"resourceVersion": ...}``); then live ``ADDED``,
``MODIFIED`` and ``DELETED``, with heartbeat comments when idle.

Ids. A live event's id is ``<hub>.<seq>``; ``SYNCED`` carries the position it
was taken at. Echoing one in ``Last-Event-ID`` (EventSource does it by
itself) replays exactly the matching events after it — no duplicate, no gap.
The objects of a snapshot carry ids of their own (``<hub>.<seq>~<n>``): a
snapshot cannot be resumed half-way, so such an id, an id older than the
ring, or one from another hub (the gateway restarted, the cache was unloaded)
gets ``RESET``, then a fresh snapshot and ``SYNCED``.

A stream asked for before the cache has synced waits for it: EventSource gives
up for good on any answer but 200, so even refusals (too many streams) are a
200 stream with ``retry:`` and an ``ERROR`` event (code 429), after which the
browser reconnects by itself. A subscriber too slow to keep up gets the same
``ERROR`` (429) and resumes by ``Last-Event-ID``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import StreamingResponse

from app.events import Subscriber
from app.request import Query
from app.selection import Selection
from app.status import status_body

__all__ = ["sse_response"]

_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "Connection": "keep-alive"}
_CHUNK = 256


def _error_frame(code: int, message: str, reason: str) -> bytes:
    return b"event: ERROR\ndata: " + orjson.dumps(status_body(code, message, reason)) + b"\n\n"


def _retry(ms: int) -> bytes:
    return b"retry: " + str(ms).encode() + b"\n\n"


def _refusal(retry_ms: int, message: str) -> StreamingResponse:
    async def once() -> AsyncIterator[bytes]:
        yield _retry(retry_ms) + _error_frame(429, message, "TooManyRequests")

    return StreamingResponse(once(), media_type="text/event-stream", headers=_HEADERS)


async def sse_response(gateway: Any, request: Request, resource: Any, selection: Selection,
                       query: Query) -> StreamingResponse:
    """Open an event stream on ``resource``."""
    settings = gateway.settings
    client = request.client.host if request.client else ""
    refusal = gateway.limiter.acquire(client)
    if refusal is not None:
        return _refusal(settings.sse_retry_ms, f"too many open streams: {refusal}")
    try:
        entry = await gateway.cache.load(resource, wait=None)  # wait for the sync: no 503
    except BaseException:
        gateway.limiter.release(client)
        raise
    gateway.metrics.stream_opened("sse")
    hub = entry.hub
    subscriber = Subscriber(selection, settings.subscriber_queue, client)
    last_id = request.headers.get("last-event-id", "").strip()
    first: list[bytes] = [_retry(settings.sse_retry_ms)]
    replay = hub.events_after_id(last_id) if last_id else None
    if replay is not None:
        parts: list[bytes] = []
        for event in replay:
            kind = subscriber.transition(event)
            if kind is not None:
                parts.extend(event.frame_parts(kind, "sse"))
        if parts:
            first.append(b"".join(parts))
    else:
        if last_id:
            first.append(b"event: RESET\ndata: " + orjson.dumps(
                {"reason": "the id is unknown or too old; a fresh state follows",
                 "lastEventId": last_id[:128]}) + b"\n\n")
        objects = hub.snapshot(selection)
        prefix = f"{hub.id}.{hub.seq}~".encode()
        for start in range(0, len(objects), _CHUNK):
            first.append(b"".join(
                b"id: " + prefix + str(start + i).encode() + b"\nevent: ADDED\ndata: " + o.raw + b"\n\n"
                for i, o in enumerate(objects[start:start + _CHUNK])))
        first.append(f"id: {hub.id}.{hub.seq}\nevent: SYNCED\n".encode() + b"data: "
                     + orjson.dumps({"resourceVersion": str(hub.rv)}) + b"\n\n")
    hub.subscribe(subscriber)  # no await since the snapshot or replay: nothing missed
    heartbeat = settings.heartbeat_interval
    deadline = time.monotonic() + query.timeout_seconds if query.timeout_seconds else None

    async def stream() -> AsyncIterator[bytes]:
        try:
            for chunk in first:
                yield chunk
            while not gateway.closing.is_set():
                wait = heartbeat
                if deadline is not None:
                    wait = max(0.0, min(wait, deadline - time.monotonic()))
                batch = await subscriber.next_batch(wait)
                if batch:
                    parts: list[bytes] = []
                    for event, kind in batch:
                        parts.extend(event.frame_parts(kind, "sse"))
                    yield b"".join(parts)
                elif not subscriber.overflowed and not subscriber.closed:
                    yield b": heartbeat\n\n"
                if subscriber.overflowed:
                    yield _error_frame(429, "this stream fell behind and was ended; reconnect "
                                            "with Last-Event-ID to resume", "TooManyRequests")
                    return
                if subscriber.closed:
                    yield _error_frame(503, "the resource's cache was unloaded or went away; "
                                            "reconnect to start again", "ServiceUnavailable")
                    return
                if deadline is not None and time.monotonic() >= deadline:
                    return
            yield _error_frame(503, "the gateway is shutting down; reconnect", "ServiceUnavailable")
        finally:
            hub.unsubscribe(subscriber)
            gateway.limiter.release(client)
            gateway.metrics.stream_closed("sse")

    return StreamingResponse(stream(), media_type="text/event-stream", headers=_HEADERS)
