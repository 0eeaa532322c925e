"""The embedded history store: one SQLite file, in WAL mode, beside the gateway.

Why these settings. WAL lets the readers (lists at a past version, replays) read while the
writer's thread writes, each on a connection of its own; ``synchronous=NORMAL`` commits
without an ``fsync`` per transaction and still never leaves the file corrupt — a process
killed while it writes (``SIGKILL``) loses nothing it committed, only a power loss can lose
the last transactions (the changes are the API server's: a restart catches up from it).
``busy_timeout`` waits for a moment another connection holds the lock rather than failing.
The file is made ``0600``: it holds every object the gateway may read.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from app.history.store import HistoryStore, StoreUnavailable

__all__ = ["SQLiteStore"]

_BUSY_MS = 5000


class SQLiteStore(HistoryStore):
    """``sqlite:///PATH`` (absolute) or ``sqlite://./PATH``-style relative ``sqlite:PATH``."""

    engine = "sqlite"

    def __init__(self, url: str, path: str) -> None:
        super().__init__(url)
        self.path = Path(path)

    def _driver_errors(self) -> tuple[type[BaseException], ...]:
        return (sqlite3.Error, OSError)

    def _connect(self) -> Any:
        if self.path.parent and not self.path.parent.exists():
            raise StoreUnavailable(f"{self.describe()}: the directory {self.path.parent} "
                                   f"does not exist")
        if not self.path.exists():
            descriptor = os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600)
            os.close(descriptor)
        connection = sqlite3.connect(self.path, timeout=_BUSY_MS / 1000,
                                     check_same_thread=False, isolation_level="DEFERRED")
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute(f"PRAGMA busy_timeout={_BUSY_MS}")
            connection.execute("PRAGMA schema_version").fetchone()  # not a database: fails here
        except sqlite3.DatabaseError as exc:
            connection.close()
            raise StoreUnavailable(f"{self.describe()} is not a history store SQLite can "
                                   f"read ({exc}): move it aside") from None
        return connection

    def size_bytes(self) -> int:
        """The bytes its pages hold (a file does not shrink when rows go: freed pages are
        reused, so they are not counted)."""
        def size(cursor: Any) -> int:
            pages = cursor.execute("PRAGMA page_count").fetchone()[0]
            free = cursor.execute("PRAGMA freelist_count").fetchone()[0]
            page = cursor.execute("PRAGMA page_size").fetchone()[0]
            return (pages - free) * page
        return self._run(size)
