"""The one place where informer threads and the asyncio event loop meet.

informer_core runs on threads; the HTTP layer on one event loop. Two kinds of
crossing exist and both live here:

- thread -> loop: ``HubHandler``, the informer handler of a resource's
  ``EventHub``, hands each notification to the loop with
  ``call_soon_threadsafe`` — once per event, whatever the number of subscribers;
- loop -> thread: ``run_blocking`` for calls that may block (discovery, waiting
  for a sync, shutdown), so the loop never stalls.

Lister reads (a lock held for microseconds, no I/O) are made on the loop directly.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread

from informer_core.delta_fifo import DeletedFinalStateUnknown
from informer_core.encoded import EncodedObject

__all__ = ["HubHandler", "loop_barrier", "run_blocking"]

T = TypeVar("T")


async def run_blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking call on a worker thread and await its result."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


async def loop_barrier(loop: asyncio.AbstractEventLoop) -> None:
    """Return once every callback already handed to ``loop`` from other threads has run."""
    done = loop.create_future()
    loop.call_soon_threadsafe(done.set_result, None)
    await done


class HubHandler:
    """The informer handler of one ``EventHub``: runs on the informer's listener thread.

    It receives the stored (encoded) objects — nothing is decoded on the way —
    and schedules the hub's ``apply`` on the loop. Calls keep their order.
    """

    accepts_encoded = True

    def __init__(self, loop: asyncio.AbstractEventLoop, apply: Callable[..., None]) -> None:
        self._loop = loop
        self._apply = apply

    def _send(self, *args: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(self._apply, *args)
        except RuntimeError:
            pass  # the loop is closed: the gateway is shutting down

    def on_add(self, obj: EncodedObject, is_in_initial_list: bool) -> None:
        self._send("add", obj, None)

    def on_update(self, old: EncodedObject, new: EncodedObject) -> None:
        self._send("update", new, old)

    def on_delete(self, obj: EncodedObject | DeletedFinalStateUnknown) -> None:
        self._send("delete", obj, None)
