"""Reflector request choices, relists, backoff and stopping (fault injection via the fake)."""

from __future__ import annotations

import threading
import time

import pytest

from informer_core.backoff import ExponentialBackoff
from informer_core.delta_fifo import DeltaFIFO
from informer_core.errors import APIStatusError, ResourceExpiredError
from informer_core.reflector import Reflector
from informer_core.store import Indexer
from tests.helpers import wait_until
from tests.informer_core.fakes import FakeListerWatcher, obj


class RecordingStore:
    """A ReflectorStore that records calls and keeps an Indexer up to date."""

    def __init__(self):
        self.indexer = Indexer()
        self.calls: list[tuple] = []
        self.lock = threading.Lock()

    def _rec(self, *call):
        with self.lock:
            self.calls.append(call)

    def add(self, o):
        self._rec("add", o["metadata"]["name"])
        self.indexer.add(o)

    def update(self, o):
        self._rec("update", o["metadata"]["name"])
        self.indexer.update(o)

    def delete(self, o):
        self._rec("delete", o["metadata"]["name"])
        self.indexer.delete(o)

    def replace(self, objs, rv):
        self._rec("replace", sorted(o["metadata"]["name"] for o in objs), rv)
        self.indexer.replace(objs, rv)

    def resync(self):
        self._rec("resync")

    def of(self, kind):
        with self.lock:
            return [c for c in self.calls if c[0] == kind]


def no_backoff():
    return ExponentialBackoff(initial=0.01, cap=0.02, jitter=0.0)


def test_first_list_asks_rv_0_and_pages_without_rv(run_in_thread):
    fake = FakeListerWatcher([obj(f"o{i}") for i in range(12)])
    store = RecordingStore()
    run_in_thread(Reflector(fake, store, page_size=5, backoff=no_backoff()))
    wait_until(lambda: store.of("replace"), message="replace")
    first, *rest = fake.list_calls
    assert (first.resource_version, first.limit, first.continue_token) == ("0", 5, "")
    assert len(rest) == 2
    assert all(c.resource_version == "" and c.continue_token and c.limit == 5 for c in rest)
    assert store.of("replace") == [("replace", sorted(f"o{i}" for i in range(12)), "12")]


def test_watch_starts_at_the_list_version_with_bookmarks_and_a_timeout(run_in_thread):
    fake = FakeListerWatcher([obj("a")])
    store = RecordingStore()
    run_in_thread(Reflector(fake, store, backoff=no_backoff()))
    wait_until(lambda: fake.watch_calls, message="a watch")
    watch = fake.watch_calls[0]
    assert watch.resource_version == "1"
    assert watch.allow_watch_bookmarks is True
    assert 300 <= watch.timeout_seconds < 600


def test_watch_events_reach_the_store_and_advance_the_version(run_in_thread):
    fake = FakeListerWatcher([obj("a")])
    store = RecordingStore()
    reflector = Reflector(fake, store, backoff=no_backoff())
    run_in_thread(reflector)
    wait_until(lambda: fake.watch_calls)
    fake.create(obj("b"))
    fake.update(obj("a", data={"k": "v"}))
    fake.delete(obj("b"))
    wait_until(lambda: len(store.calls) == 4, message="four store calls")
    assert store.calls[1:] == [("add", "b"), ("update", "a"), ("delete", "b")]
    assert reflector.last_sync_resource_version() == "4"


def test_clean_close_resumes_from_the_bookmark_version_without_relisting(run_in_thread):
    fake = FakeListerWatcher([obj("a")])
    store = RecordingStore()
    reflector = Reflector(fake, store, backoff=no_backoff())
    run_in_thread(reflector)
    wait_until(lambda: fake.watch_calls)
    fake.send_bookmark()
    wait_until(lambda: reflector.last_sync_resource_version() == "2", message="bookmark")
    fake.close_watches()
    wait_until(lambda: len(fake.watch_calls) == 2, message="a second watch")
    assert fake.watch_calls[1].resource_version == "2"
    assert len(fake.list_calls) == 1


def test_watch_error_410_relists_at_the_last_version_and_reports_it(run_in_thread):
    fake = FakeListerWatcher([obj("a")])
    store = RecordingStore()
    errors: list[BaseException] = []
    reflector = Reflector(fake, store, backoff=no_backoff(), watch_error_handler=errors.append)
    run_in_thread(reflector)
    wait_until(lambda: fake.watch_calls)
    fake.create(obj("b"))
    wait_until(lambda: reflector.last_sync_resource_version() == "2")
    fake.send_error(410)
    wait_until(lambda: len(fake.list_calls) == 2, message="a relist")
    assert fake.list_calls[1].resource_version == "2"
    assert any(isinstance(e, ResourceExpiredError) for e in errors)
    assert reflector.stats.relists >= 1


def test_a_seeded_reflector_watches_from_the_seed_without_listing(run_in_thread):
    fake = FakeListerWatcher([obj("a"), obj("b")])
    fake.update(obj("a", data={"k": "v"}))  # after the seed's version (2): told by the watch
    store = RecordingStore()
    reflector = Reflector(fake, store, backoff=no_backoff())
    reflector.seed([obj("a"), obj("b")], "2", current_at=1000.0)
    assert reflector.stats.unwatched_since == 1000.0  # as old as the seed until it watches
    run_in_thread(reflector)
    wait_until(lambda: store.of("update"), message="the change after the seed")
    assert fake.list_calls == []
    assert fake.watch_calls[0].resource_version == "2"
    assert store.calls[:2] == [("replace", ["a", "b"], "2"), ("update", "a")]
    assert reflector.stats.seeded and reflector.stats.lists == 0


def test_a_seed_the_api_server_no_longer_has_is_listed_again(run_in_thread):
    fake = FakeListerWatcher([obj("a"), obj("b")])
    fake.delete(obj("b"))
    fake.expire_before = 3  # the seed's version is gone
    store = RecordingStore()
    errors: list[BaseException] = []
    reflector = Reflector(fake, store, backoff=no_backoff(), watch_error_handler=errors.append)
    reflector.seed([obj("a"), obj("b")], "2", current_at=1000.0)
    run_in_thread(reflector)
    wait_until(lambda: len(store.of("replace")) == 2, message="the list after the 410")
    assert store.of("replace")[1][1:] == (["a"], "3")  # the store is told b went
    assert any(isinstance(e, ResourceExpiredError) for e in errors)


def test_relist_at_an_expired_version_retries_with_the_latest(run_in_thread):
    fake = FakeListerWatcher([obj("a"), obj("b")])
    store = RecordingStore()
    errors: list[BaseException] = []
    reflector = Reflector(fake, store, backoff=no_backoff(), watch_error_handler=errors.append)
    run_in_thread(reflector)
    wait_until(lambda: fake.watch_calls)
    # While nothing watches: b is deleted, c created, and history before now expires.
    fake.mutate_silently(create=[obj("c")], delete=[obj("b")])
    fake.break_watches()
    wait_until(lambda: len(store.of("replace")) == 2, message="a relist")
    versions = [c.resource_version for c in fake.list_calls]
    assert versions[:3] == ["0", "2", ""]
    assert store.of("replace")[-1][1] == ["a", "c"]
    assert sum(isinstance(e, ResourceExpiredError) for e in errors) >= 2  # watch and list
    assert sorted(store.indexer.list_keys()) == ["ns/a", "ns/c"]


def test_broken_watch_is_reported_and_resumed_without_relist(run_in_thread):
    fake = FakeListerWatcher([obj("a")])
    store = RecordingStore()
    errors: list[BaseException] = []
    run_in_thread(Reflector(fake, store, backoff=no_backoff(), watch_error_handler=errors.append))
    wait_until(lambda: fake.watch_calls)
    fake.break_watches()
    wait_until(lambda: len(fake.watch_calls) == 2, message="a second watch")
    assert isinstance(errors[0], ConnectionError)
    assert fake.watch_calls[1].resource_version == "1"
    assert len(fake.list_calls) == 1


def test_connection_refused_on_watch_retries_the_watch(run_in_thread):
    fake = FakeListerWatcher([obj("a")])
    fake.watch_errors = [ConnectionError("refused"), ConnectionError("refused")]
    store = RecordingStore()
    run_in_thread(Reflector(fake, store, backoff=no_backoff()))
    wait_until(lambda: len(fake.watch_calls) == 3, message="third watch")
    assert len(fake.list_calls) == 1


def test_failed_lists_are_reported_and_retried_with_backoff(run_in_thread):
    fake = FakeListerWatcher([obj("a")])
    fake.list_errors = [APIStatusError("boom", code=500), ConnectionError("down")]
    store = RecordingStore()
    errors: list[BaseException] = []
    delays: list[float] = []

    class Recorded(ExponentialBackoff):
        def next_delay(self):
            delay = super().next_delay()
            delays.append(delay)
            return delay

    run_in_thread(Reflector(fake, store, backoff=Recorded(initial=0.01, cap=1, jitter=0.0),
                      watch_error_handler=errors.append))
    wait_until(lambda: store.of("replace"))
    assert [type(e).__name__ for e in errors] == ["APIStatusError", "ConnectionError"]
    assert delays[:2] == [0.01, 0.02]


def test_continue_token_expiry_falls_back_to_one_full_list(run_in_thread):
    fake = FakeListerWatcher([obj(f"o{i}") for i in range(6)])
    store = RecordingStore()
    original = fake.list

    def list_expiring(options):
        if options.continue_token:
            fake.list_calls.append(options)
            raise ResourceExpiredError("continue token expired")
        return original(options)

    fake.list = list_expiring
    run_in_thread(Reflector(fake, store, page_size=2, backoff=no_backoff()))
    wait_until(lambda: store.of("replace"))
    assert fake.list_calls[-1].limit == 0 and fake.list_calls[-1].continue_token == ""
    assert store.of("replace")[0][1] == sorted(f"o{i}" for i in range(6))


def test_resync_runs_every_period_when_due(run_in_thread):
    fake = FakeListerWatcher([obj("a")])
    store = RecordingStore()
    answers = iter([False, True, True, True, True, True, True])
    run_in_thread(Reflector(fake, store, resync_period=0.05, backoff=no_backoff(),
                      should_resync=lambda: next(answers, True)))
    wait_until(lambda: len(store.of("resync")) >= 2, message="resyncs")


def test_very_short_empty_watch_is_an_error(run_in_thread):
    fake = FakeListerWatcher([obj("a")])
    store = RecordingStore()
    errors: list[BaseException] = []
    run_in_thread(Reflector(fake, store, backoff=no_backoff(), watch_error_handler=errors.append))
    wait_until(lambda: fake.watch_calls)
    fake.close_watches()  # closes at once with nothing sent
    wait_until(lambda: errors, message="an error")
    assert "very short watch" in str(errors[0])


class RecordedBackoff(ExponentialBackoff):
    """A backoff that keeps every delay it gave."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.delays: list[float] = []

    def next_delay(self):
        delay = super().next_delay()
        self.delays.append(delay)
        return delay


def test_retry_now_ends_a_long_backoff_at_its_moment_of_the_spread_and_starts_it_over(
        run_in_thread):
    """A reflector backing off 60 s tries again after retry_now, at the random moment of
    the spread it drew (here half of 0.6 s), not before; its backoff starts over."""
    fake = FakeListerWatcher([obj("a")])
    fake.list_errors = [ConnectionError("down"), ConnectionError("still down")]
    backoff = RecordedBackoff(initial=60.0, cap=600.0, jitter=0.0)
    errors: list[BaseException] = []
    reflector = Reflector(fake, RecordingStore(), backoff=backoff, rng=lambda: 0.5,
                          watch_error_handler=errors.append)
    run_in_thread(reflector)
    wait_until(lambda: backoff.delays == [60.0], message="backing off after the first failure")
    began = time.monotonic()
    reflector.retry_now(within=0.6)
    wait_until(lambda: len(fake.list_calls) == 2, timeout=5, message="a list after retry_now")
    assert time.monotonic() - began >= 0.25, "not before its moment of the spread"
    wait_until(lambda: len(backoff.delays) == 2)
    assert backoff.delays == [60.0, 60.0], "the backoff started over (else 120 s)"
    reflector.retry_now()
    wait_until(lambda: fake.watch_calls, timeout=5, message="listed and watching")
    assert len(fake.list_calls) == 3 and len(errors) == 2


def test_retry_now_during_an_attempt_that_then_fails_is_not_lost(run_in_thread):
    """The API server came back while a list was still failing: the reflector tries again
    at once instead of waiting out the backoff the failure would begin."""
    fake = FakeListerWatcher([obj("a")])
    in_flight, release = threading.Event(), threading.Event()
    original = fake.list

    def slow_failure(options):
        if not in_flight.is_set():
            fake.list_calls.append(options)
            in_flight.set()
            release.wait(5)
            raise ConnectionError("timed out connecting")
        return original(options)

    fake.list = slow_failure
    reflector = Reflector(fake, RecordingStore(), backoff=RecordedBackoff(initial=60.0))
    run_in_thread(reflector)
    in_flight.wait(5)
    reflector.retry_now()
    release.set()
    wait_until(lambda: len(fake.list_calls) == 2, timeout=5, message="a list at once")


def test_retry_now_before_a_list_that_succeeds_is_spent_by_it(run_in_thread):
    """A word given while the reflector is not backing off is answered by its next attempt:
    a later failure waits out its backoff as usual."""
    fake = FakeListerWatcher([obj("a")])
    backoff = RecordedBackoff(initial=60.0)
    reflector = Reflector(fake, RecordingStore(), backoff=backoff)
    reflector.retry_now()
    run_in_thread(reflector)
    wait_until(lambda: fake.watch_calls, message="listed and watching")
    fake.break_watches()
    wait_until(lambda: backoff.delays, message="backing off after the broken watch")
    time.sleep(0.3)
    assert len(fake.watch_calls) == 1, "the broken watch waits out its backoff"


@pytest.mark.parametrize("where", ["watching", "listing", "backing-off", "told-to-retry-later"])
def test_stop_is_honoured_within_a_second(where):
    fake = FakeListerWatcher([obj("a")])
    store = RecordingStore()
    backoff = no_backoff()
    if where == "listing":
        fake.block_lists.set()
    if where in ("backing-off", "told-to-retry-later"):
        fake.list_errors = [ConnectionError("down")]
        backoff = RecordedBackoff(initial=60, jitter=0.0)
    reflector = Reflector(fake, store, backoff=backoff, rng=lambda: 1.0)
    stop = threading.Event()
    thread = threading.Thread(target=reflector.run, args=(stop,))
    thread.start()
    wait_until(lambda: fake.list_calls)  # listing (blocked), or backing off after its failure
    if where == "watching":
        wait_until(lambda: fake.watch_calls)
    if where == "told-to-retry-later":
        wait_until(lambda: backoff.delays)
        reflector.retry_now(within=60)  # its moment: the end of the spread
        time.sleep(0.3)
    started = time.monotonic()
    stop.set()
    if where == "listing":
        # The fake's list cannot be aborted; a real call would be (see the live tests).
        fake.release_lists.set()
    thread.join(2)
    assert not thread.is_alive()
    assert time.monotonic() - started < 1.0


def test_reflector_into_a_delta_fifo_syncs():
    fake = FakeListerWatcher([obj("a"), obj("b")])
    fifo = DeltaFIFO()
    reflector = Reflector(fake, fifo, backoff=no_backoff())
    stop = threading.Event()
    thread = threading.Thread(target=reflector.run, args=(stop,))
    thread.start()
    try:
        wait_until(lambda: len(fifo) == 2)
        assert not fifo.has_synced()
        fifo.pop(lambda d, i: None)
        fifo.pop(lambda d, i: None)
        assert fifo.has_synced()
    finally:
        stop.set()
        thread.join(2)


def test_backoff_doubles_to_the_cap_and_resets_after_health():
    now = [0.0]
    backoff = ExponentialBackoff(initial=0.8, cap=30, reset_after=120, jitter=1.0,
                                 clock=lambda: now[0], rng=lambda: 0.5)
    delays = [backoff.next_delay() for _ in range(8)]
    assert delays[:3] == [1.2000000000000002, 2.4000000000000004, 4.800000000000001]
    assert max(delays) == 45.0  # 30 s capped, then stretched by the jitter
    now[0] = 121
    assert backoff.next_delay() == pytest.approx(1.2)
