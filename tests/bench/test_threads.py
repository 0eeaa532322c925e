"""bench.threads: each thread's CPU read from /proc, and divided by changes and deliveries."""

from __future__ import annotations

import os
import threading
import time

from bench.threads import split, thread_cpu


def test_a_busy_thread_is_seen_with_its_own_cpu_and_an_idle_one_without():
    stop = threading.Event()
    ids: dict[str, int] = {}

    def busy() -> None:
        ids["busy"] = threading.get_native_id()
        end = time.thread_time() + 0.2
        while time.thread_time() < end:
            pass
        stop.wait()

    def idle() -> None:
        ids["idle"] = threading.get_native_id()
        stop.wait()

    before = thread_cpu(os.getpid())
    threads = [threading.Thread(target=busy), threading.Thread(target=idle)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    after = thread_cpu(os.getpid())
    stop.set()
    for thread in threads:
        thread.join()

    assert os.getpid() in before and os.getpid() in after  # the main thread's id is the pid
    assert ids["busy"] not in before  # started meanwhile
    assert after[ids["busy"]] >= 0.15e9
    assert after[ids["idle"]] < 0.05e9


def test_split_names_the_loop_counts_new_threads_from_zero_and_leaves_out_the_idle():
    pid = 100
    before = {100: 1_000_000, 101: 5_000_000, 102: 7_000_000}
    after = {100: 21_000_000,  # the loop: 20 ms more
             101: 9_000_000,  # 4 ms more
             102: 7_000_500,  # 0.5 µs: idle
             103: 1_000_000}  # started meanwhile: 1 ms
    rows = split(pid, before, after, changes=1000, deliveries=200_000)

    assert [name for name, _, _ in rows] == ["loop", "thread 101", "thread 103"]
    assert rows[0][1:] == (20.0, 0.1)  # µs a change, µs a delivery
    assert rows[1][1:] == (4.0, 0.02)
    assert rows[2][1:] == (1.0, 0.005)


def test_split_with_no_changes_or_deliveries_shows_nothing_rather_than_dividing_by_zero():
    assert split(1, {1: 0}, {1: 10_000}, changes=0, deliveries=0) == []
    rows = split(1, {1: 0}, {1: 10_000}, changes=5, deliveries=0)
    assert rows == [("loop", 2.0, 0.0)]
