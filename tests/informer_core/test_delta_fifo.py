"""DeltaFIFO behaves as client-go's (its delta_fifo_test.go cases, translated)."""

from __future__ import annotations

import threading
import time
from typing import NamedTuple

import pytest

from informer_core.delta_fifo import Delta, DeletedFinalStateUnknown, DeltaFIFO, DeltaType
from informer_core.errors import FIFOClosedError
from informer_core.store import Indexer

ADDED, UPDATED, DELETED = DeltaType.ADDED, DeltaType.UPDATED, DeltaType.DELETED
REPLACED, SYNC = DeltaType.REPLACED, DeltaType.SYNC


class Obj(NamedTuple):
    name: str
    val: object


def key(o):
    return o.name


class Literal:
    """A KeyListerGetter over a fixed list (client-go's literalListerGetter)."""

    def __init__(self, *objs: Obj):
        self.objs = objs

    def list_keys(self):
        return [o.name for o in self.objs]

    def get_by_key(self, k):
        return next((o for o in self.objs if o.name == k), None)


def fifo(*known: Obj, replaced=False, with_known=True):
    return DeltaFIFO(key_func=key, known_objects=Literal(*known) if with_known else None,
                     emit_delta_type_replaced=replaced)


def pop(f: DeltaFIFO) -> list[Delta]:
    return f.pop(lambda deltas, initial: None, timeout=1)


def pop_newest(f: DeltaFIFO) -> Obj:
    return pop(f)[-1].object


def test_basic_two_producers_pop_in_order():
    f = DeltaFIFO(key_func=key)
    amount = 500

    def produce(prefix):
        for i in range(amount):
            f.add(Obj(f"{prefix}{i}", i + 1))

    producers = [threading.Thread(target=produce, args=(p,)) for p in "ab"]
    for t in producers:
        t.start()
    last = {"a": 0, "b": 0}
    for _ in range(amount * 2):
        obj = pop_newest(f)
        assert obj.val > last[obj.name[0]]
        last[obj.name[0]] = obj.val
    for t in producers:
        t.join()


def test_replace_with_delete_delta_in_still_queues_the_sync():
    old, new = Obj("foo", 1), Obj("foo", 2)
    f = fifo(old)
    f.delete(old)
    f.replace([new], "")
    assert pop(f) == [Delta(DELETED, old), Delta(SYNC, new)]


OBJ, OBJ_V2 = Obj("foo", 2), Obj("foo", 3)


@pytest.mark.parametrize("with_known", [True, False])
@pytest.mark.parametrize("operations,expected", [
    (lambda f: (f.add(OBJ), f.replace([], "0")),
     [Delta(ADDED, OBJ), Delta(DELETED, DeletedFinalStateUnknown("foo", OBJ))]),
    (lambda f: (f.add(OBJ), f.delete(OBJ), f.replace([], "0")),
     [Delta(ADDED, OBJ), Delta(DELETED, OBJ)]),
    (lambda f: (f.add(OBJ), f.replace([OBJ], "0"), f.replace([OBJ], "0"), f.replace([], "0")),
     [Delta(ADDED, OBJ), Delta(SYNC, OBJ), Delta(SYNC, OBJ),
      Delta(DELETED, DeletedFinalStateUnknown("foo", OBJ))]),
    (lambda f: (f.add(OBJ), f.replace([], "0"), f.replace([], "1")),
     [Delta(ADDED, OBJ), Delta(DELETED, DeletedFinalStateUnknown("foo", OBJ))]),
    (lambda f: (f.add(OBJ), f.delete(OBJ), f.add(OBJ_V2), f.replace([], "0")),
     [Delta(ADDED, OBJ), Delta(DELETED, OBJ), Delta(ADDED, OBJ_V2),
      Delta(DELETED, DeletedFinalStateUnknown("foo", OBJ_V2))]),
], ids=["added", "deleted", "synced", "double-replace", "re-added"])
def test_replace_makes_deletions_for_objects_only_in_queue(operations, expected, with_known):
    f = fifo(with_known=with_known)
    operations(f)
    assert pop(f) == expected
    assert len(f) == 0 and f.get_by_key("foo") is None


def test_replaced_object_gets_a_single_delete_with_replaced_type():
    f = fifo(replaced=True)
    f.add(OBJ)
    f.replace([OBJ], "0")
    f.replace([], "0")
    assert pop(f) == [Delta(ADDED, OBJ), Delta(REPLACED, OBJ),
                      Delta(DELETED, DeletedFinalStateUnknown("foo", OBJ))]


def test_add_update_delete_collapse_into_one_pop():
    f = DeltaFIFO(key_func=key)
    f.add(Obj("foo", 10))
    f.update(Obj("foo", 12))
    f.delete(Obj("foo", 15))
    assert f.list() == [Obj("foo", 15)]
    assert f.list_keys() == ["foo"]
    deltas = pop(f)
    assert [d.type for d in deltas] == [ADDED, UPDATED, DELETED]
    assert deltas[-1].object.val == 15
    with pytest.raises(TimeoutError):
        f.pop(lambda d, i: None, timeout=0.05)
    assert f.get(Obj("foo", "")) is None


def test_enqueueing_without_known_objects_ignores_unknown_deletes():
    f = DeltaFIFO(key_func=key)
    f.add(Obj("foo", 10))
    f.update(Obj("bar", 15))
    f.add(Obj("qux", 17))
    f.delete(Obj("qux", 18))
    f.delete(Obj("baz", 20))  # never seen: nothing queued
    assert [pop_newest(f).val for _ in range(3)] == [10, 15, 18]
    assert len(f) == 0


def test_enqueueing_with_known_objects_queues_their_deletes():
    f = fifo(Obj("foo", 5), Obj("bar", 6), Obj("baz", 7))
    f.add(Obj("foo", 10))
    f.update(Obj("bar", 15))
    f.delete(Obj("baz", 20))
    assert [pop_newest(f).val for _ in range(3)] == [10, 15, 20]
    assert len(f) == 0


def test_add_then_replace_pops_once_with_the_new_value():
    f = DeltaFIFO(key_func=key)
    f.add(Obj("foo", 10))
    f.replace([Obj("foo", 15)], "0")
    assert pop_newest(f).val == 15
    with pytest.raises(TimeoutError):
        f.pop(lambda d, i: None, timeout=0.05)


def test_resync_skips_a_key_with_a_queued_delete():
    f = fifo(Obj("foo", 5))
    f.delete(Obj("foo", 10))
    f.resync()
    assert [d.type for d in f.get_by_key("foo")] == [DELETED]


def test_resync_queues_sync_for_known_objects():
    f = fifo(Obj("foo", 5))
    f.resync()
    assert f.get_by_key("foo") == [Delta(SYNC, Obj("foo", 5))]


def test_resync_without_known_objects_does_nothing():
    f = DeltaFIFO(key_func=key)
    f.resync()
    assert len(f) == 0


def test_delete_of_a_queued_but_not_known_object_is_propagated():
    f = fifo()
    f.add(Obj("foo", 5))
    f.delete(Obj("foo", 6))
    assert [d.type for d in f.get_by_key("foo")] == [ADDED, DELETED]


def test_replace_makes_deletions_with_a_pre_existing_delete():
    f = fifo(Obj("foo", 5), Obj("bar", 6), Obj("baz", 7))
    f.delete(Obj("baz", 10))
    f.replace([Obj("foo", 5)], "0")
    assert pop(f) == [Delta(DELETED, Obj("baz", 10))]
    assert pop(f) == [Delta(SYNC, Obj("foo", 5))]
    assert pop(f) == [Delta(DELETED, DeletedFinalStateUnknown("bar", Obj("bar", 6)))]


def test_replace_makes_deletions_starting_with_an_add():
    f = fifo(Obj("foo", 5), Obj("bar", 6), Obj("baz", 7))
    f.add(Obj("baz", 10))
    f.replace([Obj("foo", 5)], "0")
    assert pop(f) == [Delta(ADDED, Obj("baz", 10)),
                      Delta(DELETED, DeletedFinalStateUnknown("baz", Obj("baz", 10)))]
    assert pop(f) == [Delta(SYNC, Obj("foo", 5))]
    assert pop(f) == [Delta(DELETED, DeletedFinalStateUnknown("bar", Obj("bar", 6)))]


def test_replace_tombstone_carries_the_newest_queued_object():
    f = fifo(Obj("foo", 5), Obj("bar", 6), Obj("baz", 7))
    f.delete(Obj("bar", 6))
    f.add(Obj("bar", 100))
    f.replace([Obj("foo", 5)], "0")
    assert pop(f) == [Delta(DELETED, Obj("bar", 6)), Delta(ADDED, Obj("bar", 100)),
                      Delta(DELETED, DeletedFinalStateUnknown("bar", Obj("bar", 100)))]
    assert pop(f) == [Delta(SYNC, Obj("foo", 5))]
    assert pop(f) == [Delta(DELETED, DeletedFinalStateUnknown("baz", Obj("baz", 7)))]


def test_replace_after_replace_tombstones_the_latest_version():
    f = fifo(Obj("foo", 5), Obj("bar", 6), Obj("baz", 7))
    f.replace([Obj("bar", 100), Obj("foo", 5)], "0")
    f.replace([Obj("foo", 5)], "0")
    assert pop(f) == [Delta(SYNC, Obj("bar", 100)),
                      Delta(DELETED, DeletedFinalStateUnknown("bar", Obj("bar", 100)))]
    assert pop(f) == [Delta(SYNC, Obj("foo", 5)), Delta(SYNC, Obj("foo", 5))]
    assert pop(f) == [Delta(DELETED, DeletedFinalStateUnknown("baz", Obj("baz", 7)))]


def test_replace_without_known_objects_tombstones_queued_keys():
    f = DeltaFIFO(key_func=key, emit_delta_type_replaced=False)
    f.add(Obj("baz", 10))
    f.replace([Obj("foo", 5)], "0")
    assert pop(f) == [Delta(ADDED, Obj("baz", 10)),
                      Delta(DELETED, DeletedFinalStateUnknown("baz", Obj("baz", 10)))]
    assert pop(f) == [Delta(SYNC, Obj("foo", 5))]


def test_replace_emits_replaced_when_asked():
    f = fifo(Obj("foo", 5), Obj("bar", 6), Obj("baz", 7), replaced=True)
    f.delete(Obj("baz", 10))
    f.replace([Obj("foo", 6)], "0")
    assert pop(f) == [Delta(DELETED, Obj("baz", 10))]
    assert pop(f) == [Delta(REPLACED, Obj("foo", 6))]
    assert pop(f) == [Delta(DELETED, DeletedFinalStateUnknown("bar", Obj("bar", 6)))]


def test_replaced_is_the_default_delta_type():
    f = DeltaFIFO(key_func=key, known_objects=Literal(Obj("foo", 5)))
    f.replace([Obj("foo", 5)], "0")
    assert pop(f) == [Delta(REPLACED, Obj("foo", 5))]


def test_update_resync_race_keeps_the_update():
    f = fifo(Obj("foo", 5))
    f.update(Obj("foo", 6))
    f.resync()
    assert pop(f) == [Delta(UPDATED, Obj("foo", 6))]


def test_has_synced_only_after_the_initial_deletions_are_popped():
    f = fifo(Obj("foo", 5), Obj("bar", 6), Obj("baz", 7))
    f.replace([Obj("foo", 5)], "0")
    expected = [
        [Delta(SYNC, Obj("foo", 5))],
        [Delta(DELETED, DeletedFinalStateUnknown("bar", Obj("bar", 6)))],
        [Delta(DELETED, DeletedFinalStateUnknown("baz", Obj("baz", 7)))],
    ]
    for deltas in expected:
        assert not f.has_synced()
        assert pop(f) == deltas
    assert f.has_synced()


def test_is_in_initial_list_flag_is_true_until_synced():
    f = DeltaFIFO(key_func=key)
    f.replace([Obj("a", 1), Obj("b", 2)], "0")
    seen = []
    f.pop(lambda d, initial: seen.append(initial))
    f.pop(lambda d, initial: seen.append(initial))
    f.add(Obj("c", 3))
    f.pop(lambda d, initial: seen.append(initial))
    assert seen == [True, True, False]


def test_line_jumpers_keep_their_place():
    f = DeltaFIFO(key_func=key)
    f.add(Obj("foo", 10))
    f.add(Obj("bar", 1))
    f.add(Obj("foo", 11))
    f.add(Obj("foo", 13))
    f.add(Obj("zab", 30))
    assert pop_newest(f).val == 13
    f.add(Obj("foo", 14))  # foo does not jump back in line
    assert [pop_newest(f).val for _ in range(3)] == [1, 30, 14]


def test_add_if_not_present():
    f = DeltaFIFO(key_func=key)
    with pytest.raises(ValueError):
        f.add_if_not_present([])
    f.add(Obj("b", 3))
    b3 = pop(f)
    f.add(Obj("c", 4))
    c4 = pop(f)
    assert len(f) == 0
    f.add(Obj("a", 1))
    f.add(Obj("b", 2))
    f.add_if_not_present(b3)
    f.add_if_not_present(c4)
    assert len(f) == 3
    assert [pop_newest(f).val for _ in range(3)] == [1, 2, 4]


@pytest.mark.parametrize("obj,expected", [
    (Obj("A", None), "A"),
    (DeletedFinalStateUnknown("B", None), "B"),
    ([Delta(ADDED, Obj("C", None))], "C"),
    ([Delta(DELETED, DeletedFinalStateUnknown("D", None))], "D"),
])
def test_key_of(obj, expected):
    assert DeltaFIFO(key_func=key).key_of(obj) == expected


@pytest.mark.parametrize("actions,expected", [
    ([], False),
    ([lambda f: f.add(Obj("a", 1))], True),
    ([lambda f: f.replace([], "0")], True),
    ([lambda f: f.replace([Obj("a", 1), Obj("b", 2)], "0")], False),
    ([lambda f: f.replace([Obj("a", 1), Obj("b", 2)], "0"), pop], False),
    ([lambda f: f.replace([Obj("a", 1), Obj("b", 2)], "0"), pop, pop], True),
    ([lambda f: f.replace([Obj("a", 1), Obj("a", 2)], "0"), pop], True),
])
def test_has_synced(actions, expected):
    f = DeltaFIFO(key_func=key)
    for action in actions:
        action(f)
    assert f.has_synced() is expected


def test_pop_unblocks_when_closed():
    f = fifo(Obj("foo", 5))
    results = []

    def consumer():
        try:
            f.pop(lambda d, i: None)
        except FIFOClosedError as exc:
            results.append(exc)

    threads = [threading.Thread(target=consumer) for _ in range(10)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    f.close()
    for t in threads:
        t.join(timeout=1)
        assert not t.is_alive()
    assert len(results) == 10 and f.is_closed()


def test_closed_queue_drains_before_raising():
    f = DeltaFIFO(key_func=key)
    f.add(Obj("a", 1))
    f.close()
    assert pop_newest(f) == Obj("a", 1)
    with pytest.raises(FIFOClosedError):
        pop(f)


def test_pop_timeout_raises_timeout_error():
    f = DeltaFIFO(key_func=key)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        f.pop(lambda d, i: None, timeout=0.1)
    assert time.monotonic() - started >= 0.09


def test_process_runs_under_the_lock_so_the_store_moves_with_the_queue():
    indexer = Indexer()
    f = DeltaFIFO(known_objects=indexer)
    obj = {"metadata": {"name": "p", "namespace": "ns"}}
    f.add(obj)

    def process(deltas, initial):
        # A producer call made now must wait until the store reflects the pop.
        t = threading.Thread(target=f.replace, args=([], "1"))
        t.start()
        t.join(timeout=0.1)
        assert t.is_alive(), "replace ran while process held the queue"
        indexer.add(deltas[-1].object)
        threads.append(t)

    threads: list[threading.Thread] = []
    f.pop(process)
    threads[0].join()
    assert f.get_by_key("ns/p") == [Delta(DELETED, DeletedFinalStateUnknown("ns/p", obj))]


def test_two_deletions_in_a_row_keep_the_informative_one():
    f = fifo(Obj("foo", 1))
    f.delete(DeletedFinalStateUnknown("foo", Obj("foo", 1)))
    f.delete(Obj("foo", 2))
    assert f.get_by_key("foo") == [Delta(DELETED, Obj("foo", 2))]
    f.delete(DeletedFinalStateUnknown("foo", Obj("foo", 1)))
    assert f.get_by_key("foo") == [Delta(DELETED, Obj("foo", 2))]


def _cm(name: str, rv: int) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)}}


def _settled_at_each_pop(f: DeltaFIFO) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    while f.list_keys():
        f.pop(lambda deltas, initial: seen.append((f.key_of(deltas), f.settled_version())), timeout=1)
    return seen


def test_the_store_is_at_a_version_only_when_nothing_else_is_queued():
    f = DeltaFIFO()
    f.add(_cm("a", 10))
    f.add(_cm("b", 11))
    f.update(_cm("a", 12))  # queued with a's first delta: a is popped before b's 11
    assert _settled_at_each_pop(f) == [("ns/a", ""), ("ns/b", "12")]
    f.update(_cm("b", 13))
    assert _settled_at_each_pop(f) == [("ns/b", "13")]


def test_a_backlog_in_order_leaves_the_store_at_each_version():
    f = DeltaFIFO()
    f.add(_cm("a", 10))
    f.add(_cm("b", 11))
    f.add(_cm("c", 12))
    assert _settled_at_each_pop(f) == [("ns/a", "10"), ("ns/b", "11"), ("ns/c", "12")]


def test_a_list_and_a_bookmark_move_the_version_without_a_change():
    f = DeltaFIFO()
    f.replace([_cm("a", 3), _cm("b", 5)], "20")  # the list's version, not its newest object's
    assert _settled_at_each_pop(f) == [("ns/a", ""), ("ns/b", "20")]
    f.update_resource_version("25")  # a bookmark
    f.add(_cm("c", 26))
    f.delete(_cm("c", 27))
    assert _settled_at_each_pop(f) == [("ns/c", "27")]


class _Consumer:
    """A consumer waiting in ``pop`` on a thread of its own, as the informer's loop does;
    it notes each processing and the thread it ran on."""

    def __init__(self, fifo: DeltaFIFO, fail_on: str = "", slow_on: str = "") -> None:
        self.fifo, self.fail_on, self.slow_on = fifo, fail_on, slow_on
        self.seen: list[tuple[str, object, str]] = []
        self.pops = 0  # pops that returned to the consumer's loop
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="consumer", daemon=True)
        self.thread.start()

    def process(self, deltas, initial) -> None:
        newest = deltas[-1].object
        self.seen.append((newest.name, newest.val, threading.current_thread().name))
        if newest.name == self.slow_on:
            time.sleep(0.3)
        if newest.name == self.fail_on:
            raise RuntimeError("process bug")

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.fifo.pop(self.process, timeout=0.05)
                self.pops += 1
            except TimeoutError:
                continue
            except FIFOClosedError:
                return
            except RuntimeError:
                self.pops += 1

    def waiting(self) -> bool:
        return self.fifo._idle_consumer is not None

    def close(self) -> None:
        self.stop.set()
        self.fifo.close()
        self.thread.join(5)


def _wait(check, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_a_change_finding_the_consumer_idle_is_processed_by_its_producer():
    fifo = DeltaFIFO(key, process_while_idle=True)
    consumer = _Consumer(fifo)
    try:
        _wait(consumer.waiting)
        fifo.add(Obj("a", 1))
        fifo.update(Obj("a", 2))
        assert [s[:2] for s in consumer.seen] == [("a", 1), ("a", 2)]  # done when add returned
        assert {s[2] for s in consumer.seen} == {threading.current_thread().name}
        assert consumer.pops == 0 and len(fifo) == 0
    finally:
        consumer.close()


def test_without_it_the_consumer_processes_every_change():
    fifo = DeltaFIFO(key)
    consumer = _Consumer(fifo)
    try:
        _wait(consumer.waiting)
        fifo.add(Obj("a", 1))
        _wait(lambda: consumer.pops == 1)
        assert consumer.seen == [("a", 1, "consumer")]
    finally:
        consumer.close()


def test_changes_behind_a_busy_consumer_are_queued_for_it_in_order():
    fifo = DeltaFIFO(key, process_while_idle=True)
    consumer = _Consumer(fifo, slow_on="a")
    try:
        _wait(consumer.waiting)
        fifo.add(Obj("a", 1))  # processed here
        fifo.replace([Obj("a", 1), Obj("b", 1)], "5")  # a relist: always the consumer's
        fifo.add(Obj("c", 1))  # queued behind it: not processed here
        _wait(lambda: len(consumer.seen) == 4)
        assert [s[:2] for s in consumer.seen] == [("a", 1), ("a", 1), ("b", 1), ("c", 1)]
        assert [s[2] for s in consumer.seen[1:]] == ["consumer"] * 3
    finally:
        consumer.close()


def test_a_failing_process_run_by_a_producer_is_logged_and_the_queue_goes_on(caplog):
    fifo = DeltaFIFO(key, process_while_idle=True)
    consumer = _Consumer(fifo, fail_on="bad")
    try:
        _wait(consumer.waiting)
        fifo.add(Obj("bad", 1))  # raises in process: not in the producer
        _wait(consumer.waiting)
        fifo.add(Obj("good", 1))
        assert [s[:2] for s in consumer.seen] == [("bad", 1), ("good", 1)]
        assert "failed to process deltas" in caplog.text and len(fifo) == 0
    finally:
        consumer.close()


def test_a_closed_queue_hands_nothing_over():
    fifo = DeltaFIFO(key, process_while_idle=True)
    consumer = _Consumer(fifo)
    _wait(consumer.waiting)
    consumer.close()
    fifo._idle_consumer = consumer.process  # as if a consumer still waited
    fifo.add(Obj("late", 1))
    assert consumer.seen == [] and len(fifo) == 1
