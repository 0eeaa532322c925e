"""paused_gc is reentrant across threads and restores the collector's prior state."""

from __future__ import annotations

import gc
import threading
import time

from informer_core.gcpause import paused_gc


def test_nested_and_concurrent_pauses_restore_the_collector():
    assert gc.isenabled()
    inside = threading.Event()
    release = threading.Event()

    def other():
        with paused_gc():
            inside.set()
            release.wait(2)

    thread = threading.Thread(target=other)
    with paused_gc():
        thread.start()
        inside.wait(2)
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert not gc.isenabled(), "still paused while the other thread is inside"
    release.set()
    thread.join(2)
    assert gc.isenabled()


def test_a_collector_disabled_beforehand_stays_disabled():
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_pauses_hold_the_collector_off_for_a_bounded_while(monkeypatch):
    """A pause held open by one thread while others come and go still lets cyclic
    garbage be collected once it has lasted LONGEST_PAUSE."""
    import weakref

    from informer_core import gcpause

    monkeypatch.setattr(gcpause, "LONGEST_PAUSE", 0.05)

    class Node:
        pass

    def garbage_cycle():
        a, b = Node(), Node()
        a.other, b.other = b, a
        return weakref.ref(a)

    with paused_gc():
        early = garbage_cycle()
        with paused_gc():
            pass
        assert early() is not None, "collected before the pause was long"
        time.sleep(0.1)
        late = garbage_cycle()
        with paused_gc():
            pass
        assert early() is None and late() is None, "an overlapping pause held the collector off"
        assert not gc.isenabled()
    assert gc.isenabled()
