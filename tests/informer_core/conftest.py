"""Fixtures shared by the informer_core tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture
def run_in_thread() -> Iterator[Callable[[Any], threading.Event]]:
    """Start ``obj.run(stop)`` on a thread; after the test, stop it and require it to end."""
    running: list[tuple[threading.Event, threading.Thread]] = []

    def start(obj: Any) -> threading.Event:
        stop = threading.Event()
        thread = threading.Thread(target=obj.run, args=(stop,))
        thread.start()
        running.append((stop, thread))
        return stop

    yield start
    for stop, thread in running:
        stop.set()
        thread.join(5)
        assert not thread.is_alive()
