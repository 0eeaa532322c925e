"""An object kept as its encoded JSON bytes plus the few fields selection needs.

Parsed JSON costs 5-8x its encoded size in Python; bytes cost about 1x. The
cache therefore keeps each object as ``EncodedObject``: the bytes it will be
served as, and its namespace, name, labels and resourceVersion already parsed,
so that keys, indexes and label selection never decode anything. Whoever wants
the ``dict`` (a lister, a handler, a field selector on an unusual path) decodes
on access; the result is equal to what was stored, never the same object.

Instances are immutable by convention and safe to share between threads.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["EncodedObject", "as_dict", "by_key", "encode", "object_key", "resource_version_of"]

_EMPTY_LABELS: Mapping[str, str] = {}
_intern = sys.intern


def object_key(namespace: str | None, name: str) -> str:
    """The store key of an object: ``"namespace/name"``, or ``"name"`` when cluster-scoped.

    The one place a key is built. A new string either way, so a key never keeps
    alive the parsed document its parts came from.
    """
    return f"{namespace}/{name}" if namespace else name[:1] + name[1:]


def by_key(obj: EncodedObject) -> str:
    """An object's place in a list (lists are in key order, as the API server's are)."""
    return obj.key


class EncodedObject:
    """An object's JSON bytes with its key fields parsed out."""

    __slots__ = ("raw", "namespace", "labels", "resource_version", "key")

    raw: bytes
    namespace: str
    labels: Mapping[str, str]
    resource_version: str
    key: str

    def __init__(self, raw: bytes, obj: Mapping[str, Any] | None = None) -> None:
        """Wrap ``raw``; ``obj`` is its already-parsed form, when the caller has it."""
        if obj is None:
            obj = orjson.loads(raw)
        # (``type() is dict`` first: ``isinstance`` against the ``Mapping`` ABC is a Python
        # call, three of them for every object the informer stores)
        meta = obj.get("metadata") if type(obj) is dict or isinstance(obj, Mapping) else None
        if type(meta) is not dict and not isinstance(meta, Mapping):
            meta = {}
        self.raw = raw
        # Namespaces and label pairs repeat across thousands of objects: intern them.
        namespace = meta.get("namespace") or ""
        self.namespace = _intern(namespace) if isinstance(namespace, str) else str(namespace)
        name = meta.get("name")
        name = name if isinstance(name, str) else ""
        labels = meta.get("labels")
        if labels and (type(labels) is dict or isinstance(labels, Mapping)):
            self.labels = {_intern(str(k)): _intern(str(v)) for k, v in labels.items()}
        else:
            self.labels = _EMPTY_LABELS
        rv = meta.get("resourceVersion")
        self.resource_version = rv if isinstance(rv, str) else ""
        self.key = object_key(self.namespace, name)

    @property
    def name(self) -> str:
        """``metadata.name`` (derived from the key: one object fewer per cached entry)."""
        return self.key.rpartition("/")[2] if self.namespace else self.key

    @staticmethod
    def encode_bytes(obj: Mapping[str, Any]) -> bytes:
        """Return ``obj`` as exact-size JSON bytes (see ``from_dict``)."""
        return memoryview(orjson.dumps(obj)).tobytes()

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> EncodedObject:
        """Encode a parsed object once."""
        # orjson hands back its bytes inside the (larger) buffer it grew while
        # writing — up to 4x the output. A cached object lives long: keep an
        # exact-size copy.
        return cls(memoryview(orjson.dumps(obj)).tobytes(), obj)

    def to_dict(self) -> dict[str, Any]:
        """Decode into a fresh ``dict`` (the caller may keep it; treat it as read-only)."""
        return orjson.loads(self.raw)

    def __getitem__(self, name: str) -> Any:
        """Read a top-level field (decodes; prefer the parsed attributes)."""
        return self.to_dict()[name]

    def get(self, name: str, default: Any = None) -> Any:
        """Read a top-level field like ``dict.get`` (decodes)."""
        return self.to_dict().get(name, default)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EncodedObject):
            return self.raw == other.raw
        if isinstance(other, Mapping):
            return self.to_dict() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"EncodedObject({self.key!r}, rv={self.resource_version!r}, {len(self.raw)} bytes)"


def encode(obj: Mapping[str, Any] | EncodedObject) -> EncodedObject:
    """Return ``obj`` as an ``EncodedObject`` (encoding a ``dict`` once)."""
    if isinstance(obj, EncodedObject):
        return obj
    return EncodedObject.from_dict(obj)


def as_dict(obj: Any) -> Any:
    """Return a ``dict`` for an ``EncodedObject``; anything else unchanged."""
    if isinstance(obj, EncodedObject):
        return obj.to_dict()
    return obj


def resource_version_of(obj: Any) -> str:
    """Return an object's ``metadata.resourceVersion`` ("" if it has none)."""
    if isinstance(obj, EncodedObject):
        return obj.resource_version
    if isinstance(obj, dict):
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            return str(meta.get("resourceVersion") or "")
    return ""
