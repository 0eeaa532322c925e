"""``summary=PATH,...``: counts for a dashboard's badges, not the objects.

``{"apiVersion": "v1", "kind": "Summary", "total": N, "counts": {PATH: {VALUE: N}}}``
over every object the rest of the query selects (namespace, selectors,
filters; never paged). A value counts under its text (``true``, ``3``); a
missing one under ``""``. Values come from the resource's columns, so a badge
refreshed every few seconds parses only what changed.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence

import orjson

from app.query.values import ValueCache
from app.query.fieldpath import FieldPath, parse_path_list, scalar_text
from informer_core.encoded import EncodedObject

__all__ = ["SUMMARY_TAIL", "SummaryError", "parse_summary", "summary_bytes", "summary_head"]

_MAX_PATHS = 16


class SummaryError(ValueError):
    """A ``summary`` list that cannot be parsed."""


def summary_bytes(paths: Sequence[FieldPath], columns: ValueCache,
                  objects: Sequence[EncodedObject], resource_version: str) -> bytes:
    """The Summary document of ``objects``: ``summary_head``, the counts, ``SUMMARY_TAIL``
    (a kept one is made again at a newer version by its head alone)."""
    table = columns.table(paths, objects)
    counts = {}
    for path, values in zip(paths, table):
        counter = Counter(scalar_text(v[0]) if v else "" for v in values)
        counts[path.text] = dict(sorted(counter.items()))
    body = orjson.dumps({"total": len(objects), "counts": counts})
    return summary_head(resource_version) + body[1:]


SUMMARY_TAIL = b"}"


def summary_head(resource_version: str) -> bytes:
    """A Summary document up to its counts, at ``resource_version``."""
    return (b'{"apiVersion":"v1","kind":"Summary","metadata":{"resourceVersion":'
            + orjson.dumps(resource_version) + b"},")


@functools.lru_cache(maxsize=256)
def parse_summary(text: str) -> tuple[FieldPath, ...]:
    """Parse ``PATH,PATH,...`` (no ``*``).

    Raises:
        SummaryError: an empty path, a bad path, too many paths.
    """
    return parse_path_list(text, "summary", _MAX_PATHS, SummaryError)
