"""The Kubernetes watch protocol (``?watch=true``), served from a resource's EventHub.

One JSON event per line. With ``resourceVersion`` unset or ``"0"`` the stream
starts with an ``ADDED`` event for every current matching object; with a
version it resumes after it; a version older than the hub's ring (or one that
does not name a single position) gets an ``ERROR`` event with a 410 ``Status``
— client-go relists by itself, the official Python client raises
``ApiException(410)``, exactly as against the API server. ``BOOKMARK`` events
come every ``bookmark_interval`` seconds when asked for; ``timeoutSeconds``
ends the stream. A subscriber too slow to keep up is disconnected (as the API
server's watch cache does) and resumes from its last version.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import orjson
from starlette.responses import StreamingResponse

from app.cache import ResourceCache
from app.events import Event, Subscriber, parse_rv
from app.request import Accept, Query
from app.selection import Selection
from app.status import status_body
from app.table import table_bytes

__all__ = ["watch_response"]

_CHUNK = 256  # objects per write of the initial state


def _error_line(code: int, message: str, reason: str) -> bytes:
    return orjson.dumps({"type": "ERROR", "object": status_body(code, message, reason)}) + b"\n"


class _Writer:
    """Turns (event, kind) pairs into bytes, as JSON objects or Table rows."""

    def __init__(self, entry: ResourceCache, accept: Accept, query: Query) -> None:
        self.entry = entry
        self.accept = accept
        self.query = query
        self.headers_sent = False

    def events(self, batch: list[tuple[Event, str]]) -> bytes:
        if self.accept.kind != "table":
            parts: list[bytes] = []
            for event, kind in batch:
                parts.extend(event.frame_parts(kind, "watch"))
            return b"".join(parts)
        lines = []
        for event, kind in batch:
            obj = orjson.loads(event.object_bytes(kind))
            name = "DELETED" if kind == "DELETED_OLD" else kind
            lines.append(self._table_line(name, obj))
        return b"".join(lines)

    def snapshot(self, objects: list) -> bytes:
        if self.accept.kind != "table":
            return b"".join(b'{"type":"ADDED","object":' + o.raw + b"}\n" for o in objects)
        return b"".join(self._table_line("ADDED", o.to_dict()) for o in objects)

    def _table_line(self, kind: str, obj: dict) -> bytes:
        table = table_bytes([obj], self.entry.printer, table_version=self.accept.table_version,
                            include=self.query.include_object, headers=not self.headers_sent,
                            resource_version=obj.get("metadata", {}).get("resourceVersion", ""))
        self.headers_sent = True
        return b'{"type":"' + kind.encode() + b'","object":' + table + b"}\n"

    def bookmark(self, rv: int) -> bytes:
        res = self.entry.resource
        return orjson.dumps({"type": "BOOKMARK", "object": {
            "kind": res.kind, "apiVersion": res.api_version,
            "metadata": {"resourceVersion": str(rv)}}}) + b"\n"


async def watch_response(entry: ResourceCache, selection: Selection, query: Query,
                         accept: Accept, *, client: str, max_queue: int,
                         bookmark_interval: float, closing: asyncio.Event,
                         on_close: callable) -> StreamingResponse:
    """Open a watch on ``entry`` and return the streaming answer."""
    hub = entry.hub
    writer = _Writer(entry, accept, query)
    subscriber = Subscriber(selection, max_queue, client)
    first: list[bytes] = []
    expired = False
    # Snapshot (or replay) and subscribe with no await in between: on the loop,
    # nothing can change the hub meanwhile, so nothing is missed or doubled.
    if query.resource_version in ("", "0"):
        objects = hub.snapshot(selection)
        for start in range(0, len(objects), _CHUNK):
            first.append(writer.snapshot(objects[start:start + _CHUNK]))
    else:
        events = hub.events_after_rv(parse_rv(query.resource_version))
        if events is None:
            expired = True
            first.append(_error_line(
                410, f"too old resource version: {query.resource_version} ({hub.base_rv})",
                "Expired"))
        else:
            replay = [(e, k) for e in events if (k := subscriber.transition(e)) is not None]
            if replay:
                first.append(writer.events(replay))
    if not expired:
        hub.subscribe(subscriber)

    deadline = None
    if query.timeout_seconds:
        deadline = time.monotonic() + query.timeout_seconds

    async def stream() -> AsyncIterator[bytes]:
        try:
            for chunk in first:
                yield chunk
            if expired:
                return
            next_bookmark = time.monotonic() + bookmark_interval if query.allow_bookmarks else None
            while not closing.is_set():
                now = time.monotonic()
                waits = [t - now for t in (deadline, next_bookmark) if t is not None]
                batch = await subscriber.next_batch(max(0.0, min(waits)) if waits else None)
                if batch:
                    yield writer.events(batch)
                if subscriber.overflowed or subscriber.closed:
                    return  # too slow, or the resource went away: the client re-watches
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    return
                if next_bookmark is not None and now >= next_bookmark:
                    if hub.rv not in hub.ambiguous:
                        yield writer.bookmark(hub.rv)
                    next_bookmark = now + bookmark_interval
        finally:
            hub.unsubscribe(subscriber)
            on_close()

    return StreamingResponse(stream(), media_type="application/json",
                             headers={"Cache-Control": "no-cache, private",
                                      "X-Content-Type-Options": "nosniff"})
