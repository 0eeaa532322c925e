"""Request shapes already checked: what a path, a query and an ``Accept`` header resolved to.

Every request for a resource pays a fixed share of Python before its cache is read: the
path parsed, the resource resolved from discovery and its scope checked, the query
parsed, the ``Accept`` header negotiated, the names, options and answer form checked, the
access to authorize built, then the selection, the ETag's digest and the list's keys
composed. For one Pod by name that was most of the application's time (about 16 µs a
request in process, ``bench/notes.md``), and callers repeat a few shapes: a dashboard's
refresh, a controller's relist, a client polling one object. So a shape that passed every
check keeps what it resolved to, and the next request of the same shape — the same
cluster, path, query and ``Accept`` header — starts from there: it is authorized (every
request is, as before) and read.

Only what cannot differ between two requests of one shape is kept: every check after
authorization depends on the shape and the process's settings alone, so a shape that
passed them once passes them again, and one that failed is never kept (its error is made
by the same code each time). What can change is checked on every use: the resource must
still be the one discovery's current view names (a CRD changed or removed since gives a
new view, and the shape is made again). Streams are not kept: they are long, so their
fixed cost is not what limits them. Bounded: at most ``KEPT`` shapes per cluster, and all
are dropped when one more comes (hostile variety of paths and queries cannot grow memory;
a shape is remade with one request's work).
"""

from __future__ import annotations

import hashlib
from typing import Any

from app.kube.access import Access
from app.kube.request import Accept, Query, ResourcePath
from app.query.selection import Selection
from informer_core.store import object_key

__all__ = ["KEPT", "Reading", "RequestShapes", "Shape", "request_headers"]

KEPT = 1024
_LONGEST_KEY = 4096  # a key's path, query and Accept: longer ones are answered, never kept


class Reading:
    """What a shape reads for callers limited to one set of namespaces (or none): the
    selection, and the keys of its answers (the continue tokens' fingerprint, the kept
    lists' key, the ETag's digest)."""

    __slots__ = ("selection", "fingerprint", "list_key", "digest")

    def __init__(self, shape: Shape, namespaces: frozenset[str] | None) -> None:
        query, accept, target = shape.query, shape.accept, shape.target
        self.selection = selection = Selection(target.namespace, query.labels, query.fields,
                                               namespaces, query.filters)
        partition = selection.partition
        fingerprint = (f"{shape.gvr}|{selection.namespace}|{query.label_text}|"
                       f"{query.field_text}")
        if query.view_text or partition:  # what else makes the answer: its tokens are its
            fingerprint += f"|{query.view_text}|{partition}"
        self.fingerprint = fingerprint
        self.list_key = (fingerprint, accept.kind, accept.table_version, accept.as_kind,
                         query.fields_text, query.continue_key, query.limit)
        path, raw_query = shape.path, shape.raw_query
        self.digest = hashlib.blake2b(
            f"{path}?{raw_query.decode('latin-1')}|{accept.kind}{accept.table_version}"
            f"{accept.as_kind}|{partition}".encode(), digest_size=8).hexdigest()


class Shape:
    """One request shape that passed every check: the resource it names, its parsed query
    and answer form, and the access a caller needs for it."""

    __slots__ = ("path", "raw_query", "target", "resource", "gvr", "query", "accept", "access",
                 "view", "key", "_namespaces", "_reading")

    def __init__(self, path: str, raw_query: bytes, target: ResourcePath, resource: Any,
                 query: Query, accept: Accept, access: Access, view: object) -> None:
        self.path, self.raw_query, self.target = path, raw_query, target
        self.resource, self.query, self.accept, self.access = resource, query, accept, access
        self.gvr = resource.gvr  # (made anew by each read of the resource's property)
        self.view = view  # discovery's view the resource was resolved from
        # the store's key of the one object a get names (``None`` for a collection)
        self.key = None if target.name is None else object_key(target.namespace, target.name)
        self._namespaces: frozenset[str] | None = None
        self._reading: Reading | None = None

    def reading(self, namespaces: frozenset[str] | None) -> Reading:
        """The reading for callers limited to ``namespaces`` (the last one asked is kept:
        callers of one shape are most often granted the same)."""
        reading = self._reading
        if reading is None or namespaces != self._namespaces:
            reading = self._reading = Reading(self, namespaces)
            self._namespaces = namespaces
        return reading


class RequestShapes:
    """One cluster's kept shapes, by (path, query string, ``Accept`` header). Used on the
    event loop only."""

    def __init__(self) -> None:
        self._kept: dict[tuple, Shape] = {}
        self.hits = 0

    def get(self, key: tuple, view: object) -> Shape | None:
        """The kept shape of ``key``, if resolved from discovery's current ``view``."""
        shape = self._kept.get(key)
        if shape is None:
            return None
        if shape.view is not view:
            del self._kept[key]
            return None
        self.hits += 1
        return shape

    def keep(self, key: tuple, shape: Shape) -> None:
        path, query, accept = key
        if len(path) + len(query) + len(accept or "") > _LONGEST_KEY:
            return
        if len(self._kept) >= KEPT:
            self._kept.clear()
        self._kept[key] = shape

    def __len__(self) -> int:
        return len(self._kept)


def request_headers(headers: list[tuple[bytes, bytes]]) -> tuple[str | None, str | None, bool]:
    """The headers a read needs — ``Accept``, ``If-None-Match``, and whether ``gzip`` is
    accepted — in one pass over the raw headers (the server gives their names in lower
    case)."""
    accept = if_none_match = None
    gzip = False
    for name, value in headers:
        if name == b"accept" and accept is None:  # the first, as Starlette reads it
            accept = value.decode("latin-1")
        elif name == b"if-none-match" and if_none_match is None:
            if_none_match = value.decode("latin-1")
        elif name == b"accept-encoding":
            gzip = gzip or b"gzip" in value
    return accept, if_none_match, gzip
