"""HistoryWriter: batches from a thread; a store down loses nothing, writes nothing twice;
retention by time and by size; a store of another cluster is never written."""

from __future__ import annotations

import logging

import pytest

from app.history.sqlite_store import SQLiteStore
from app.history.store import ADDED, KEPT, MODIFIED, Span, StoreUnavailable
from app.history.writer import HistoryWriter
from tests.app.history.kept import change
from tests.helpers import wait_until

PODS = "core/v1/pods"


@pytest.fixture
def sqlite(tmp_path):
    made = SQLiteStore("sqlite:///h.db", str(tmp_path / "h.db"))
    made.create()
    yield made
    made.close()


class _Failing:
    """A store whose writes fail while ``down``, and are counted."""

    def __init__(self, store) -> None:
        self.store, self.down, self.tries = store, True, 0

    def write(self, cluster, batch, received):
        self.tries += 1
        if self.down:
            raise StoreUnavailable("the store is down (a test's)")
        return self.store.write(cluster, batch, received)

    def __getattr__(self, name):
        return getattr(self.store, name)


def _rows(store):
    return [(r.rv, r.name) for r in store.changes_from("c", PODS, 0, None, KEPT, 1000)]


def test_changes_are_written_in_batches_and_a_store_back_gets_them_once(sqlite, caplog):
    failing = _Failing(sqlite)
    writer = HistoryWriter(failing, "c", retention=3600)
    writer.start()
    try:
        with caplog.at_level(logging.WARNING, "app.history.writer"):
            for rv in range(10, 20):
                writer.put(PODS, change(ADDED, rv, f"p{rv}"))
            writer.put(PODS, Span(10, 19))
            wait_until(lambda: failing.tries >= 3, 10, message="tries while the store is down")
            assert writer.problem == "the store is down (a test's)"
            assert _rows(sqlite) == []
            for rv in range(20, 25):  # more arrive meanwhile: kept behind the first
                writer.put(PODS, change(MODIFIED, rv, "p10"))
            failing.down = False
            assert writer.flushed(10)
        assert writer.problem is None
        assert _rows(sqlite) == sorted([(rv, f"p{rv}") for rv in range(10, 20)] +
                                       [(rv, "p10") for rv in range(20, 25)])
        assert writer.written == 15 and sqlite.spans("c", PODS) == [(10, 19)]
        said = [r.getMessage() for r in caplog.records]
        assert sum("cannot be written" in m for m in said) == 1  # said once, not per try
    finally:
        writer.stop()


def test_what_waits_beyond_the_bound_is_dropped_and_the_recorders_told(sqlite):
    failing = _Failing(sqlite)
    writer = HistoryWriter(failing, "c", retention=3600, max_pending=5)
    writer.start()
    try:
        for rv in range(10, 20):
            writer.put(PODS, change(ADDED, rv, f"p{rv}"))
        wait_until(lambda: writer.epoch == 1, 10, message="the waiting changes dropped")
        failing.down = False
        writer.put(PODS, change(ADDED, 30, "later"))
        assert writer.flushed(10)
        assert _rows(sqlite) == [(30, "later")]
    finally:
        writer.stop()


def test_a_store_of_another_cluster_is_never_written(sqlite):
    sqlite.claim("c", "uid-other")
    writer = HistoryWriter(sqlite, "c", retention=3600,
                           claim=lambda: sqlite.claim("c", "uid-this"))
    writer.start()
    try:
        writer.put(PODS, change(ADDED, 10, "a"))
        wait_until(lambda: writer.refused is not None, 10, message="the claim refused")
        assert "another cluster named 'c'" in writer.refused
        writer.put(PODS, change(ADDED, 11, "b"))
        assert writer.flushed(5)
        assert _rows(sqlite) == []
    finally:
        writer.stop()


def test_retention_forgets_what_only_older_versions_needed(sqlite):
    now = [1000.0 + 30]
    writer = HistoryWriter(sqlite, "c", retention=10, clock=lambda: now[0])
    # received at 1000 + rv: a at 10, 12, 15 and b at 11; kept for 10 s
    sqlite.write("c", [(PODS, change(ADDED, 10, "a")), (PODS, change(ADDED, 11, "b")),
                       (PODS, change(MODIFIED, 12, "a")), (PODS, change(MODIFIED, 15, "a")),
                       (PODS, Span(10, 15))], 0.0)
    writer.retain()  # the cut: 1020, after every change: the newest states stay
    assert [r.rv for r in sqlite.changes_from("c", PODS, 0, None, KEPT, 100)] == [11, 15]
    assert sqlite.spans("c", PODS) == [(15, 15)]
    assert {n for _, n, _, _ in sqlite.live_at("c", PODS, 15)} == {"a", "b"}


def test_a_store_over_its_size_loses_its_oldest_changes_first(sqlite):
    now = [2000.0]
    writer = HistoryWriter(sqlite, "c", retention=10**6, clock=lambda: now[0])
    big = "x" * 20_000
    sqlite.write("c", [(PODS, change(ADDED if rv == 10 else MODIFIED, rv, "a", pad=big))
                       for rv in range(10, 60)] + [(PODS, Span(10, 59))], 0.0)
    before = sqlite.size_bytes()
    writer.max_bytes = before // 2
    writer.retain()
    assert sqlite.size_bytes() <= writer.max_bytes
    kept = [r.rv for r in sqlite.changes_from("c", PODS, 0, None, KEPT, 100)]
    assert kept[-1] == 59 and kept[0] > 10  # the newest kept, the oldest gone
    assert sqlite.spans("c", PODS)[0][0] == kept[0]
