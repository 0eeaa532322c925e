"""The history store's rows: states at any version, written once, in any order, on both engines."""

from __future__ import annotations

import os
import stat
import threading

import orjson
import pytest

from informer_core.encoded import EncodedObject
from app.history.sqlite_store import SQLiteStore
from app.history.store import (ADDED, DELETED, KEPT, MODIFIED, Baseline, ForeignStore,
                               Span, StoreUnavailable, redacted)
from tests.app.history.kept import HISTORY, PODS, change


def names_at(store, version: int) -> dict[str, int]:
    return {name: rv for _, name, rv, _ in store.live_at("c", PODS, version)}


def test_the_state_at_each_version_is_the_changes_up_to_it(store):
    store.write("c", [(PODS, c) for c in HISTORY] + [(PODS, Span(10, 15))], 0.0)
    assert names_at(store, 9) == {}
    assert names_at(store, 10) == {"a": 10}
    assert names_at(store, 11) == {"a": 10, "b": 11}
    assert names_at(store, 12) == {"a": 12, "b": 11}
    assert names_at(store, 13) == {"a": 12}
    assert names_at(store, 14) == {"a": 12, "b": 14}
    assert names_at(store, 99) == {"a": 15, "b": 14}
    assert store.spans("c", PODS) == [(10, 15)]
    objects = {name: orjson.loads(raw) for _, name, _, raw in store.live_at("c", PODS, 12)}
    assert objects["a"]["spec"] == {"x": 1}


def test_a_batch_written_twice_or_out_of_order_leaves_the_same_rows(store):
    store.write("c", [(PODS, c) for c in reversed(HISTORY)], 0.0)  # newest first: replaced_at still right
    store.write("c", [(PODS, c) for c in HISTORY], 0.0)  # again: nothing doubles
    for version in range(9, 17):
        expected = {n: rv for n, rv in {"a": max((c.rv for c in HISTORY if c.name == "a"
                                                   and c.rv <= version), default=None),
                                          "b": None}.items() if rv is not None}
        b = [c for c in HISTORY if c.name == "b" and c.rv <= version]
        if b and b[-1].kind != DELETED:
            expected["b"] = b[-1].rv
        assert names_at(store, version) == expected, version
    rows = store.changes_from("c", PODS, 0, None, KEPT, 100)
    assert [(r.rv, r.name) for r in rows] == [(c.rv, c.name) for c in HISTORY]


def test_writers_racing_on_one_cluster_leave_each_row_replaced_once(store):
    # two replicas write the same changes at once, from threads of their own
    def write(order):
        store.write("c", [(PODS, c) for c in order], 0.0)
        store.forget_connection()

    threads = [threading.Thread(target=write, args=(list(HISTORY),)),
               threading.Thread(target=write, args=(list(reversed(HISTORY)),))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert names_at(store, 12) == {"a": 12, "b": 11}
    assert names_at(store, 13) == {"a": 12}
    assert len(store.changes_from("c", PODS, 0, None, KEPT, 100)) == len(HISTORY)


def test_changes_read_back_newest_first_by_page_name_and_time(store):
    store.write("c", [(PODS, c) for c in HISTORY], 0.0)
    first = store.newest_first("c", PODS, None, None, None, None, None, 4)
    assert [r.rv for r in first] == [15, 14, 13, 12]
    last = first[-1]
    rest = store.newest_first("c", PODS, (last.rv, last.namespace, last.name), None, None,
                              None, None, 4)
    assert [r.rv for r in rest] == [11, 10]
    assert [r.rv for r in store.newest_first("c", PODS, None, "shop", "a", None, None, 9)] == \
        [15, 12, 10]
    assert [r.rv for r in store.newest_first("c", PODS, None, None, None, 1011.0, 1013.0, 9)] == \
        [13, 12, 11]
    assert store.newest_first("c", PODS, None, "other", None, None, None, 9) == []
    assert orjson.loads(store.previous("c", PODS, "shop", "a", 15))["spec"] == {"x": 1}
    assert store.previous("c", PODS, "shop", "a", 10) is None
    assert store.previous("c", PODS, "shop", "b", 14) is None  # deleted before


def test_forgetting_before_a_version_keeps_every_state_from_it_on(store):
    store.write("c", [(PODS, c) for c in HISTORY] + [(PODS, Span(10, 15))], 0.0)
    before = {v: names_at(store, v) for v in range(13, 17)}
    store.forget_before("c", PODS, 13)
    assert {v: names_at(store, v) for v in range(13, 17)} == before
    assert store.spans("c", PODS) == [(13, 15)]
    assert [r.rv for r in store.changes_from("c", PODS, 0, None, KEPT, 100)] == [12, 14, 15]


def test_a_store_claimed_for_one_cluster_refuses_another_of_the_same_name(store):
    store.claim("c", "uid-1")
    store.claim("c", "uid-1")  # the same cluster again: fine
    store.claim("d", "uid-2")
    with pytest.raises(ForeignStore, match="another cluster named 'c'"):
        store.claim("c", "uid-9")


def test_clusters_and_resources_do_not_mix(store):
    store.write("c", [(PODS, change(ADDED, 10, "a"))], 0.0)
    store.write("d", [(PODS, change(ADDED, 10, "a", x=9))], 0.0)
    store.write("c", [("apps/v1/deployments", change(ADDED, 10, "a", y=1))], 0.0)
    assert names_at(store, 10) == {"a": 10}
    (_, _, _, raw), = store.live_at("d", PODS, 10)
    assert orjson.loads(raw)["spec"] == {"x": 9}


def test_the_sqlite_file_is_the_gateways_alone_and_garbage_is_refused(tmp_path):
    path = tmp_path / "h.db"
    made = SQLiteStore(f"sqlite:///{path}", str(path))
    made.create()
    made.close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreUnavailable, match="not a history store SQLite can read"):
        SQLiteStore(f"sqlite:///{garbage}", str(garbage)).create()
    with pytest.raises(StoreUnavailable, match="does not exist"):
        SQLiteStore("sqlite:////nowhere/h.db", "/nowhere/h.db").create()


def test_a_password_is_never_shown():
    assert redacted("postgresql://kcg:s3cret@db:5432/h") == "postgresql://kcg:***@db:5432/h"
    assert redacted("postgresql://kcg@db/h") == "postgresql://kcg@db/h"


def test_a_baseline_writes_what_changed_while_nobody_watched_as_the_changes_they_are(store):
    store.write("c", [(PODS, c) for c in HISTORY] + [(PODS, Span(10, 15))], 0.0)
    # listed again at 40: a changed at 30, b deleted, c created at 35
    a = change(MODIFIED, 30, "a", x=3)
    c = change(ADDED, 35, "c")
    listed = [EncodedObject(a.raw), EncodedObject(c.raw)]
    wrote = store.write("c", [(PODS, Baseline(40, listed, 1990.0))], 2000.0)
    assert wrote == 3
    assert names_at(store, 40) == {"a": 30, "c": 35}
    assert names_at(store, 15) == {"a": 15, "b": 14}  # the past before it stands
    newest = store.newest_first("c", PODS, None, None, None, None, None, 3)
    assert [(r.kind, r.rv, r.name) for r in newest] == [(DELETED, 40, "b"), (ADDED, 35, "c"),
                                                         (MODIFIED, 30, "a")]
    assert orjson.loads(newest[0].raw)["metadata"]["resourceVersion"] == "14"  # its last state
    # received when the list was there, not when written: before changes that came after it
    assert {r.received for r in newest} == {1990.0}
    assert store.newest_span("c", PODS) == (40, 40, 1990.0)
    assert store.spans("c", PODS) == [(10, 15), (40, 40)]
    # the same list again (a second replica's): nothing more
    assert store.write("c", [(PODS, Baseline(40, listed))], 2001.0) == 0


def test_a_postgresql_password_comes_from_a_file_and_is_never_said(local_postgres, tmp_path,
                                                                   caplog):
    import uuid

    from app.history.opening import open_store

    secret = "s3cret-" + uuid.uuid4().hex[:8]
    url = local_postgres.password_role("pw_" + uuid.uuid4().hex[:8], secret)
    (tmp_path / "password").write_text(secret + "\n")
    store = open_store(url, str(tmp_path / "password"))
    store.create()  # connected with the file's password
    store.claim("c", "uid")
    store.close()
    (tmp_path / "wrong").write_text("not-" + secret)
    with pytest.raises(StoreUnavailable) as refused:
        open_store(url, str(tmp_path / "wrong")).create()
    assert "password authentication failed" in str(refused.value)
    assert secret not in str(refused.value)
    with_password = url.replace("@", f":not-{secret}@")
    with pytest.raises(StoreUnavailable) as refused:
        open_store(with_password).create()
    assert secret not in str(refused.value) and ":***@" in str(refused.value)
    assert secret not in caplog.text
    with pytest.raises(ValueError, match="password-file"):
        open_store(url, str(tmp_path / "nowhere"))


def test_a_replay_reads_page_by_page_from_where_the_last_ended_and_states_before(store):
    deleted_too = HISTORY + [change(DELETED, 15, "b")]  # two changes at one version
    store.write("c", [(PODS, c) for c in deleted_too], 0.0)
    pages, place = [], None
    while True:
        page = store.changes_from("c", PODS, 11, place, 15, 2)
        if not page:
            break
        pages.append([(r.rv, r.name) for r in page])
        place = (page[-1].rv, page[-1].namespace, page[-1].name)
    assert pages == [[(12, "a"), (13, "b")], [(14, "b"), (15, "a")], [(15, "b")]]
    before = store.states_at("c", PODS, 12, [("shop", "a"), ("shop", "b"), ("shop", "x")])
    assert {k: orjson.loads(v)["metadata"]["resourceVersion"] for k, v in before.items()} == {
        ("shop", "a"): "12", ("shop", "b"): "11"}


def test_a_postgresql_connection_lost_is_replaced_on_its_next_use(local_postgres,
                                                                   postgres_history_url):
    from app.history.postgres_store import PostgresStore

    store = PostgresStore(postgres_history_url)
    store.create()
    store.write("c", [(PODS, c) for c in HISTORY] + [(PODS, Span(10, 15))], 0.0)
    database = postgres_history_url.rsplit("/", 1)[1]
    local_postgres.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                       f"WHERE datname = '{database}'")  # a server restart, as this thread sees it
    assert store.spans("c", PODS) == [(10, 15)]  # read on a new connection: no error
    assert store.write("c", [(PODS, change(MODIFIED, 16, "a", x=3))], 0.0) == 1
    store.close()
