"""LocalPostgres: Debian's PostgreSQL of a run's own, started on loopback and stopped whole."""

from __future__ import annotations

import socket

import pytest

from control_plane.errors import ClusterUnavailableError
from control_plane.postgres import LocalPostgres
from control_plane.pytest_plugin import unavailable


def test_it_serves_sql_on_loopback_and_writes_a_row_once(local_postgres):
    assert local_postgres.url.startswith("postgresql://kcg@127.0.0.1:")
    assert local_postgres.sql("SELECT 1") == "1"
    local_postgres.sql("CREATE DATABASE t_once")
    try:
        local_postgres.sql("CREATE TABLE c (rv bigint PRIMARY KEY)", "t_once")
        for _ in range(2):  # what two replicas that saw one change would write
            local_postgres.sql("INSERT INTO c VALUES (7) ON CONFLICT DO NOTHING", "t_once")
        assert local_postgres.sql("SELECT count(*) FROM c", "t_once") == "1"
    finally:
        local_postgres.sql("DROP DATABASE t_once")


def test_stopping_it_ends_the_server_and_removes_its_directory():
    try:
        server = LocalPostgres().start()
    except ClusterUnavailableError as exc:
        unavailable(f"PostgreSQL could not be started: {exc}")
    directory, port = server.dir, server.port
    server.stop()
    assert directory is not None and not directory.exists()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
