"""paused_gc is reentrant across threads and restores the collector's prior state."""

from __future__ import annotations

import gc
import threading

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
