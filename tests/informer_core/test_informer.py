"""SharedIndexInformer: handler sequences, relist correctness, isolation, resync, transforms."""

from __future__ import annotations

import threading
import time

import pytest

from informer_core.delta_fifo import DeletedFinalStateUnknown
from informer_core.encoded import EncodedObject
from informer_core.informer import ResourceEventHandlerFuncs, SharedIndexInformer
from informer_core.store import LABEL_INDEX, NAMESPACE_INDEX
from tests.helpers import wait_until
from tests.informer_core.fakes import FakeListerWatcher, RecordingHandler, obj


def names(informer):
    return sorted(o["metadata"]["name"] for o in informer.get_store().list())


# What a handler sees for the objects "a" and "b" listed, then _create_update_delete.
EXACT_SEQUENCE = [
    ("add", "a", True), ("add", "b", True), ("add", "c", False),
    ("update", "a", "1", "4"), ("delete", "b")]


def _create_update_delete(fake):
    """One creation, one update and one deletion, after "a" and "b" were listed."""
    fake.create(obj("c"))
    fake.update(obj("a", data={"x": "1"}))
    fake.delete(obj("b"))


def test_handler_sees_the_exact_sequence(run_in_thread):
    fake = FakeListerWatcher([obj("a"), obj("b")])
    informer = SharedIndexInformer(fake)
    handler = RecordingHandler()
    informer.add_event_handler(handler)
    run_in_thread(informer)
    wait_until(informer.has_synced, message="sync")
    _create_update_delete(fake)
    wait_until(lambda: len(handler.calls) == 5, message="five calls")
    assert handler.snapshot() == EXACT_SEQUENCE
    assert names(informer) == ["a", "c"]


def test_has_synced_only_after_the_initial_list_is_in_the_indexer(run_in_thread):
    fake = FakeListerWatcher([obj(f"o{i}") for i in range(50)])
    informer = SharedIndexInformer(fake)
    assert not informer.has_synced()
    seen_at_sync = []
    run_in_thread(informer)
    wait_until(informer.has_synced)
    seen_at_sync.append(len(informer.get_store().list_keys()))
    assert seen_at_sync == [50]
    assert informer.last_sync_resource_version() == "50"


def test_relist_turns_missed_deletions_into_tombstones_and_changes_into_updates(run_in_thread):
    fake = FakeListerWatcher([obj("keep"), obj("change"), obj("gone")])
    informer = SharedIndexInformer(fake)
    handler = RecordingHandler()
    informer.add_event_handler(handler)
    run_in_thread(informer)
    wait_until(informer.has_synced)
    received = []
    informer.add_event_handler(ResourceEventHandlerFuncs(delete_func=received.append))
    # While the watch is down: one change, one deletion, one creation; history expires.
    fake.mutate_silently(create=[obj("new")], update=[obj("change", data={"v": "2"})],
                         delete=[obj("gone")])
    fake.break_watches()
    wait_until(lambda: ("delete", "tombstone:ns/gone") in handler.kinds(), message="tombstone")
    wait_until(lambda: ("add", "new") in handler.kinds(), message="add of new")
    after = handler.snapshot()[3:]
    assert ("update", "change", "2", "5") in after
    assert ("add", "new", False) in after
    assert not any(c[1] == "keep" for c in after), "an unchanged object must not be re-sent"
    # Each listener is served on its own thread: the second one's tombstone may come later.
    def tombstones():
        return [o for o in received if isinstance(o, DeletedFinalStateUnknown)]
    tombstone = wait_until(tombstones, message="tombstone for the second handler")[0]
    assert tombstone.key == "ns/gone" and tombstone.obj["metadata"]["name"] == "gone"
    assert names(informer) == ["change", "keep", "new"]


def test_a_slow_handler_does_not_delay_another(run_in_thread):
    fake = FakeListerWatcher()
    informer = SharedIndexInformer(fake)
    slow, fast = RecordingHandler(delay=0.5), RecordingHandler()
    informer.add_event_handler(slow)
    informer.add_event_handler(fast)
    run_in_thread(informer)
    wait_until(informer.has_synced)
    started = time.monotonic()
    for i in range(10):
        fake.create(obj(f"o{i}"))
    wait_until(lambda: len(fast.calls) == 10, timeout=2, message="fast handler")
    assert time.monotonic() - started < 0.5
    assert len(slow.calls) <= 1


def test_a_failing_handler_does_not_stop_delivery(run_in_thread):
    fake = FakeListerWatcher()
    informer = SharedIndexInformer(fake)
    calls = []

    def boom(o):
        calls.append(o["metadata"]["name"])
        raise RuntimeError("handler bug")

    informer.add_event_handler(ResourceEventHandlerFuncs(add_func=boom))
    run_in_thread(informer)
    wait_until(informer.has_synced)
    fake.create(obj("a"))
    fake.create(obj("b"))
    wait_until(lambda: calls == ["a", "b"], message="both adds despite the failure")


class InlineRecorder(RecordingHandler):
    """A handler that runs inline: it notes the thread of every call."""

    runs_inline = True

    def __init__(self, fail_on: str = "") -> None:
        super().__init__()
        self.threads: set[str] = set()
        self.fail_on = fail_on

    def _rec(self, call: tuple) -> None:
        self.threads.add(threading.current_thread().name)
        super()._rec(call)
        if call[1] == self.fail_on:
            raise RuntimeError("handler bug")


def _listener_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("informer-listener")]


def test_an_inline_handler_gets_the_same_calls_in_order_on_the_informers_own_thread(run_in_thread):
    fake = FakeListerWatcher([obj("a"), obj("b")])
    informer = SharedIndexInformer(fake, name="inline")
    inline, threaded = InlineRecorder(), RecordingHandler()
    informer.add_event_handler(inline)
    informer.add_event_handler(threaded)
    run_in_thread(informer)
    wait_until(informer.has_synced, message="sync")
    _create_update_delete(fake)
    wait_until(lambda: len(threaded.calls) == 5, message="five calls")
    wait_until(lambda: len(inline.calls) == 5, message="five inline calls")
    assert inline.snapshot() == threaded.snapshot() == EXACT_SEQUENCE
    # no thread of its own: the one listener thread is the threaded handler's
    assert len(_listener_threads()) == 1
    assert not any(name.startswith("informer-listener") for name in inline.threads)


def test_a_failing_inline_handler_stops_neither_its_own_calls_nor_the_others(run_in_thread):
    fake = FakeListerWatcher()
    informer = SharedIndexInformer(fake)
    failing, other = InlineRecorder(fail_on="a"), InlineRecorder()
    informer.add_event_handler(failing)
    informer.add_event_handler(other)
    run_in_thread(informer)
    wait_until(informer.has_synced)
    fake.create(obj("a"))
    fake.create(obj("b"))
    wait_until(lambda: len(other.calls) == 2, message="both adds to the other handler")
    assert failing.kinds() == [("add", "a"), ("add", "b")]


def test_a_late_inline_handler_first_gets_everything_cached_and_a_removed_one_nothing_more(
        run_in_thread):
    fake = FakeListerWatcher([obj("a"), obj("b")])
    informer = SharedIndexInformer(fake)
    run_in_thread(informer)
    wait_until(informer.has_synced)
    late = InlineRecorder()
    registration = informer.add_event_handler(late)
    assert registration.has_synced()  # delivered as it was added
    assert sorted(late.snapshot()) == [("add", "a", True), ("add", "b", True)]
    fake.create(obj("c"))
    wait_until(lambda: len(late.calls) == 3)
    assert late.snapshot()[2] == ("add", "c", False)
    informer.remove_event_handler(registration)
    witness = RecordingHandler()
    informer.add_event_handler(witness)
    fake.create(obj("d"))
    wait_until(lambda: ("add", "d") in witness.kinds(), message="the change reached the informer")
    assert len(late.calls) == 3


def test_a_late_handler_first_gets_everything_cached(run_in_thread):
    fake = FakeListerWatcher([obj("a"), obj("b")])
    informer = SharedIndexInformer(fake)
    run_in_thread(informer)
    wait_until(informer.has_synced)
    late = RecordingHandler()
    registration = informer.add_event_handler(late)
    wait_until(registration.has_synced, message="late handler synced")
    fake.create(obj("c"))
    wait_until(lambda: len(late.calls) == 3)
    assert sorted(late.snapshot()[:2]) == [("add", "a", True), ("add", "b", True)]
    assert late.snapshot()[2] == ("add", "c", False)


def test_removed_handler_gets_nothing_more(run_in_thread):
    fake = FakeListerWatcher()
    informer = SharedIndexInformer(fake)
    handler, other = RecordingHandler(), RecordingHandler()
    registration = informer.add_event_handler(handler)
    informer.add_event_handler(other)
    run_in_thread(informer)
    wait_until(informer.has_synced)
    fake.create(obj("a"))
    wait_until(lambda: len(handler.calls) == 1 and len(other.calls) == 1)
    informer.remove_event_handler(registration)
    fake.create(obj("b"))
    wait_until(lambda: len(other.calls) == 2)
    assert len(handler.calls) == 1
    assert informer.handler_count() == 1


def test_resync_goes_only_to_handlers_due_for_it(run_in_thread):
    fake = FakeListerWatcher([obj("a")])
    informer = SharedIndexInformer(fake, resync_period=1.0)
    resyncing, quiet = RecordingHandler(), RecordingHandler()
    informer.add_event_handler(resyncing, resync_period=1.0)
    informer.add_event_handler(quiet, resync_period=0)
    run_in_thread(informer)
    wait_until(lambda: any(c[0] == "update" for c in resyncing.snapshot()), timeout=4,
               message="a resync update")
    update = next(c for c in resyncing.snapshot() if c[0] == "update")
    assert update == ("update", "a", "1", "1")
    assert [c[0] for c in quiet.snapshot()] == ["add"]


def test_an_informer_without_resync_ignores_handler_resync_periods(run_in_thread):
    fake = FakeListerWatcher([obj("a")])
    informer = SharedIndexInformer(fake)
    handler = RecordingHandler()
    informer.add_event_handler(handler, resync_period=1.0)
    run_in_thread(informer)
    wait_until(informer.has_synced)
    time.sleep(1.5)
    assert [c[0] for c in handler.snapshot()] == ["add"]


def test_transform_applies_to_stored_and_delivered_objects(run_in_thread):
    fake = FakeListerWatcher([obj("a", managed=1)])
    fake.objects["ns/a"]["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    informer = SharedIndexInformer(fake)

    def strip(o):
        o["metadata"].pop("managedFields", None)
        return o

    informer.set_transform(strip)
    handler = []
    informer.add_event_handler(ResourceEventHandlerFuncs(add_func=handler.append))
    run_in_thread(informer)
    wait_until(lambda: handler)
    assert "managedFields" not in handler[0]["metadata"]
    assert "managedFields" not in informer.get_store().get_by_key("ns/a")["metadata"]
    with pytest.raises(RuntimeError):
        informer.set_transform(strip)
    with pytest.raises(RuntimeError):
        informer.set_watch_error_handler(print)


def test_cache_is_encoded_and_indexed_by_namespace_and_labels(run_in_thread):
    fake = FakeListerWatcher([obj("a", "n1", {"app": "web"}), obj("b", "n2", {"app": "db"})])
    informer = SharedIndexInformer(fake)
    raw = []

    class Raw:
        accepts_encoded = True

        def on_add(self, o, initial):
            raw.append(o)

        def on_update(self, old, new):
            pass

        def on_delete(self, o):
            pass

    informer.add_event_handler(Raw())
    run_in_thread(informer)
    wait_until(lambda: len(raw) == 2)
    assert all(isinstance(o, EncodedObject) for o in raw)
    indexer = informer.get_indexer()
    assert indexer.index_keys(LABEL_INDEX, "app=web") == ["n1/a"]
    assert indexer.index_keys(NAMESPACE_INDEX, "n2") == ["n2/b"]
    assert all(isinstance(o, EncodedObject) for o in indexer.list_encoded())


def test_watch_error_handler_sees_failures(run_in_thread):
    fake = FakeListerWatcher([obj("a")])
    informer = SharedIndexInformer(fake)
    errors = []
    informer.set_watch_error_handler(errors.append)
    run_in_thread(informer)
    wait_until(informer.has_synced)
    fake.break_watches()
    wait_until(lambda: errors, message="a reported error")
    assert isinstance(errors[0], ConnectionError)


def test_run_twice_is_refused_and_stop_ends_every_thread():
    fake = FakeListerWatcher([obj("a")])
    informer = SharedIndexInformer(fake)
    informer.add_event_handler(RecordingHandler())
    before = set(threading.enumerate())
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,))
    thread.start()
    wait_until(informer.has_synced)
    with pytest.raises(RuntimeError):
        informer.run(stop)
    stop.set()
    thread.join(2)
    assert not thread.is_alive() and informer.is_stopped()
    wait_until(lambda: set(threading.enumerate()) <= before, message="threads to end")


class SyncedRecorder(RecordingHandler):
    def on_synced(self) -> None:
        self._rec(("synced",))


@pytest.mark.parametrize("initial", [0, 1, 30])
def test_on_synced_comes_once_right_after_the_initial_list(run_in_thread, initial):
    fake = FakeListerWatcher([obj(f"o{i:02}") for i in range(initial)])
    informer = SharedIndexInformer(fake)
    early = SyncedRecorder()
    informer.add_event_handler(early)
    run_in_thread(informer)
    wait_until(lambda: ("synced",) in early.snapshot(), message="on_synced")
    late = SyncedRecorder()  # added after the sync: the cached objects, then on_synced
    informer.add_event_handler(late)
    fake.create(obj("after"))
    fake.send_bookmark()
    for handler in (early, late):
        wait_until(lambda h=handler: ("add", "after", False) in h.snapshot(), message="a live add")
        calls = handler.snapshot()
        assert calls[:initial] == [("add", f"o{i:02}", True) for i in range(initial)]
        assert calls[initial:] == [("synced",), ("add", "after", False)]


class SettledRecorder:
    """Keeps the view a consistent-point handler builds, and checks it at each settled version."""

    accepts_encoded = False
    accepts_settled = True

    def __init__(self, fake: FakeListerWatcher) -> None:
        self.fake = fake
        self.view: dict[str, str] = {}
        self.settled: list[str] = []
        self.wrong: list[str] = []
        self.lock = threading.Lock()

    def _check(self, settled: str) -> None:
        if not settled:
            return
        with self.lock:
            self.settled.append(settled)
            want = state_at(self.fake, int(settled))
            if self.view != want:
                self.wrong.append(f"at {settled}: {self.view} != {want}")

    def on_add(self, o, is_in_initial_list, settled=""):
        self.view[o["metadata"]["name"]] = o["metadata"]["resourceVersion"]
        self._check(settled)

    def on_update(self, old, new, settled=""):
        self.on_add(new, False, settled)

    def on_delete(self, o, settled=""):
        o = o.obj if isinstance(o, DeletedFinalStateUnknown) else o
        self.view.pop(o["metadata"]["name"], None)
        self._check(settled)

    def on_settled(self, version):
        self._check(version)


def state_at(fake: FakeListerWatcher, version: int) -> dict[str, str]:
    """The fake server's objects (name -> resourceVersion) after event ``version``."""
    state: dict[str, str] = {}
    with fake.cond:
        history = list(fake.history[:version])
    for event in history:
        name = event.object["metadata"].get("name")
        if event.type in ("ADDED", "MODIFIED"):
            state[name] = event.object["metadata"]["resourceVersion"]
        elif event.type == "DELETED":
            state.pop(name, None)
    return state


def test_a_settled_version_is_told_exactly_when_the_store_holds_the_servers_state_at_it(run_in_thread):
    fake = FakeListerWatcher([obj(f"o{i}") for i in range(5)])
    informer = SharedIndexInformer(fake)
    handler = SettledRecorder(fake)
    informer.add_event_handler(handler)
    run_in_thread(informer)
    wait_until(lambda: handler.settled, message="the initial list's version")
    assert handler.settled == ["5"], "the initial list is told once, with its version"
    for n in range(300):  # bursts to a few objects: the queue groups them by object
        name = f"o{n % 5}"
        present = f"ns/{name}" in fake.objects
        if n % 11 == 3 and present:
            fake.delete(obj(name))
        elif present:
            fake.update(obj(name, data={"n": str(n)}))
        else:
            fake.create(obj(name))
    last = str(fake.rv)
    wait_until(lambda: handler.settled[-1:] == [last], message="the last version")
    assert handler.wrong == []
    assert [int(v) for v in handler.settled] == sorted({int(v) for v in handler.settled})
    fake.send_bookmark()  # nothing queued: the bookmark's version comes alone
    wait_until(lambda: handler.settled[-1] == str(fake.rv), message="the bookmark's version")
    assert handler.wrong == []
    late = SettledRecorder(fake)  # added now: the cached objects, then where they stand
    informer.add_event_handler(late)
    wait_until(lambda: late.settled == [str(fake.rv)], message="the late handler's version")
    assert late.wrong == []


def test_a_consistent_read_is_the_servers_state_at_the_version_it_returns(run_in_thread):
    fake = FakeListerWatcher([obj(f"o{i}") for i in range(5)])
    informer = SharedIndexInformer(fake)
    run_in_thread(informer)
    wait_until(informer.has_synced)
    store = informer.get_store()
    done = threading.Event()
    reads: list[tuple[dict, str]] = []

    def reader() -> None:
        while not done.is_set():
            reads.append(informer.read_consistently(lambda: {
                o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in store.list()}))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for n in range(300):
            name = f"o{n % 5}"
            if f"ns/{name}" in fake.objects and n % 7 == 3:
                fake.delete(obj(name))
            elif f"ns/{name}" in fake.objects:
                fake.update(obj(name, data={"n": str(n)}))
            else:
                fake.create(obj(name))
        wait_until(lambda: informer.last_sync_resource_version() == str(fake.rv))
        time.sleep(0.1)
    finally:
        done.set()
        thread.join()
    placed = [(content, version) for content, version in reads if version]
    assert len(placed) > 10, "most reads find the store at a version"
    assert [v for c, v in placed if c != state_at(fake, int(v))] == []
    assert placed[-1][1] == str(fake.rv)
    assert informer.settled_version() == str(fake.rv), "at rest, the version is there to read"
