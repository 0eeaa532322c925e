"""Stores for the history tests: each test a store of its own, on both engines."""

from __future__ import annotations

import pytest

from app.history.postgres_store import PostgresStore
from app.history.sqlite_store import SQLiteStore
from app.history.store import HistoryStore


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path) -> HistoryStore:
    """A new, created store: an SQLite file, or a database of the run's PostgreSQL."""
    if request.param == "sqlite":
        made: HistoryStore = SQLiteStore(f"sqlite:///{tmp_path}/history.db",
                                         str(tmp_path / "history.db"))
        dropped = None
    else:
        server = request.getfixturevalue("local_postgres")
        dropped, url = server.database()
        made = PostgresStore(url)
    made.create()
    yield made
    made.close()
    if dropped is not None:
        server.drop(dropped)
