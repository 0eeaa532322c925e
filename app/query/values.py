"""Values of arbitrary paths, read once per object version and kept.

The cache holds objects as the API server's bytes; ``filter``, ``sortBy``,
``fields`` and ``summary`` may name any path, so answering them means parsing
objects. A dashboard repeats its query every few seconds, and between two
refreshes few objects change: each resource keeps, per path asked for, the
value every object had at the version it was read (``PathValues``) and, per
``fields`` list, each object's projected bytes (``Projection``). A repeated
query parses only the objects that changed since. What is not asked for
``IDLE`` seconds is dropped, and at most ``MAX_COLUMNS`` paths are kept, so a
caller inventing paths cannot grow memory without bound.

Values are read and filled on the event loop and, for large first-time
extractions, on worker threads (``app.bridge``): the table of paths is
guarded by a lock; a column's entries are immutable tuples set and read one
at a time (atomic under the GIL), so a reader never sees half an entry.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import orjson

from app.query.budget import QueryMemory
from app.query.comparison import EMPTY, sort_key
from app.query.fieldpath import FieldPath, scalar_text
from informer_core.encoded import EncodedObject

__all__ = ["PathValues", "ValueCache"]

_SCALARS = (str, int, float, bool, type(None))
_ENTRY = 200  # bytes an entry costs beside its values: its tuples, list and dict slot


def _size(values: list[Any]) -> int:
    """An estimate of one entry's bytes (its key and version are the object's own)."""
    return _ENTRY + sum(len(v) if v.__class__ is str else 32 for v in values)

MAX_COLUMNS = 64
IDLE = 600.0
_LABELS = ("metadata", "labels")


class PathValues:
    """One path's values per object key, each with the version it was read at.

    Values are scalars: a path reaching an object or a list keeps its JSON text (which
    is what filters, sorting and counts compare it as), never the decoded subtree — a
    filter over ``spec`` must not keep a decoded copy of every object (6.4x its bytes).
    """

    __slots__ = ("path", "values", "used")

    def __init__(self, path: FieldPath) -> None:
        self.path = path
        self.values: dict[str, tuple[str, list[Any], tuple[int, Any]]] = {}  # rv, values, sort key
        self.used = time.monotonic()

    def fast(self) -> Any:
        """A reader that needs no parse (name, namespace, a label), or None."""
        segments = self.path.segments
        if segments == ("metadata", "name"):
            return lambda o: [o.name]
        if segments == ("metadata", "namespace"):
            return lambda o: [o.namespace] if o.namespace else []
        if segments == ("metadata", "resourceVersion"):
            return lambda o: [o.resource_version]
        if len(segments) == 3 and segments[:2] == _LABELS and segments[2] != "*":
            key = segments[2]
            return lambda o: [o.labels[key]] if key in o.labels else []
        return None


class ValueCache:
    """The columns of one resource's cache, their bytes charged to the process's budget."""

    def __init__(self, memory: QueryMemory | None = None) -> None:
        self._columns: OrderedDict[FieldPath, PathValues] = OrderedDict()
        self._lock = threading.Lock()  # the loop and a worker thread may both look paths up
        self.parsed = 0  # objects parsed to fill columns, for tests and metrics
        self.memory = memory if memory is not None else QueryMemory()

    def __len__(self) -> int:
        return len(self._columns)

    def column(self, path: FieldPath) -> PathValues:
        """The column of ``path``, made on first use; drops what went unused."""
        now = time.monotonic()
        with self._lock:
            found = self._columns.get(path)
            if found is None:
                found = self._columns[path] = PathValues(path)
                self._evict(now)
            else:
                self._columns.move_to_end(path)
        found.used = now
        return found

    def _evict(self, now: float) -> None:
        """Caller holds ``self._lock``."""
        while len(self._columns) > MAX_COLUMNS:
            path, _ = self._columns.popitem(last=False)
            self.memory.release(self._key(path))
        for path in [p for p, c in self._columns.items() if now - c.used > IDLE]:
            del self._columns[path]
            self.memory.release(self._key(path))

    def _key(self, path: FieldPath) -> tuple:
        return ("values", id(self), path)

    def _drop(self, path: FieldPath) -> None:
        """The budget let this column go: it is read again when next asked for."""
        with self._lock:
            self._columns.pop(path, None)

    def table(self, paths: Sequence[FieldPath], objects: Sequence[EncodedObject]) -> list[list[list[Any]]]:
        """For each path, each object's values there (a list: empty when missing).

        An object is parsed at most once per call, and only when some path's
        column lacks its current version.
        """
        return [column for column, _ in self._read(paths, objects, keys=False)]

    def sort_keys(self, path: FieldPath, objects: Sequence[EncodedObject]) -> list[tuple[int, Any]]:
        """Each object's sort key at ``path`` (its first value's place in ``app.query.comparison``)."""
        return self._read([path], objects, keys=True)[0][1]

    def _read(self, paths: Sequence[FieldPath], objects: Sequence[EncodedObject],
              keys: bool) -> list[tuple[list[list[Any]], list[Any]]]:
        columns = [self.column(p) for p in paths]
        out: list[tuple[list[list[Any]], list[Any]]] = []
        pending = []  # columns that need the kept entries
        for column in columns:
            reader = column.fast()
            if reader is not None:  # name, namespace, a label: straight from the cache
                values = [reader(o) for o in objects]
                out.append((values, [sort_key(v[0]) if v else EMPTY for v in values] if keys else []))
            else:
                out.append(([], []))
                pending.append((column, out[-1]))
        if not pending:
            return out
        loads = orjson.loads
        parsed = 0
        grown = [0] * len(pending)  # bytes each column gained
        for obj in objects:
            decoded = None
            rv = obj.resource_version
            for i, (column, (values, sort_keys)) in enumerate(pending):
                hit = column.values.get(obj.key)
                if hit is None or hit[0] != rv:
                    if decoded is None:
                        decoded = loads(obj.raw)
                        parsed += 1
                    found = [v if v.__class__ in _SCALARS else scalar_text(v)
                             for v in column.path.values(decoded)]
                    if hit is not None:
                        grown[i] -= _size(hit[1])
                    hit = (rv, found, sort_key(found[0]) if found else EMPTY)
                    column.values[obj.key] = hit
                    grown[i] += _size(found)
                values.append(hit[1])
                if keys:
                    sort_keys.append(hit[2])
        self.parsed += parsed
        for (column, _), size in zip(pending, grown):
            if size:
                path = column.path
                self.memory.charge(self._key(path), size, lambda p=path: self._drop(p))
        return out

    def stale(self, paths: Sequence[FieldPath], objects: Sequence[EncodedObject]) -> int:
        """How many objects a ``table`` call would have to parse (an estimate of its cost)."""
        with self._lock:
            columns = [self._columns.get(p) for p in paths]
        if any(column is None for column in columns):
            return len(objects)
        kept = [column for column in columns if column.fast() is None]  # the others need no parse
        count = 0
        for obj in objects:
            for column in kept:
                hit = column.values.get(obj.key)
                if hit is None or hit[0] != obj.resource_version:
                    count += 1
                    break
        return count

    def forget_absent(self, present: int) -> None:
        """Drop entries of deleted objects once a column holds far more keys than objects."""
        with self._lock:
            columns = list(self._columns.values())
        for column in columns:
            if len(column.values) > 2 * present + 1024:
                column.values = {}
                self.memory.release(self._key(column.path))
