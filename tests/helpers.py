"""Helpers shared by tests: polling instead of sleeping."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest


def wait_until(predicate: Callable[[], object], timeout: float = 5.0, interval: float = 0.01,
               message: str = "condition") -> object:
    """Poll ``predicate`` until it returns a truthy value; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {message}")
        time.sleep(interval)
