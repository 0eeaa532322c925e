"""The Kubernetes watch protocol (``?watch=true``): the watch encoder of ``app.streams.pipeline``.

One JSON event per line. With ``resourceVersion`` unset or ``"0"`` the stream
starts with an ``ADDED`` event for every current matching object; with a
version it resumes after it, on whichever process the client reaches (see
``app.cache.hub``: consistent points); a version older than the hub's ring (or one
that no point covers) gets an ``ERROR`` event with a 410 ``Status``
— client-go relists by itself, the official Python client raises
``ApiException(410)``, exactly as against the API server. ``BOOKMARK`` events
come every ``bookmark_interval`` seconds when asked for; ``timeoutSeconds``
ends the stream. A subscriber too slow to keep up is disconnected (as the API
server's watch cache does) and resumes from its last version.

Watch-list (KEP-3157; what every client-go 1.35 reflector asks first):
``sendInitialEvents=true&resourceVersionMatch=NotOlderThan`` sends the selected
state as ``ADDED`` events — at least as new as ``resourceVersion`` when one is
given (waited for as a list waits) — then, with ``allowWatchBookmarks``, one
``BOOKMARK`` annotated ``k8s.io/initial-events-end: "true"`` at the state's
version, then live events: the client has its list and its watch from one
request. ``sendInitialEvents=false`` is a watch without the state: from
``resourceVersion``, or from now without one. Other combinations are the API
server's 422 (``app.cache.requested_version``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import orjson
from starlette.responses import Response

from app.cache.resources import ResourceCache
from app.cache.event import Event, frames, parse_rv
from app.cache.subscriber import Subscriber
from app.cache.requested_version import FRESHNESS_WAIT, fresh_enough
from app.query.projection import Projection
from app.kube.partial import answer_type, partial
from app.kube.request import Accept, Query
from app.kube.status import StatusError, status_body
from app.kube.table import table_bytes
from app.streams.past import Past

__all__ = ["INITIAL_EVENTS_END", "WatchEncoder"]

_CHUNK = 256  # objects per write of the initial state
INITIAL_EVENTS_END = "k8s.io/initial-events-end"  # the annotation of watch-list's bookmark


def _error_line(code: int, message: str, reason: str) -> bytes:
    return orjson.dumps({"type": "ERROR", "object": status_body(code, message, reason)}) + b"\n"


class WatchEncoder:
    """Writes a watch: JSON objects or Table rows, one event per line."""

    name = "watch"
    media_type = "application/json"
    headers = {"Cache-Control": "no-cache, private", "X-Content-Type-Options": "nosniff"}

    def __init__(self, accept: Accept, query: Query, bookmark_interval: float) -> None:
        self.accept = accept
        self.projection: Projection | None = None  # fields= (not on Table rows)
        self.query = query
        self.headers_sent = False
        self.entry: ResourceCache | None = None  # set by begin
        self.subscriber: Subscriber | None = None  # set by begin
        self._interval = bookmark_interval
        self._next_bookmark = time.monotonic() + bookmark_interval if query.allow_bookmarks else None

    # -- the stream's parts ----------------------------------------------------------

    def refuse(self, message: str) -> Response:
        raise StatusError(429, message, "TooManyRequests", headers={"Retry-After": "1"})

    async def catch_up(self, entry: ResourceCache) -> None:
        if self.query.send_initial_events:  # a state not older than the version: as a list
            await fresh_enough(entry.hub, self.query, listing=False)
            return
        version = parse_rv(self.query.resource_version)
        if version > entry.hub.rv:
            await entry.hub.placed(version, FRESHNESS_WAIT)

    def resumes_from(self) -> int:
        if self.query.send_initial_events:
            return 0
        return parse_rv(self.query.resource_version)

    def begin(self, entry: ResourceCache, subscriber: Subscriber,
              past: Past | None = None) -> tuple[Iterable[bytes], bool]:
        """All current objects for no version or ``"0"``; else the events after it (from the
        history's ``past`` where the ring no longer has them), or 410."""
        self.entry = entry
        self.subscriber = subscriber
        hub = entry.hub
        if self.query.fields_paths is not None and self.accept.kind != "table":
            self.projection = entry.queries.projection(self.query.fields_text, self.query.fields_paths)
        version = self.query.resource_version
        initial = self.query.send_initial_events
        if initial or (initial is None and version in ("", "0")):
            objects = entry.queries.snapshot(hub, subscriber.selection)
            # the state's version: where the client's informer stands once it has the state
            end = (hub.exact if hub.exact is not None else hub.rv) if initial else None

            def state() -> Iterable[bytes]:
                for i in range(0, len(objects), _CHUNK):
                    yield self.snapshot(objects[i:i + _CHUNK])
                if end is not None and self.query.allow_bookmarks:
                    yield self.bookmark(end, initial_events_end=True)

            return state(), True
        if version in ("", "0"):  # sendInitialEvents=false: from now, without the state
            return [], True
        events = hub.events_after_rv(parse_rv(version), watch=True)
        if events is None and past is not None:
            tail = past.tail(hub)
            if tail is not None:  # the store's changes, read as they are sent, then the ring's
                missed = subscriber.replay(tail)
                return [past.replay(subscriber, self.events),
                        *([self.events(missed)] if missed else [])], True
        if events is None and hub.ahead_of(parse_rv(version)):
            subscriber.since = parse_rv(version)  # given by another process: it is ahead
            return [], True
        if events is None:
            return [_error_line(410, f"too old resource version: {version} ({hub.oldest})",
                                "Expired")], False
        missed = subscriber.replay(events)
        return ([self.events(missed)] if missed else []), True

    def next_tick(self, now: float) -> float | None:
        return self._next_bookmark

    def tick(self, now: float, idle: bool) -> bytes | None:
        if self._next_bookmark is None or now < self._next_bookmark:
            return None
        if self.subscriber is not None and self.subscriber.waiting:
            return None  # events came while the last ones were sent: a bookmark would pass them
        self._next_bookmark = now + self._interval
        exact = self.entry.hub.exact
        return None if exact is None else self.bookmark(exact)

    def ended(self, why: str) -> bytes | None:
        return None  # too slow, gone or stopping: the client re-watches from its last version

    def refused(self, error: StatusError) -> bytes:
        return orjson.dumps({"type": "ERROR", "object": error.body()}) + b"\n"

    # -- bytes -------------------------------------------------------------------------

    @property
    def fanout_key(self) -> tuple | None:
        """What makes ``events`` the same bytes for every stream of a selection (``None``:
        tables and metadata, made per stream)."""
        if self.accept.kind in ("meta", "table"):
            return None
        return ("watch", self.projection.text if self.projection is not None else "")

    def events(self, batch: list[tuple[Event, str]]) -> bytes:
        if self.accept.kind == "meta":
            version = self.accept.table_version
            return b"".join(
                b'{"type":"' + (b"DELETED" if kind == "DELETED_OLD" else kind.encode())
                + b'","object":' + partial(event.object_bytes(kind, "watch"), version) + b"}\n"
                for event, kind in batch)
        if self.accept.kind != "table":
            return frames(batch, "watch", self.projection)
        lines = []
        for event, kind in batch:
            obj = orjson.loads(event.object_bytes(kind, "watch"))
            name = "DELETED" if kind == "DELETED_OLD" else kind
            lines.append(self._table_line(name, obj))
        return b"".join(lines)

    def snapshot(self, objects: list) -> bytes:
        if self.accept.kind == "meta":
            version = self.accept.table_version
            return b"".join(b'{"type":"ADDED","object":' + partial(o.raw, version) + b"}\n"
                            for o in objects)
        if self.accept.kind != "table":
            project = self.projection
            return b"".join(b'{"type":"ADDED","object":'
                            + (o.raw if project is None else project.bytes_of(o)) + b"}\n"
                            for o in objects)
        return b"".join(self._table_line("ADDED", o.to_dict()) for o in objects)

    def _table_line(self, kind: str, obj: dict) -> bytes:
        table = table_bytes([obj], self.entry.printer, table_version=self.accept.table_version,
                            include=self.query.include_object, headers=not self.headers_sent,
                            resource_version=obj.get("metadata", {}).get("resourceVersion", ""))
        self.headers_sent = True
        return b'{"type":"' + kind.encode() + b'","object":' + table + b"}\n"

    def bookmark(self, rv: int, initial_events_end: bool = False) -> bytes:
        res = self.entry.resource
        meta: dict = {"resourceVersion": str(rv)}
        if initial_events_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        kind, api_version = answer_type(res, self.accept, listing=False)
        return orjson.dumps({"type": "BOOKMARK", "object": {
            "kind": kind, "apiVersion": api_version, "metadata": meta}}) + b"\n"


