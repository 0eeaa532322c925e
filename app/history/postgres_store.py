"""The shared history store: a PostgreSQL database several replicas write and read.

Each replica writes what it sees; the same change written by two is one row (the store's
keys), and the writers of one cluster take turns with a transaction-scoped advisory lock
(``app.history.store``: why). The password is never part of what is logged or shown: it
comes from the URL (shown redacted), or better from ``--history-password-file`` or
``KCG_HISTORY_PASSWORD`` (libpq's own ``PGPASSWORD`` and ``PGPASSFILE`` work too), so that
the URL itself can sit in a ConfigMap.
"""

from __future__ import annotations

import zlib
from typing import Any

from app.history.store import HistoryStore, StoreUnavailable

__all__ = ["PostgresStore"]

_CONNECT_TIMEOUT = 5  # seconds: a store that does not answer is down, said soon


class PostgresStore(HistoryStore):
    """``postgresql://USER@HOST:PORT/DB`` (psycopg 3)."""

    engine = "postgresql"
    param = "%s"
    _BLOB = "BYTEA"
    _REAL = "DOUBLE PRECISION"

    def __init__(self, url: str, password: str | None = None) -> None:
        super().__init__(url)
        self._password = password
        self._written = 0  # changes this process wrote, and at the last ANALYZE
        self._analyzed_at = 0

    def _driver_errors(self) -> tuple[type[BaseException], ...]:
        import psycopg
        return (psycopg.Error, OSError)

    def _connect(self) -> Any:
        import psycopg  # imported when a PostgreSQL store is used, not by every gateway

        extra: dict[str, Any] = {"autocommit": True, "connect_timeout": _CONNECT_TIMEOUT,
                                 "application_name": "kube-cache-gateway"}
        if self._password is not None:
            extra["password"] = self._password
        try:
            return psycopg.connect(self.url, **extra)
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot connect to {self.describe()}: "
                                   f"{_without_password(str(exc), self._password)}") from None

    def _transaction(self, connection: Any) -> Any:
        return connection.transaction()

    def _broken(self, connection: Any) -> bool:
        return bool(connection.broken)

    def _locked_schema(self, fn: Any) -> Any:
        def locked(cursor: Any) -> Any:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_KEY_SCHEMA,))
            return fn(cursor)
        return locked

    def _lock_cluster(self, cursor: Any, cluster: str) -> None:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_cluster_key(cluster),))
        # every statement of a write is a lookup by key: never a table read whole, even where
        # the planner's statistics say the table is small (see ``_write_changes``)
        cursor.execute("SET LOCAL enable_seqscan = off")

    def _write_changes(self, cursor: Any, cluster: str, resource: str, changes: Any) -> int:
        """``HistoryStore._write_changes`` in chunks, the planner's statistics renewed between
        them as the table grows (in the same transaction: ANALYZE sees its rows).

        Why. Without statistics (a new store, or one grown tenfold since autovacuum looked)
        PostgreSQL's planner sees every index of the table as equally good for a lookup by an
        object's key and took one whose prefix is only the cluster and resource: each change
        read every row of the resource. 1,700 changes a second instead of 20,000, and a first
        list of 150,000 Pods that never finished. So after this process's first thousand
        changes, and each time what it wrote since doubled, the table is analyzed (an ANALYZE
        samples 30,000 rows: tens of ms) before the next chunk.
        """
        written = 0
        for start in range(0, len(changes), _CHUNK):
            chunk = changes[start:start + _CHUNK]
            written += super()._write_changes(cursor, cluster, resource, chunk)
            self._written += len(chunk)
            if self._written >= max(1000, 2 * self._analyzed_at):
                self._analyzed_at = self._written
                cursor.execute("ANALYZE kcg_changes")
        return written

    def size_bytes(self) -> int:
        rows = self._run(lambda c: (c.execute(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c WHERE "
            "c.relname IN ('kcg_changes', 'kcg_spans', 'kcg_clusters', 'kcg_meta')"),
            c.fetchall())[1])
        return int(rows[0][0])


_CHUNK = 2000  # changes written between two looks at whether the table needs analyzing
_KEY_SCHEMA = 0x6B6367  # "kcg": the advisory lock creating the schema takes


def _cluster_key(cluster: str) -> int:
    """A cluster's advisory lock key: a stable 32-bit number of its name."""
    return zlib.crc32(b"kcg:" + cluster.encode())


def _without_password(text: str, password: str | None) -> str:
    return text.replace(password, "***") if password else text
