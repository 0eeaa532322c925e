"""Pause Python's cyclic garbage collector around bulk JSON parsing.

Parsing a large list answer creates millions of containers at once; each batch
of allocations triggers a collection that walks the growing heap, which makes
the parse several times slower (measured here: 1.29 s instead of 0.32 s for
10,000 Pods). Parsed JSON holds no reference cycles, so nothing is lost by
pausing the collector for the parse: reference counting frees it all.

``paused_gc()`` is reentrant and safe across threads: the collector is
disabled while at least one caller is inside, and re-enabled by the last one
out — unless it was disabled to begin with. Pauses that overlap without a gap
(a busy server's bulk work on several threads) would hold it off for good, and
cyclic garbage made meanwhile would pile up: once a pause has lasted
``LONGEST_PAUSE`` seconds, the next caller out runs one full collection, so the
collector is held off for about that long at most.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["LONGEST_PAUSE", "paused_gc"]

LONGEST_PAUSE = 1.0  # seconds

_lock = threading.Lock()  # guards _depth, _reenable and _since
_depth = 0
_reenable = False
_since = 0.0  # when the collector was last paused, or last collected during a pause


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector for the duration of the block."""
    global _depth, _reenable, _since
    with _lock:
        if _depth == 0:
            _reenable = gc.isenabled()
            _since = time.monotonic()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        overdue = False
        with _lock:
            _depth -= 1
            if _depth == 0:
                if _reenable:
                    gc.enable()
            elif _reenable and time.monotonic() - _since > LONGEST_PAUSE:
                _since = time.monotonic()
                overdue = True
        if overdue:
            gc.collect()
