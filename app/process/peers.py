"""The other workers of this pod, over Unix sockets in the supervisor's private folder.

Each worker (``app.launch.supervisor``) listens on ``<folder>/worker-<index>.sock`` and
answers one line per connection — ``<verb> <argument>`` — with bytes, then
closes. Two verbs are all the pod needs:

- ``metrics``: the worker's own Prometheus exposition, so that ``/metrics``
  answered by any worker shows every worker (each series labelled ``worker``);
- ``load <group>/<version>/<resource>``: begin loading that resource's cache,
  as another worker just did on its first request — the next request for it,
  whichever worker it reaches, does not wait for a sync again.

The folder is made by the supervisor with mode 0700: only the gateway's own
user can connect, so nothing here is authorized again. A sibling that does not
answer (restarting) is left out, never waited on for long.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

__all__ = ["Peers", "merge_expositions"]

log = logging.getLogger(__name__)

Handler = Callable[[str], Awaitable[bytes]]
_ASK_TIMEOUT = 2.0  # seconds a sibling may take to answer
_MAX_LINE = 4096


class Peers:
    """This worker's end of the pod's sibling channel."""

    def __init__(self, index: int, count: int, folder: str, handlers: dict[str, Handler]) -> None:
        self.index = index
        self.count = count
        self._folder = folder
        self._handlers = handlers
        self._server: asyncio.AbstractServer | None = None
        self._background: set[asyncio.Task] = set()

    def path(self, index: int) -> str:
        return os.path.join(self._folder, f"worker-{index}.sock")

    def siblings(self) -> list[int]:
        return [i for i in range(self.count) if i != self.index]

    async def start(self) -> None:
        own = self.path(self.index)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(own)  # left by this worker's previous process
        self._server = await asyncio.start_unix_server(self._serve, path=own, limit=_MAX_LINE)

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path(self.index))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = (await asyncio.wait_for(reader.readline(), _ASK_TIMEOUT)).decode().strip()
            verb, _, argument = line.partition(" ")
            handler = self._handlers.get(verb)
            if handler is not None:
                writer.write(await handler(argument))
                await writer.drain()
        except (OSError, asyncio.TimeoutError, ValueError, asyncio.LimitOverrunError):
            pass
        except Exception:  # noqa: BLE001 - a sibling's question must not take this worker down
            log.exception("answering a sibling worker")
        finally:
            writer.close()

    async def ask(self, index: int, verb: str, argument: str = "") -> bytes | None:
        """Ask sibling ``index``; ``None`` if it does not answer in time."""
        try:
            async with asyncio.timeout(_ASK_TIMEOUT):
                reader, writer = await asyncio.open_unix_connection(self.path(index))
                try:
                    writer.write(f"{verb} {argument}\n".encode())
                    await writer.drain()
                    return await reader.read()
                finally:
                    writer.close()
        except (OSError, TimeoutError):
            return None

    async def ask_all(self, verb: str, argument: str = "") -> dict[int, bytes]:
        """Ask every sibling at once; the answers of those that gave one, by index."""
        siblings = self.siblings()
        answers = await asyncio.gather(*(self.ask(i, verb, argument) for i in siblings))
        return {i: a for i, a in zip(siblings, answers) if a is not None}

    def tell_all(self, verb: str, argument: str = "") -> None:
        """Tell every sibling, without waiting for them."""
        task = asyncio.get_running_loop().create_task(self.ask_all(verb, argument))
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def merge_expositions(expositions: dict[int, bytes]) -> bytes:
    """Several workers' Prometheus text expositions as one, each series labelled ``worker``."""
    families: dict[str, Metric] = {}
    for index, text in sorted(expositions.items()):
        for family in text_string_to_metric_families(text.decode()):
            merged = families.get(family.name)
            if merged is None:
                merged = families[family.name] = Metric(family.name, family.documentation,
                                                        family.type, family.unit)
            worker = str(index)
            merged.samples.extend(
                Sample(s.name, {**s.labels, "worker": worker}, s.value, s.timestamp, s.exemplar)
                for s in family.samples)

    class _Merged:
        def collect(self) -> list[Metric]:
            return list(families.values())

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Merged())
    return generate_latest(registry)
