"""The history store: every change a cluster's caches saw, kept in SQL, read back exactly.

One schema, two engines (``app.history.sqlite_store``, embedded; ``app.history.postgres_store``,
shared by replicas). What it holds, per cluster and resource:

- ``kcg_changes``: one row per change of an object — its version (etcd's revision, the
  API server's ``resourceVersion``), type, the time the gateway received it, the object's
  JSON as the cache held it, and ``replaced_at``: the version of the object's next change
  (``KEPT``, the largest version there is, while none came). The state at a version ``N``
  is then the rows with ``rv <= N < replaced_at`` that are not deletions: one indexed range,
  whatever the age of the objects in it.
- ``kcg_spans``: the versions at which the rows are exactly the server's state (a span
  begins where a cache listed, and grows with every change it saw after). A version in no
  span is one the store cannot answer for: 410, as the API server says of a compacted one.
- ``kcg_clusters``: the identity of the cluster each name was written for (its ``kube-system``
  namespace's UID), so that a store is never read or written for another cluster.

Idempotence. A change is keyed by (cluster, resource, namespace, name, version): written
twice — a batch retried after a store came back, two replicas seeing the same change — it is
one row. ``replaced_at`` is computed from the rows themselves (the next and the previous
version of the same object), not from the order writes arrive in, so writers that race or
arrive late leave the same rows; on PostgreSQL the writers of one cluster still take turns
(an advisory lock per cluster), since two transactions each blind to the other's row would
each leave its own row unreplaced.

Who may read it: the gateway alone (its file ``0600``; PostgreSQL's role and password are
the operator's); a caller reads the past through the HTTP paths, authorized as the list or
get of that resource (``app.http.resources``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

from informer_core.encoded import EncodedObject

__all__ = ["ADDED", "DELETED", "KEPT", "MODIFIED", "TYPES", "Baseline", "Change", "Span", "ForeignStore",
           "HistoryStore", "StoreUnavailable", "redacted"]

ADDED, MODIFIED, DELETED = 1, 2, 3
TYPES = {ADDED: "ADDED", MODIFIED: "MODIFIED", DELETED: "DELETED"}
KEPT = (1 << 63) - 1  # ``replaced_at`` of a row no later change replaced (BIGINT's largest)
SCHEMA = "1"


class StoreUnavailable(Exception):
    """The store cannot be read or written now (down, locked, full, or not ours)."""


class ForeignStore(StoreUnavailable):
    """The store was written for another cluster of the same name: never mixed."""


class Change(NamedTuple):
    """One change, to write or read back: ``kind`` ADDED/MODIFIED/DELETED, the object's key
    parts, its JSON.

    A tuple, not a dataclass: one is made on the event loop for every change a hub delivers
    (a frozen dataclass's ``__init__`` cost 1 µs of the recorder's 3 there)."""

    kind: int
    rv: int
    namespace: str
    name: str
    received: float
    raw: bytes
    previous: int = 0  # the version of the object's change before it, when the writer knows it


class Span(NamedTuple):
    """The store is exact at every version from ``lo`` to ``hi`` (the changes before it say so),
    as the gateway knew at ``at`` (0: when written)."""

    lo: int
    hi: int
    at: float = 0.0


@dataclass(frozen=True, slots=True)
class Baseline:
    """A resource's whole state at ``version`` (a list's): the cache's ``EncodedObject``s, as
    received at ``received`` (0: when written) — the time of the changes it is written as,
    which orders them among the changes received after it."""

    version: int
    objects: Sequence[EncodedObject]
    received: float = 0.0


def redacted(url: str) -> str:
    """``url`` with any password replaced, for logs and ``/readyz?verbose``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, ""))


class HistoryStore:
    """The schema and its statements, over a DB-API connection an engine makes.

    Writes happen on one thread (``app.history.writer``); reads on any, each thread with a
    connection of its own. Subclasses give ``_connect``, the statements' differences
    (``_UPSERT_SPAN``, the index and lock statements) and ``size_bytes``.
    """

    engine = ""
    param = "?"  # the driver's placeholder
    _BLOB = "BLOB"
    _REAL = "REAL"

    def __init__(self, url: str) -> None:
        self.url = url
        self._local = threading.local()
        self._connections: list[Any] = []
        self._lock = threading.Lock()

    # -- connections ----------------------------------------------------------------

    def _connect(self) -> Any:
        raise NotImplementedError

    def connection(self) -> Any:
        """This thread's connection, made on first use."""
        found = getattr(self._local, "connection", None)
        if found is None:
            try:
                found = self._connect()
            except self._driver_errors() as exc:
                raise StoreUnavailable(f"cannot connect to {self.describe()}: {exc}") from None
            self._local.connection = found
            with self._lock:
                self._connections.append(found)
        return found

    def forget_connection(self) -> None:
        """Drop this thread's connection (after an error: the next use connects again)."""
        found = getattr(self._local, "connection", None)
        self._local.connection = None
        if found is not None:
            with self._lock:
                if found in self._connections:
                    self._connections.remove(found)
            try:
                found.close()
            except Exception:  # noqa: BLE001 - already broken
                pass

    def close(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            try:
                connection.close()
            except Exception:  # noqa: BLE001 - closing what may be broken
                pass

    def _driver_errors(self) -> tuple[type[BaseException], ...]:
        """The errors the engine's driver raises for the store (not for our own mistakes)."""
        raise NotImplementedError

    def _transaction(self, connection: Any) -> Any:
        return connection  # sqlite3's: commits on leaving, rolls back on an error

    def describe(self) -> str:
        return redacted(self.url)

    def _sql(self, text: str) -> str:
        return text if self.param == "?" else text.replace("?", self.param)

    def _broken(self, connection: Any) -> bool:
        """Whether ``connection`` itself was lost (its server restarted, failed over, ended it),
        as opposed to a statement failing on a connection that still works."""
        return False

    def _run(self, fn: Any) -> Any:
        """Run ``fn(cursor)`` in one transaction on this thread's connection.

        A connection kept from before that turns out lost is replaced and the transaction
        run once more on the new one (each thread keeps its own: after a server restart each
        would otherwise fail its next read once). Running twice is safe: every write is keyed,
        so a transaction that did commit before the loss writes nothing new the second time.
        """
        for last in (False, True):
            connection = self.connection()
            try:
                with self._transaction(connection):
                    cursor = connection.cursor()
                    try:
                        return fn(cursor)
                    finally:
                        cursor.close()
            except self._driver_errors() as exc:  # said as ours; a bug of ours stays a bug
                self.forget_connection()
                if not last and self._broken(connection):
                    continue
                raise StoreUnavailable(f"{self.describe()}: {type(exc).__name__}: {exc}") \
                    from None
        raise AssertionError("unreachable")

    # -- schema ---------------------------------------------------------------------

    def create(self) -> None:
        """Create the tables where they are missing (a store is made on first start)."""
        blob, real = self._BLOB, self._REAL

        def create(cursor: Any) -> None:
            for statement in (
                "CREATE TABLE IF NOT EXISTS kcg_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
                "CREATE TABLE IF NOT EXISTS kcg_clusters (name TEXT PRIMARY KEY, "
                "uid TEXT NOT NULL, since " + real + " NOT NULL)",
                "CREATE TABLE IF NOT EXISTS kcg_changes ("
                " cluster TEXT NOT NULL, resource TEXT NOT NULL, namespace TEXT NOT NULL,"
                " name TEXT NOT NULL, rv BIGINT NOT NULL, kind SMALLINT NOT NULL,"
                " replaced_at BIGINT NOT NULL, received " + real + " NOT NULL,"
                " object " + blob + " NOT NULL,"
                " PRIMARY KEY (cluster, resource, namespace, name, rv))",
                "CREATE INDEX IF NOT EXISTS kcg_changes_by_version "
                "ON kcg_changes (cluster, resource, rv)",
                # the state at a version: rows replaced after it (the range), changed at or
                # before it and not deletions (checked in the index: only matches are read)
                "CREATE INDEX IF NOT EXISTS kcg_changes_by_replacement "
                "ON kcg_changes (cluster, resource, replaced_at, rv, kind)",
                "CREATE INDEX IF NOT EXISTS kcg_changes_by_time ON kcg_changes (received)",
                "CREATE TABLE IF NOT EXISTS kcg_spans (cluster TEXT NOT NULL,"
                " resource TEXT NOT NULL, lo BIGINT NOT NULL, hi BIGINT NOT NULL,"
                " at " + real + " NOT NULL, PRIMARY KEY (cluster, resource, lo))",
            ):
                cursor.execute(statement)
            cursor.execute(self._sql("SELECT value FROM kcg_meta WHERE name = 'schema'"))
            found = cursor.fetchone()
            if found is None:
                cursor.execute(self._sql("INSERT INTO kcg_meta (name, value) VALUES ('schema', ?)"),
                               (SCHEMA,))
            elif found[0] != SCHEMA:
                raise StoreUnavailable(f"{self.describe()} holds history of schema {found[0]}, "
                                       f"this gateway writes schema {SCHEMA}")

        self._run(self._locked_schema(create))

    def _locked_schema(self, fn: Any) -> Any:
        return fn  # PostgreSQL takes a lock first: two replicas may create at once

    def claim(self, cluster: str, uid: str) -> None:
        """Bind ``cluster`` to the cluster whose identity is ``uid`` (first use), or check it.

        Raises:
            ForeignStore: the store holds ``cluster``'s history for another cluster.
        """
        def claim(cursor: Any) -> None:
            cursor.execute(self._sql("SELECT uid FROM kcg_clusters WHERE name = ?"), (cluster,))
            found = cursor.fetchone()
            if found is None:
                cursor.execute(self._sql(
                    "INSERT INTO kcg_clusters (name, uid, since) VALUES (?, ?, ?) "
                    "ON CONFLICT (name) DO NOTHING"), (cluster, uid, time.time()))
                cursor.execute(self._sql("SELECT uid FROM kcg_clusters WHERE name = ?"), (cluster,))
                found = cursor.fetchone()
            if found[0] != uid:
                raise ForeignStore(
                    f"{self.describe()} holds the history of another cluster named {cluster!r} "
                    f"(its kube-system namespace has UID {found[0]}, this one's is {uid}): "
                    f"give this cluster a store of its own, or another name")

        self._run(claim)

    # -- writing (the writer's thread) -------------------------------------------------

    def _lock_cluster(self, cursor: Any, cluster: str) -> None:
        """Take the cluster's write turn for the transaction (PostgreSQL; SQLite has one writer)."""

    def write(self, cluster: str, batch: Sequence[tuple[str, Any]], received: float) -> int:
        """Write a batch of ``(resource, op)`` in one transaction, in order: ``op`` a
        ``Change``; a ``Span`` the changes before it make exact; or a ``Baseline``, a
        resource's whole state as a list found it, written as the changes that make the
        store's state that (``received``: the time of those without their own). Returns the
        changes written."""
        def write(cursor: Any) -> int:
            self._lock_cluster(cursor, cluster)
            run: list[Change] = []
            run_of = ""
            written = 0
            for resource, op in batch:
                if isinstance(op, Change):
                    if resource != run_of and run:
                        written += self._write_changes(cursor, cluster, run_of, run)
                        run = []
                    run_of = resource
                    run.append(op)
                    continue
                if run:
                    written += self._write_changes(cursor, cluster, run_of, run)
                    run = []
                if isinstance(op, Baseline):
                    at = op.received or received
                    found = self._differences(cursor, cluster, resource, op, at)
                    written += self._write_changes(cursor, cluster, resource, found)
                    lo = hi = op.version
                else:
                    lo, hi, at = op.lo, op.hi, op.at or received
                cursor.execute(self._sql(self._UPSERT_SPAN), (cluster, resource, lo, hi, at))
            if run:
                written += self._write_changes(cursor, cluster, run_of, run)
            return written

        return self._run(write)

    # a span's ``at``: when its ``hi`` was last known the server's state (a restart's age)
    _UPSERT_SPAN = ("INSERT INTO kcg_spans (cluster, resource, lo, hi, at) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (cluster, resource, lo) DO UPDATE SET "
                    "hi = CASE WHEN excluded.hi > kcg_spans.hi THEN excluded.hi ELSE kcg_spans.hi END, "
                    "at = CASE WHEN excluded.at > kcg_spans.at THEN excluded.at ELSE kcg_spans.at END")

    def _differences(self, cursor: Any, cluster: str, resource: str, baseline: Baseline,
                     received: float) -> list[Change]:
        """The changes that make the store's state at the baseline's version its objects:
        each object the store has at another version (or not at all), each object the store
        has that the list lacks as deleted at that version (with its last state)."""
        version = baseline.version
        cursor.execute(self._sql(
            "SELECT namespace, name, rv FROM kcg_changes WHERE cluster = ? AND resource = ?"
            " AND replaced_at > ? AND rv <= ? AND kind <> ?"),
            (cluster, resource, version, version, DELETED))
        stored = {(ns, name): rv for ns, name, rv in cursor.fetchall()}
        found: list[Change] = []
        for obj in baseline.objects:
            namespace, name, raw = obj.namespace, obj.name, obj.raw
            rv = int(obj.resource_version)
            had = stored.pop((namespace, name), None)
            if had != rv:
                found.append(Change(ADDED if had is None else MODIFIED, rv, namespace, name,
                                    received, raw, had or 0))
        for (namespace, name), rv in sorted(stored.items()):
            cursor.execute(self._sql(
                "SELECT object FROM kcg_changes WHERE cluster = ? AND resource = ? AND"
                " namespace = ? AND name = ? AND rv = ?"), (cluster, resource, namespace, name, rv))
            last = cursor.fetchone()
            found.append(Change(DELETED, version, namespace, name, received,
                                bytes(last[0]) if last else b"{}", rv))
        return found

    def _write_changes(self, cursor: Any, cluster: str, resource: str,
                       changes: list[Change]) -> int:
        """Insert each change (once), its ``replaced_at`` from the object's next row, and
        replace the object's previous row at its version."""
        sql = self._sql
        insert = sql(
            "INSERT INTO kcg_changes (cluster, resource, namespace, name, rv, kind, replaced_at,"
            " received, object) VALUES (?, ?, ?, ?, ?, ?, COALESCE((SELECT MIN(n.rv) FROM"
            " kcg_changes n WHERE n.cluster = ? AND n.resource = ? AND n.namespace = ? AND"
            " n.name = ? AND n.rv + 0 > ?), " + str(KEPT) + "), ?, ?)"
            " ON CONFLICT (cluster, resource, namespace, name, rv) DO NOTHING")
        # (``rv + 0``: no index on the version can serve that term, so each subquery reads the
        # object's own rows by the primary key, whatever the planner's statistics say —
        # without them, on a new PostgreSQL store, it took the version index and read every
        # row newer than each change: a first list of 150,000 Pods never finished)
        # the previous change replaced at this one's version: found by its key when the
        # writer knows it (a primary-key lookup), else searched for (a deletion the watch
        # told, changes while the recorder waits for a baseline); an addition replaces none
        known = sql(
            "UPDATE kcg_changes SET replaced_at = ? WHERE cluster = ? AND resource = ? AND"
            " namespace = ? AND name = ? AND rv = ? AND replaced_at > ?")
        searched = sql(
            "UPDATE kcg_changes SET replaced_at = ? WHERE cluster = ? AND resource = ? AND"
            " namespace = ? AND name = ? AND replaced_at > ? AND rv = (SELECT MAX(p.rv) FROM"
            " kcg_changes p WHERE p.cluster = ? AND p.resource = ? AND p.namespace = ? AND"
            " p.name = ? AND p.rv + 0 < ?)")
        # every insert, then every replacement: a change's predecessor is then in the store
        # whether it came in this batch or before, in order or not (one statement each, run
        # for all rows at once: PostgreSQL pipelines them, SQLite reuses the prepared one)
        cursor.executemany(insert, [
            (cluster, resource, c.namespace, c.name, c.rv, c.kind, cluster, resource,
             c.namespace, c.name, c.rv, c.received, c.raw) for c in changes])
        by_key = [(c.rv, cluster, resource, c.namespace, c.name, c.previous, c.rv)
                  for c in changes if c.previous and c.previous < c.rv]
        if by_key:
            cursor.executemany(known, by_key)
        by_search = [(c.rv, cluster, resource, c.namespace, c.name, c.rv, cluster, resource,
                      c.namespace, c.name, c.rv)
                     for c in changes if c.kind != ADDED and not (c.previous and c.previous < c.rv)]
        if by_search:
            cursor.executemany(searched, by_search)
        return len(changes)

    # -- reading (any thread) -----------------------------------------------------------

    def spans(self, cluster: str, resource: str) -> list[tuple[int, int]]:
        """The spans of versions the store is exact at, oldest first."""
        return self._run(lambda c: _fetch(c, self._sql(
            "SELECT lo, hi FROM kcg_spans WHERE cluster = ? AND resource = ? ORDER BY lo"),
            (cluster, resource)))

    def newest_span(self, cluster: str, resource: str) -> tuple[int, int, float] | None:
        """``(lo, hi, at)`` of the span reaching furthest: where a restart begins from."""
        rows = self._run(lambda c: _fetch(c, self._sql(
            "SELECT lo, hi, at FROM kcg_spans WHERE cluster = ? AND resource = ?"
            " ORDER BY hi DESC, lo LIMIT 1"), (cluster, resource)))
        return tuple(rows[0]) if rows else None

    def live_at(self, cluster: str, resource: str, version: int,
                namespace: str | None = None) -> list[tuple[str, str, int, bytes]]:
        """``(namespace, name, rv, object)`` of every object there at ``version``."""
        where = " AND namespace = ?" if namespace is not None else ""
        params: tuple = (cluster, resource, version, version, DELETED)
        if namespace is not None:
            params += (namespace,)
        return self._run(lambda c: _fetch(c, self._sql(
            "SELECT namespace, name, rv, object FROM kcg_changes WHERE cluster = ? AND"
            " resource = ? AND replaced_at > ? AND rv <= ? AND kind <> ?" + where), params))

    def versions_at(self, cluster: str, resource: str, version: int) -> dict[tuple[str, str], int]:
        """``(namespace, name) -> rv`` of every object there at ``version`` (no objects read)."""
        rows = self._run(lambda c: _fetch(c, self._sql(
            "SELECT namespace, name, rv FROM kcg_changes WHERE cluster = ? AND resource = ?"
            " AND replaced_at > ? AND rv <= ? AND kind <> ?"),
            (cluster, resource, version, version, DELETED)))
        return {(ns, name): rv for ns, name, rv in rows}

    def changes_from(self, cluster: str, resource: str, version: int,
                     place: tuple[int, str, str] | None, upto: int, limit: int,
                     namespace: str | None = None) -> list[Change]:
        """The changes after ``version`` — after ``place`` (``(rv, namespace, name)`` of the
        last one a page ended at) when given — up to ``upto``, oldest first, at most
        ``limit``: a page of a replay."""
        where, params = ["cluster = ?", "resource = ?", "rv <= ?"], [cluster, resource, upto]
        if place is None:
            where.append("rv > ?")
            params.append(version)
        else:
            rv, ns, name = place
            where.append("(rv > ? OR (rv = ? AND (namespace > ? OR (namespace = ? AND name > ?))))")
            params += [rv, rv, ns, ns, name]
        if namespace is not None:
            where.append("namespace = ?")
            params.append(namespace)
        params.append(limit)
        rows = self._run(lambda c: _fetch(c, self._sql(
            "SELECT kind, rv, namespace, name, received, object FROM kcg_changes WHERE "
            + " AND ".join(where) + " ORDER BY rv, namespace, name LIMIT ?"), params))
        return [Change(k, r, n, m, t, bytes(o)) for k, r, n, m, t, o in rows]

    def states_at(self, cluster: str, resource: str, version: int,
                  keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], bytes]:
        """The state at ``version`` of the objects ``keys`` names (those there then)."""
        found: dict[tuple[str, str], bytes] = {}
        for start in range(0, len(keys), 200):
            some = keys[start:start + 200]
            pairs = " OR ".join(["(namespace = ? AND name = ?)"] * len(some))
            params: list[Any] = [cluster, resource, version, version, DELETED]
            for ns, name in some:
                params += [ns, name]
            for ns, name, raw in self._run(lambda c: _fetch(c, self._sql(
                    "SELECT namespace, name, object FROM kcg_changes WHERE cluster = ? AND"
                    " resource = ? AND replaced_at > ? AND rv <= ? AND kind <> ? AND (" + pairs
                    + ")"), params)):
                found[(ns, name)] = bytes(raw)
        return found

    def newest_first(self, cluster: str, resource: str, below: tuple[int, str, str] | None,
                     namespace: str | None, name: str | None, since: float | None,
                     until: float | None, limit: int) -> list[Change]:
        """Changes newest first, after the place ``below`` (``(rv, namespace, name)`` of the
        last one a page ended at), in ``namespace`` and of ``name`` when given, received
        within ``since``..``until``."""
        where, params = ["cluster = ?", "resource = ?"], [cluster, resource]
        if below is not None:
            where.append("(rv < ? OR (rv = ? AND (namespace < ? OR (namespace = ? AND name < ?))))")
            params += [below[0], below[0], below[1], below[1], below[2]]
        if namespace is not None:
            where.append("namespace = ?")
            params.append(namespace)
        if name is not None:
            where.append("name = ?")
            params.append(name)
        if since is not None:
            where.append("received >= ?")
            params.append(since)
        if until is not None:
            where.append("received <= ?")
            params.append(until)
        params.append(limit)
        rows = self._run(lambda c: _fetch(c, self._sql(
            "SELECT kind, rv, namespace, name, received, object FROM kcg_changes WHERE "
            + " AND ".join(where) + " ORDER BY rv DESC, namespace DESC, name DESC LIMIT ?"),
            tuple(params)))
        return [Change(k, rv, ns, n, r, bytes(o)) for k, rv, ns, n, r, o in rows]

    def previous(self, cluster: str, resource: str, namespace: str, name: str,
                 version: int) -> bytes | None:
        """The object's state just before its change at ``version`` (``None``: it had none)."""
        rows = self._run(lambda c: _fetch(c, self._sql(
            "SELECT object, kind FROM kcg_changes WHERE cluster = ? AND resource = ? AND"
            " namespace = ? AND name = ? AND rv < ? ORDER BY rv DESC LIMIT 1"),
            (cluster, resource, namespace, name, version)))
        if not rows or rows[0][1] == DELETED:
            return None
        return bytes(rows[0][0])

    # -- retention ----------------------------------------------------------------------

    def forget_before(self, cluster: str, resource: str, version: int) -> int:
        """Forget what only versions before ``version`` needed: rows replaced at or before it,
        deletions at or before it; spans begin no earlier. Returns the rows deleted."""
        def forget(cursor: Any) -> int:
            self._lock_cluster(cursor, cluster)
            cursor.execute(self._sql(
                "DELETE FROM kcg_changes WHERE cluster = ? AND resource = ? AND"
                " (replaced_at <= ? OR (kind = ? AND rv <= ?))"),
                (cluster, resource, version, DELETED, version))
            deleted = cursor.rowcount
            cursor.execute(self._sql(
                "DELETE FROM kcg_spans WHERE cluster = ? AND resource = ? AND hi < ?"),
                (cluster, resource, version))
            cursor.execute(self._sql(
                "UPDATE kcg_spans SET lo = ? WHERE cluster = ? AND resource = ? AND lo < ?"),
                (version, cluster, resource, version))
            return deleted

        return self._run(forget)

    def version_received_before(self, cluster: str, resource: str, when: float) -> int | None:
        """The newest version of a change received before ``when`` (retention's cut)."""
        rows = self._run(lambda c: _fetch(c, self._sql(
            "SELECT MAX(rv) FROM kcg_changes WHERE cluster = ? AND resource = ? AND received < ?"),
            (cluster, resource, when)))
        return rows[0][0] if rows and rows[0][0] is not None else None

    def oldest_received(self, cluster: str) -> float | None:
        rows = self._run(lambda c: _fetch(c, self._sql(
            "SELECT MIN(received) FROM kcg_changes WHERE cluster = ?"), (cluster,)))
        return rows[0][0] if rows and rows[0][0] is not None else None

    def resources(self, cluster: str) -> list[str]:
        return [r for (r,) in self._run(lambda c: _fetch(c, self._sql(
            "SELECT DISTINCT resource FROM kcg_spans WHERE cluster = ?"), (cluster,)))]

    def size_bytes(self) -> int:
        raise NotImplementedError


def _fetch(cursor: Any, sql: str, params: Iterable[Any]) -> list[tuple]:
    cursor.execute(sql, tuple(params))
    return cursor.fetchall()

