"""``fields=PATH,...``: items with only the fields a dashboard shows.

A dashboard row needs a name, a phase, a node, an age — a few hundred bytes
of a Pod's several thousand. Each item keeps what identifies it
(``apiVersion``, ``kind``, ``metadata.name``, ``metadata.namespace``,
``metadata.resourceVersion``) and the named paths, each in its place in the
object's structure; a list index keeps a one-element list (several indexes
into one list keep their elements in order); a path the object lacks is left
out. An object's projected bytes are kept per version (``Projection``), so a
list refreshed every few seconds encodes only what changed.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import orjson

from app.query.budget import QueryMemory
from app.query.fieldpath import FieldPath, parse_path_list
from informer_core.encoded import EncodedObject

__all__ = ["Projection", "ProjectionError", "parse_fields"]

_IDENTITY = (("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace"),
             ("metadata", "resourceVersion"))
_MAX_PATHS = 64
_ENTRY = 150  # bytes a kept projection costs beside its own: its tuple and dict slot


class ProjectionError(ValueError):
    """A ``fields`` list that cannot be parsed."""


class _Indexed(dict):
    """A list under construction: index -> element, turned into a list at the end."""


class Projection:
    """Parsed ``fields``, with each object's projected bytes kept per version."""

    def __init__(self, text: str, paths: tuple[FieldPath, ...],
                 memory: QueryMemory | None = None) -> None:
        self.text = text
        self.paths = paths
        self._segments = _IDENTITY + tuple(p.segments for p in paths)
        self._kept: dict[str, tuple[str, bytes]] = {}
        self.memory = memory if memory is not None else QueryMemory()
        self._key = ("projection", id(self))

    def forget(self) -> None:
        """Drop every kept projection (the budget let them go, or its engine did)."""
        self._kept = {}
        self.memory.release(self._key)

    def project(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The projected form of a decoded object."""
        out: dict[str, Any] = {}
        for segments in self._segments:
            _place(obj, segments, out)
        return _finish(out)

    def bytes_of(self, obj: EncodedObject) -> bytes:
        """The projected JSON of a cached object, kept for its version."""
        hit = self._kept.get(obj.key)
        if hit is not None and hit[0] == obj.resource_version:
            return hit[1]
        raw = orjson.dumps(self.project(orjson.loads(obj.raw)))
        self._kept[obj.key] = (obj.resource_version, raw)
        size = len(raw) - (len(hit[1]) if hit is not None else -_ENTRY)
        self.memory.charge(self._key, size, self._dropped)
        return raw

    def _dropped(self) -> None:
        self._kept = {}

    def kept_bytes(self, objects: Sequence[EncodedObject]) -> tuple[list[bytes | None], list[int]]:
        """The kept projected bytes of ``objects`` (None where not kept for the object's
        version), and the indexes of those missing."""
        kept = self._kept
        items: list[bytes | None] = []
        missing: list[int] = []
        for i, obj in enumerate(objects):
            hit = kept.get(obj.key)
            if hit is not None and hit[0] == obj.resource_version:
                items.append(hit[1])
            else:
                items.append(None)
                missing.append(i)
        return items, missing

    def raw_of(self, raw: bytes) -> bytes:
        """The projected JSON of an object's bytes (a stream's event), not kept."""
        return orjson.dumps(self.project(orjson.loads(raw)))

    def forget_absent(self, present: int) -> None:
        """Drop kept bytes of deleted objects once they outnumber the objects."""
        if len(self._kept) > 2 * present + 1024:
            self.forget()


def _place(source: Any, segments: tuple[str, ...], out: dict) -> None:
    """Copy the value at ``segments`` from ``source`` into ``out``, structure kept (nothing
    is created for a path the object lacks)."""
    steps: list[tuple[Any, Any]] = []  # (key in the container, the child found there)
    node = source
    for segment in segments:
        if isinstance(node, dict) and segment in node:
            key: Any = segment
        elif isinstance(node, list) and segment.isdigit() and int(segment) < len(node):
            key = int(segment)
        else:
            return
        node = node[key]
        steps.append((key, node))
    target = out
    for key, child in steps[:-1]:
        existing = target.get(key)
        if existing is None:
            existing = target[key] = _Indexed() if isinstance(child, list) else {}
        elif existing is child or not isinstance(existing, dict):
            return  # the whole value is already copied, this part with it
        target = existing
    key, value = steps[-1]
    target[key] = value


def _finish(node: Any) -> Any:
    if isinstance(node, _Indexed):
        return [_finish(node[i]) for i in sorted(node)]
    if isinstance(node, dict) and type(node) is dict:
        return {k: _finish(v) if isinstance(v, dict) else v for k, v in node.items()}
    return node


@functools.lru_cache(maxsize=256)
def parse_fields(text: str) -> tuple[FieldPath, ...]:
    """Parse ``PATH,PATH,...`` (no ``*``).

    Raises:
        ProjectionError: an empty path, a bad path, too many paths.
    """
    return parse_path_list(text, "fields", _MAX_PATHS, ProjectionError)
