"""A change event of one resource, as a hub saw it: its wire frames, made once and shared.

An ``Event`` is immutable once published (``app.cache.hub``): every stream that sends it
sends the same object bytes, and a frame joined for one dispatch is shared by every
stream of that dispatch, then dropped (``release``), so the ring keeps only the object's
bytes. ``RecentCopies`` keeps the bytes merged streams make of recent events (a copy
tagged with its cluster), made once for all of them.

Resource versions. An event's ``rv`` is the version it stands at on the watch, which is
its object's own unless the event came out of order (a relist's, or a tombstone): then
it goes out on the watch stamped with the hub's version (``restamped``), so versions on
the wire only increase; ``own`` keeps the change's own version (0: unknown).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import orjson

from app.query.projection import Projection
from informer_core.encoded import EncodedObject

__all__ = ["Event", "RecentCopies", "frames", "parse_rv"]

_NAMES = {"ADDED": b"ADDED", "MODIFIED": b"MODIFIED", "DELETED": b"DELETED",
          "DELETED_OLD": b"DELETED"}
_WATCH_PREFIX = {name: b'{"type":"' + name + b'","object":' for name in set(_NAMES.values())}


def parse_rv(text: str) -> int:
    """Return a resourceVersion as an integer (etcd's are); 0 if it is not one."""
    try:
        value = int(text)
    except (TypeError, ValueError):
        return 0
    return value if value >= 0 else 0


class Event:
    """One change, as the hub saw it; immutable once published."""

    __slots__ = ("seq", "type", "obj", "old", "rv", "own", "hub_id", "exact", "_frames",
                 "_decoded", "_sending")

    def __init__(self, seq: int, type_: str, obj: EncodedObject, old: EncodedObject | None,
                 rv: int, hub_id: str, own: int | None = None) -> None:
        self.seq = seq
        self.type = type_  # ADDED, MODIFIED or DELETED
        self.obj = obj
        self.old = old
        self.rv = rv  # the version it stands at on the watch
        # the version of the change itself (0: unknown — a relist's tombstone)
        self.own = parse_rv(obj.resource_version) if own is None else own
        self.hub_id = hub_id
        self.exact = 0  # the version the view was exactly at right after this event (0: none)
        self._frames: dict[str, bytes] = {}
        self._decoded: dict[str, dict] = {}
        # whole frames, shared by the streams of one dispatch; dropped with it (``release``)
        self._sending: dict[tuple, bytes] | None = {}

    @property
    def id(self) -> str:
        """The SSE id: the version of the point this event left the view at (resumable on any
        process), else ``<hub>.<seq>`` (resumable on this hub only)."""
        return str(self.exact) if self.exact else f"{self.hub_id}.{self.seq}"

    def decoded(self, which: str = "new") -> dict[str, Any]:
        """The object (``new``) or its previous state (``old``) as a dict, decoded once."""
        found = self._decoded.get(which)
        if found is None:
            source = self.obj if which == "new" else self.old
            found = self._decoded[which] = source.to_dict() if source is not None else {}
        return found

    @property
    def restamped(self) -> bool:
        """Whether the event stands at a version other than its object's own (a relist's
        event, found behind newer ones, or a tombstone): see ``object_bytes``."""
        return self.rv != parse_rv(self.obj.resource_version)  # (a tombstone's own is unknown)

    def object_bytes(self, kind: str, fmt: str = "sse") -> bytes:
        """The object as sent for ``kind`` in ``fmt``.

        ``DELETED_OLD`` is the old state at the new version. On the watch
        protocol an object always carries its event's version: a client resumes
        from the last object's ``metadata.resourceVersion`` (client-go does), so
        a relist's event, whose object is older than events already sent, goes
        out stamped with the event's version — versions on the wire only
        increase, and a resume from one gets exactly the rest or a 410. SSE,
        resumed by its exact ids, sends objects as they are.
        """
        stamp = fmt == "watch" and self.restamped
        if kind != "DELETED_OLD" and not stamp:
            return self.obj.raw
        key = f"{kind}|{fmt}" if stamp else kind
        cached = self._frames.get(key)
        if cached is None:
            source = dict(self.decoded("old" if kind == "DELETED_OLD" else "new"))
            meta = dict(source.get("metadata") or {})
            meta["resourceVersion"] = str(self.rv) if stamp else self.obj.resource_version
            source["metadata"] = meta
            cached = self._frames[key] = orjson.dumps(source)
        return cached

    def frame_parts(self, kind: str, fmt: str,
                    projection: Projection | None = None) -> tuple[bytes, bytes, bytes]:
        """Return the event in a wire format (``watch`` or ``sse``) as (prefix, object, suffix).

        The object bytes are the cached ones, shared by every subscriber; a
        writer joins the parts of a whole batch into one buffer. With a
        projection (``fields=``) the projected bytes are made once per
        projection and shared the same way.
        """
        name = _NAMES[kind]
        raw = self.object_bytes(kind, fmt)
        if projection is not None:
            key = f"{kind}|{fmt}|fields={projection.text}"
            projected = self._frames.get(key)
            if projected is None:
                projected = self._frames[key] = projection.raw_of(raw)
            raw = projected
        if fmt == "watch":
            return _WATCH_PREFIX[name], raw, b"}\n"
        return (b"id: " + self.id.encode() + b"\nevent: " + name + b"\ndata: ", raw, b"\n\n")

    def frame(self, kind: str, fmt: str, projection: Projection | None = None) -> bytes:
        """The whole event in a wire format: ``frame_parts`` joined, once for every stream
        the dispatch sends it to (after it, each caller joins its own: the ring keeps no
        frames, which would double what it holds)."""
        sending = self._sending
        if sending is None:
            return b"".join(self.frame_parts(kind, fmt, projection))
        key = (kind, fmt, projection.text if projection is not None else "")
        found = sending.get(key)
        if found is None:
            found = sending[key] = b"".join(self.frame_parts(kind, fmt, projection))
        return found

    def release(self) -> None:
        """Drop decoded copies and whole frames once fan-out is done (the ring keeps only
        the object's bytes)."""
        self._decoded.clear()
        self._sending = None


def frames(batch: list[tuple[Event, str]], fmt: str,
           projection: Projection | None = None) -> bytes:
    """A batch of events in a wire format (``watch`` or ``sse``), as one buffer: a lone
    event's whole frame, shared with every stream of its dispatch (``Event.frame``); a
    longer batch's parts joined once, never each frame joined first."""
    if len(batch) == 1:
        event, kind = batch[0]
        return event.frame(kind, fmt, projection)
    parts: list[bytes] = []
    for event, kind in batch:
        parts.extend(event.frame_parts(kind, fmt, projection))
    return b"".join(parts)


class RecentCopies:
    """Bytes several streams make of the same recent event, made once and kept briefly.

    A merged stream sends each cluster's object as a tagged copy (its cluster in an
    annotation); every merged stream on the same hub sends the same copy, so it is made
    once. It is not kept on the event: the ring holds up to its size of events for
    resumes, and a copy beside each would double what the ring holds, while streams that
    keep up all ask within a few events of the head. So the last ``limit`` copies are
    kept, oldest dropped first; a stream resuming from further back makes its own.
    """

    __slots__ = ("_copies", "_limit")

    def __init__(self, limit: int = 512) -> None:
        self._copies: OrderedDict[tuple[int, str], bytes] = OrderedDict()
        self._limit = limit

    def get(self, event: Event, key: str, make: Any) -> bytes:
        """``make()`` for ``event`` under ``key``: the copy made before, if still kept."""
        found = self._copies.get((event.seq, key))
        if found is None:
            found = self._copies[(event.seq, key)] = make()
            if len(self._copies) > self._limit:
                self._copies.popitem(last=False)
        return found

    def __len__(self) -> int:
        return len(self._copies)
