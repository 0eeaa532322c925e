"""Everything one gateway process holds: its clusters by name, and what they share.

A ``Gateway`` lives as long as the application's lifespan (``app.main``) and is
``app.state.gateway``. It holds the clusters it serves (``app.clusters.cluster``;
one today, ``default``, served at the plain paths) and what is the process's
rather than any cluster's: the resource policy, the authenticator (identity is
established once, in the identity cluster), the stream limiter, the metrics, and,
when it is one of several workers, its channel to its siblings (``app.process.peers``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from prometheus_client import generate_latest

from app.auth.authentication import Authenticator, TokenReviewAuthenticator
from app.auth.policy import ResourcePolicy
from app.clusters.cluster import Cluster
from app.http.limits import StreamLimiter
from app.http.metrics import Metrics
from app.process.peers import Peers, merge_expositions
from app.query.budget import MIN_LIMIT, QueryMemory
from app.settings import Settings
from informer_core.discovery import GroupVersionResource

__all__ = ["Gateway"]

_SIZE_EVERY = 10.0  # seconds between two sizings of the queries' memory budget


class Gateway:
    """The clusters and what they share; ``app.state.gateway``."""

    def __init__(self, settings: Settings, clusters: Iterable[Cluster], worker: Any = None,
                 memory: QueryMemory | None = None) -> None:
        self.settings = settings
        self.query_memory = memory if memory is not None else QueryMemory()
        self.clusters: dict[str, Cluster] = {c.name: c for c in clusters}
        defaults = [c for c in self.clusters.values() if c.default]
        if len(defaults) != 1:
            raise ValueError(f"a gateway serves exactly one default cluster, not {len(defaults)}")
        self.default = defaults[0]
        self.worker = worker  # app.process.supervisor.WorkerInfo when one of several processes
        self.policy = ResourcePolicy(settings.allow, settings.deny)
        self.authenticator = self._authenticator()
        for cluster in self.clusters.values():
            cluster.authorize_with(self.policy, self.authenticator)
        self.peers: Peers | None = None
        if worker is not None:
            self.peers = Peers(worker.index, worker.count, worker.peer_dir,
                               {"metrics": self._own_metrics, "load": self._load_for_sibling})
            for cluster in self.clusters.values():
                cluster.caches.announce = (
                    lambda gvr, name=cluster.name: self._announce_load(name, gvr))
        self.limiter = StreamLimiter(settings.max_streams, settings.max_streams_per_client)
        self.metrics = Metrics(lambda: self.clusters)
        self.closing = asyncio.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._sizing: asyncio.Task | None = None

    def _authenticator(self) -> Authenticator | None:
        """With ``--authz kubernetes``: tokens reviewed by the identity cluster (the default)."""
        identity = self.default
        if identity.reviewer is None or identity.access is None:
            return None
        settings = self.settings
        return TokenReviewAuthenticator(
            identity.reviewer, identity.access, settings.authn_audiences,
            token_ttl=settings.authn_cache_ttl, deny_ttl=settings.authz_deny_cache_ttl,
            max_entries=settings.authz_cache_size)

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        if self.peers is not None:
            await self.peers.start()
        for cluster in self.clusters.values():
            await cluster.start()
        if not self.settings.query_memory_bytes:
            self._sizing = asyncio.create_task(self._size_query_memory())

    async def _size_query_memory(self) -> None:
        """Keep the queries' budget at twice the bytes of the objects cached (at least
        ``MIN_LIMIT``): what queries may keep grows with what there is to query."""
        while True:
            cached = sum(len(obj.raw) for cluster in self.clusters.values()
                         for entry in cluster.caches.entries().values()
                         for obj in list(entry.hub.view.values()))
            self.query_memory.limit = max(MIN_LIMIT, 2 * cached)
            await asyncio.sleep(_SIZE_EVERY)

    async def metrics_exposition(self) -> bytes:
        """``/metrics``: this process's, or every worker's of the pod, labelled by worker."""
        own = generate_latest(self.metrics.registry)
        if self.peers is None:
            return own
        return merge_expositions({self.peers.index: own, **await self.peers.ask_all("metrics")})

    async def _own_metrics(self, argument: str) -> bytes:
        return generate_latest(self.metrics.registry)

    def _announce_load(self, cluster: str, gvr: GroupVersionResource) -> None:
        if self.peers is not None:
            self.peers.tell_all("load", f"{cluster}/{gvr.group}/{gvr.version}/{gvr.resource}")

    async def _load_for_sibling(self, argument: str) -> bytes:
        """``load CLUSTER/GROUP/VERSION/RESOURCE`` (the core group is empty)."""
        parts = argument.split("/")
        if len(parts) != 4 or not parts[2] or not parts[3]:
            return b"malformed"
        cluster = self.clusters.get(parts[0])
        if cluster is None:
            return b"no such cluster"
        cluster.caches.warm(GroupVersionResource(*parts[1:]), self.policy.permits)
        return b"ok"

    def begin_shutdown(self) -> None:
        """End every open stream now (on the loop), before the server waits for connections."""
        self.closing.set()
        for cluster in self.clusters.values():
            cluster.begin_shutdown()

    async def stop(self) -> None:
        if self._sizing is not None:
            self._sizing.cancel()
        self.begin_shutdown()
        if self.peers is not None:
            await self.peers.close()
        for cluster in self.clusters.values():
            await cluster.stop()
