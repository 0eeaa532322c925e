"""A stop signal that says when it is given: callbacks instead of threads polling it."""

from __future__ import annotations

import logging
import threading

import pytest

import informer_core.informer as informer_module
from control_plane.fake import FakeCluster
from informer_core.factory import GroupVersionResource, SharedInformerFactory
from informer_core.informer import SharedIndexInformer
from informer_core.stop import StopEvent, when_set
from tests.helpers import wait_until
from tests.informer_core.fakes import FakeListerWatcher, obj

CONFIGMAPS = GroupVersionResource("", "v1", "configmaps")


def test_each_callback_is_called_once_on_the_thread_that_sets_it_unless_forgotten():
    stop = StopEvent()
    calls: list[tuple[str, str]] = []
    stop.when_set(lambda: calls.append(("kept", threading.current_thread().name)))
    forget = stop.when_set(lambda: calls.append(("forgotten", "")))
    forget()
    setter = threading.Thread(target=stop.set, name="setter")
    setter.start()
    setter.join()
    stop.set()  # again: nothing more
    assert stop.is_set() and calls == [("kept", "setter")]
    stop.when_set(lambda: calls.append(("late", threading.current_thread().name)))
    assert calls[-1] == ("late", threading.current_thread().name)  # already set: called now


def test_a_failing_callback_is_logged_and_the_others_still_called(caplog):
    stop = StopEvent()
    called = []
    stop.when_set(lambda: 1 / 0)
    stop.when_set(lambda: called.append(True))
    with caplog.at_level(logging.ERROR, logger="informer_core.stop"):
        stop.set()
    assert called == [True] and "a stop callback failed" in caplog.text


def test_a_plain_event_cannot_tell():
    assert when_set(threading.Event(), lambda: None) is None


def _pops_while_idle(stop: threading.Event, monkeypatch) -> int:
    """How many times an idle informer's loop asked its queue for work in half a second
    (its poll made a hundred times more frequent, so that polling shows)."""
    monkeypatch.setattr(informer_module, "_POP_TIMEOUT", 0.005)
    informer = SharedIndexInformer(FakeListerWatcher([obj("a")]))
    thread = threading.Thread(target=informer.run, args=(stop,))
    thread.start()
    try:
        wait_until(informer.has_synced, message="sync")
        fifo = informer._fifo
        pops = []
        original = fifo.pop
        monkeypatch.setattr(fifo, "pop", lambda *a, **k: (pops.append(1), original(*a, **k))[1])
        threading.Event().wait(0.5)
        return len(pops)
    finally:
        stop.set()
        thread.join(5)
        assert not thread.is_alive()


def test_an_informer_told_of_its_stop_waits_on_its_queue_alone(monkeypatch):
    assert _pops_while_idle(StopEvent(), monkeypatch) <= 1
    assert _pops_while_idle(threading.Event(), monkeypatch) >= 10  # looked at it, as before


def _threads(prefix: str) -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(prefix)]


@pytest.mark.parametrize("resync", [0.0, 2.0])
def test_a_reflector_told_of_its_stop_runs_a_helper_only_for_resyncs(resync):
    stop = StopEvent()
    informer = SharedIndexInformer(FakeListerWatcher([obj("a")]), resync_period=resync,
                                   name=f"told-{resync}")
    thread = threading.Thread(target=informer.run, args=(stop,))
    thread.start()
    wait_until(informer.has_synced, message="sync")
    helpers = _threads(f"reflector-supervisor-told-{resync}")
    stop.set()  # the watch in flight aborted from here: the informer ends
    thread.join(5)
    assert not thread.is_alive()
    assert len(helpers) == (1 if resync else 0)
    assert stop._callbacks == {}  # each waiter forgot its callback or was called


def test_a_factory_follows_a_stop_that_tells_without_a_thread_and_forgets_it_on_shutdown():
    cluster = FakeCluster()
    cluster.ensure_namespace("a")
    factory = SharedInformerFactory(lister_watcher_func=cluster.lister_watcher,
                                    discovery=cluster.discovery(min_refresh_interval=0))
    generic = factory.for_resource(CONFIGMAPS)
    stop = StopEvent()
    before = set(_threads("informer-factory-stop"))
    factory.start(stop)
    assert factory.wait_for_cache_sync(stop, timeout=5) == {CONFIGMAPS: True}
    assert set(_threads("informer-factory-stop")) == before
    stop.set()
    assert generic.stop_event.is_set()
    generic.thread.join(5)
    assert not generic.thread.is_alive()
    other = StopEvent()
    second = SharedInformerFactory(lister_watcher_func=cluster.lister_watcher,
                                   discovery=cluster.discovery(min_refresh_interval=0))
    second.for_resource(CONFIGMAPS)
    second.start(other)
    second.shutdown()
    assert other._callbacks == {} and not other.is_set()  # the caller's event holds nothing
