"""Where the set of clusters comes from while the gateway serves: a file, and Secrets.

``ClusterSet`` merges what each source says and has the gateway serve exactly that
(``Gateway.apply``): the clusters file's clusters (``ClustersFile``), and in a pod the
labelled cluster Secrets of its namespace (``app.clusters.secrets``); a name both give
is the file's.

The file is re-read when it changes — its modification time, size or inode, looked at
every second (a ConfigMap mounted in a pod is replaced by a symlink swap, which only
the inode shows) — and on ``SIGHUP``. A change that cannot be read or is malformed
keeps the clusters served and is logged with its line: a typo must not take every
cluster away from the dashboards reading them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Protocol

from app.bridge import run_blocking
from app.clusters.config import ClusterSpec, ClustersError, read_clusters_file
from app.clusters.connect import Connector

__all__ = ["ClusterSet", "ClustersFile", "Said", "ServedClusters"]

log = logging.getLogger("kube-cache-gateway")

_LOOK_EVERY = 1.0  # seconds between two looks at the file

Said = Callable[[list[ClusterSpec]], Awaitable[None]]  # a source's whole word, each time


class ServedClusters(Protocol):
    """What a cluster set tells the clusters to (``app.gateway.Gateway``, the floor above)."""

    default_name: str  # the cluster served at the plain paths ("": none yet)

    async def apply(self, specs: list[ClusterSpec], connect: Connector) -> None:
        """Serve the clusters ``specs`` name, and only those."""


class ClusterSet:
    """What every source says, merged; the gateway serves the union (on the loop)."""

    FILE, SECRETS = "file", "secrets"

    def __init__(self, gateway: ServedClusters, connect: Connector) -> None:
        self.gateway = gateway
        self.connect = connect
        self._said: dict[str, list[ClusterSpec]] = {}

    def told_by(self, source: str) -> Said:
        """The callback through which ``source`` says its clusters (all of them, each time)."""
        async def said(specs: list[ClusterSpec]) -> None:
            self._said[source] = specs
            await self.gateway.apply(self.merged(), self.connect)
        return said

    def merged(self) -> list[ClusterSpec]:
        """The file's clusters, then the Secrets' whose names the file does not give.

        The default is the file's (marked, else its first). Without a file it is the
        cluster that is the default now, for as long as its Secret lasts (else the first
        by name): a Secret added must not move the plain paths to another cluster.
        """
        specs = list(self._said.get(self.FILE, ()))
        named = {s.name for s in specs}
        for spec in self._said.get(self.SECRETS, ()):
            if spec.name in named:
                log.warning("cluster %s of %s is also in the clusters file: the file's is served",
                            spec.name, spec.source)
                continue
            named.add(spec.name)
            specs.append(spec)
        if specs and not self._said.get(self.FILE):
            keep = self.gateway.default_name if self.gateway.default_name in named else specs[0].name
            specs = [dataclasses.replace(s, default=s.name == keep) for s in specs]
        return specs


class ClustersFile:
    """Tells ``said`` the clusters of the file at ``path`` now and whenever it changes."""

    def __init__(self, path: str, said: Said, look_every: float = _LOOK_EVERY) -> None:
        self.path = path
        self.said = said
        self.look_every = look_every
        self._seen: tuple | None = None
        self._task: asyncio.Task | None = None
        self._hangup = asyncio.Event()
        self._signal = False
        self.reloads = 0  # changes applied
        self.refused = 0  # changes refused (malformed), for tests and the log

    def _stamp(self) -> tuple | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    async def start(self) -> None:
        """Apply the file, then follow it.

        Raises:
            ClustersError: the file cannot be used now (at start the gateway does not serve).
        """
        self._seen = self._stamp()
        await self.said(await run_blocking(read_clusters_file, self.path))
        loop = asyncio.get_running_loop()
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
            # only the main thread may take signals (a gateway in a test's thread does not)
            loop.add_signal_handler(signal.SIGHUP, self._hangup.set)
            self._signal = True
        self._task = asyncio.create_task(self._follow())

    async def _follow(self) -> None:
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._hangup.wait(), self.look_every)
            hangup = self._hangup.is_set()
            self._hangup.clear()
            stamp = self._stamp()
            if stamp == self._seen and not hangup:
                continue
            self._seen = stamp
            await self.reload("SIGHUP" if hangup else "the file changed")

    async def reload(self, why: str = "asked") -> bool:
        """Read the file again and apply it; ``False`` (logged) when it cannot be used."""
        try:
            specs = await run_blocking(read_clusters_file, self.path)
        except ClustersError as exc:
            self.refused += 1
            log.error("the clusters file was not applied (%s), the clusters served stay as "
                      "they were: %s", why, exc)
            return False
        log.info("applying the clusters file (%s): %s", why, ", ".join(s.name for s in specs))
        await self.said(specs)
        self.reloads += 1
        return True

    async def stop(self) -> None:
        if self._signal:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
