"""A change as people read it: what the object became, and an RFC 6902 patch from before.

The patch is ``jsonpatch``'s (python-json-patch): paths escaped as JSON Pointer says (``~1``
for a ``/`` in a label's key), lists diffed by index, each operation one ``kubectl``-style
reader can follow. It is made from the previous stored state of the same object, so it is
exactly what changed between two versions the gateway saw; a change whose previous state
was never kept (the first the store holds of an object) has none.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import jsonpatch
import orjson

from app.history.store import TYPES, Change

__all__ = ["change_item", "rfc3339", "rfc6902"]


def rfc6902(before: bytes, after: bytes) -> list[dict[str, Any]]:
    """The RFC 6902 operations that make ``before`` (JSON) ``after``."""
    return jsonpatch.make_patch(orjson.loads(before), orjson.loads(after)).patch


def rfc3339(when: float) -> str:
    """A received time as the API server writes times (``2026-12-05T11:29:04.123456Z``)."""
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def change_item(row: Change, before: bytes | None, with_object: bool = True) -> dict[str, Any]:
    """One change of the history's answer: ``type``, ``resourceVersion``, ``time``,
    ``object`` (unless not asked for) and ``patch`` (when a previous state was kept)."""
    item: dict[str, Any] = {"type": TYPES[row.kind], "resourceVersion": str(row.rv),
                            "time": rfc3339(row.received)}
    if with_object:
        item["object"] = orjson.Fragment(row.raw)
    if before is not None:
        item["patch"] = rfc6902(before, row.raw)
    return item
