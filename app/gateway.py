"""Everything one gateway process holds: its clusters by name, and what they share.

A ``Gateway`` lives as long as the application's lifespan (``app.main``) and is
``app.state.gateway``. It holds the clusters it serves (``app.clusters.cluster``:
one, ``default``, unless a clusters file names several; the default one is also
served at the plain paths) and what is the process's rather than any cluster's:
the resource policy, the authenticator (identity is established once, in the
identity cluster), the stream limiter, the metrics, and, when it is one of several
workers, its channel to its siblings (``app.process.peers``).

Clusters come and go while it serves (``apply``: the clusters file changed, a
cluster Secret did): a cluster added is connected on a thread and started; one
removed has its streams ended with a 404 naming it, then its informers stopped. Until
one added is connected its paths answer 503 (``connecting``), the plain paths too when it
is the new default. A configured cluster that cannot be connected (its credentials cannot
be had) is kept as ``unavailable`` with the reason: listed, not ready, 503 on its paths.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterable
from typing import Any

from prometheus_client import generate_latest

from app.auth.authentication import Authenticator, NoIdentityCluster, TokenReviewAuthenticator
from app.auth.authorization import credentials_of
from app.auth.policy import ResourcePolicy
from app.auth.review_budget import AccessBudget
from app.bridge import run_blocking
from app.cache.kept_lists import KeptLists
from app.cache.signal import Signal
from app.clusters.cluster import Cluster
from app.clusters.config import ClusterSpec, default_of
from app.clusters.connect import Connector, why_not_connected
from app.history.opening import open_store
from app.history.store import ForeignStore, HistoryStore
from app.http.limits import StreamLimiter
from app.http.metrics import Metrics
from app.kube.context import context_of
from app.kube.status import StatusError, not_found
from app.process.heap import SettledHeap
from app.process.peers import Peers, merge_expositions
from app.query.budget import MIN_LIMIT, QueryMemory
from app.settings import Settings
from informer_core.discovery import GroupVersionResource

__all__ = ["Connector", "Gateway"]

log = logging.getLogger("kube-cache-gateway")

# (spec, whether it is the default) -> a Cluster, not started; blocking (run on a thread)
_SIZE_EVERY = 10.0  # seconds between two sizings of the queries' memory budget
# seconds between two tries to connect a configured cluster that could not be (an exec
# plugin that failed, a kubeconfig not mounted yet): what its 503s' Retry-After says
RETRY_UNAVAILABLE_EVERY = 10.0


class Gateway:
    """The clusters and what they share; ``app.state.gateway``."""

    def __init__(self, settings: Settings, clusters: Iterable[Cluster], worker: Any = None,
                 memory: QueryMemory | None = None) -> None:
        self.settings = settings
        self.query_memory = memory if memory is not None else QueryMemory()
        # merged lists' answers kept whole (app.http.merged), in the same budget
        self.merged_lists = KeptLists(self.query_memory)
        self.clusters: dict[str, Cluster] = {c.name: c for c in clusters}
        defaults = [c for c in self.clusters.values() if c.default]
        if self.clusters and len(defaults) != 1:
            raise ValueError(f"a gateway serves exactly one default cluster, not {len(defaults)}")
        self.default_name = defaults[0].name if defaults else ""  # else set by ``apply``
        # configured clusters that could not be connected: why (listed, 503 on their paths);
        # tried again every RETRY_UNAVAILABLE_EVERY seconds with their spec and connector
        self.unavailable: dict[str, str] = {}  # its kind of failure (``why_not_connected``)
        self._causes: dict[str, str] = {}  # the failure's own words, logged once each
        # clusters a change of the configuration is connecting now: 503 on their paths (the
        # default's too), never a 404 that says the gateway does not serve them
        self.connecting: set[str] = set()
        self._unconnected: dict[str, ClusterSpec] = {}
        self._connect: Connector | None = None
        self._retrying: asyncio.Task | None = None
        self.retry_every = RETRY_UNAVAILABLE_EVERY
        self.specs: dict[str, ClusterSpec] = {}  # how each cluster of a configuration connects
        self._warned_bare: list[str] = []  # clusters last said to share the identity's names
        # clusters from a configuration (a file, Secrets): answers name their cluster
        self.several = bool(settings.clusters or settings.cluster_secrets)
        self.worker = worker  # app.launch.supervisor.WorkerInfo when one of several processes
        self.policy = ResourcePolicy(settings.allow, settings.deny)
        self.review_budget = AccessBudget()  # access reviews, one budget for every cluster
        # The identity cluster, pinned: --authn-cluster, else the default cluster of the first
        # configuration. It never moves to another cluster (a token minted in one cluster
        # must not start to stand for a caller of another when the default changes); while
        # it is not served, nobody is authenticated (``NoIdentityCluster``: 503).
        self.identity_name = settings.authn_cluster or self.default_name
        self.authenticator = self._authenticator()
        self.peers: Peers | None = None
        if worker is not None:
            self.peers = Peers(worker.index, worker.count, worker.peer_dir,
                               {"metrics": self._own_metrics, "load": self._load_for_sibling})
        for cluster in self.clusters.values():
            self._join(cluster)
        self._applying = asyncio.Lock()
        self.limiter = StreamLimiter(settings.max_streams, settings.max_streams_per_client)
        self.metrics = Metrics(lambda: self.clusters,
                               lambda: (self.identity_name, self.authenticator))
        self.closing = asyncio.Event()
        # merged streams follow the clusters as they come and go: each counts the changes
        # and is woken by one (``app.streams.merged``)
        self.clusters_version = 0
        self.clusters_changed: set[Signal] = set()  # merged streams' wake-ups
        self.loop: asyncio.AbstractEventLoop | None = None
        self._sizing: asyncio.Task | None = None
        limiter = self.limiter
        self.heap = SettledHeap(lambda: (limiter.opened, limiter.closed))
        self._settling: asyncio.Task | None = None
        self.history_store: HistoryStore | None = None  # --history's, opened at start

    @property
    def default(self) -> Cluster | None:
        """The cluster served at the plain paths (``None`` while it cannot be connected)."""
        return self.clusters.get(self.default_name)

    def absent(self) -> list[str]:
        """The configured clusters not served now (they could not be connected, or are being
        connected), in name order: what ``/clusters/*/`` stands for and cannot ask."""
        return sorted((set(self.unavailable) | self.connecting) - set(self.clusters))

    def cluster(self, name: str) -> Cluster:
        """The cluster ``name``, for a request under ``/clusters/NAME/``.

        Raises:
            StatusError: 404 for a cluster not configured, 503 for one that could not
                be connected (with why) or is being connected.
        """
        found = self.clusters.get(name)
        if found is not None:
            return found
        if not name:
            raise StatusError(503, "no cluster is configured yet", "ServiceUnavailable",
                              headers={"Retry-After": "10"})
        if name in self.unavailable:
            raise StatusError(503, f"cluster {name!r} cannot be reached: {self.unavailable[name]}",
                              "ServiceUnavailable", headers={"Retry-After": "10"})
        if name in self.connecting:
            raise StatusError(503, f"cluster {name!r} is being connected", "ServiceUnavailable",
                              headers={"Retry-After": "1"})
        raise not_found(f"cluster {name!r} is not served by this gateway", resource="clusters",
                        name=name)

    async def authenticate(self, scope: dict) -> None:
        """Who asks (kept in the request's context), for a path no cluster answers
        (``/clusters``, an unknown cluster): 401 first, as everywhere.

        Raises:
            StatusError: 401; 503 while the identity cluster cannot review tokens.
        """
        if self.authenticator is None:
            return  # callers are not authenticated (--authz none)
        context = context_of(scope)
        if context.identity is None:
            credentials = credentials_of(scope)
            context.identity = (self.authenticator.cached_identity(credentials)
                                or await self.authenticator.authenticate(credentials))

    async def authorize_own(self, scope: dict, path: str) -> None:
        """Who asks, and whether they may: a gateway's own path (``/metrics``, ``/clusters``)
        holds no cluster's data, so the identity cluster decides — an impersonation, and
        ``get /metrics``.

        Raises:
            StatusError: 401, 403; 503 while the identity cluster cannot review.
        """
        await self.authenticate(scope)
        if self.authenticator is None:
            return
        authorization = self._identity_cluster().authorization
        if path == "/metrics":
            await authorization.authorize_path(scope, path)
        elif context_of(scope).identity.impersonation is not None:
            await authorization.check_impersonation(context_of(scope).identity)

    def _identity_cluster(self) -> Cluster:
        """The identity cluster, which decides on the gateway's own paths.

        Raises:
            StatusError: 503 when it is not served (gone since the caller was known).
        """
        identity = self.clusters.get(self.identity_name)
        if identity is None:
            raise StatusError(503, f"callers cannot be authorized: {self._identity_missing()}",
                              "ServiceUnavailable", headers={"Retry-After": "10"})
        return identity

    def _join(self, cluster: Cluster) -> None:
        """What every cluster gets from the gateway: the policy, identity, its siblings' word."""
        cluster.authorize_with(self.policy, self.authenticator, self.review_budget)
        if self.peers is not None:
            cluster.caches.announce = lambda gvr, name=cluster.name: self._announce_load(name, gvr)

    def _authenticator(self) -> Authenticator | None:
        """With ``--authz kubernetes``: tokens reviewed by the identity cluster, or, while it
        is not served, ``NoIdentityCluster`` (nobody is authenticated: 503); ``None``
        without authorization."""
        settings = self.settings
        if settings.authz != "kubernetes":
            return None
        identity = self.clusters.get(self.identity_name)
        if identity is None or identity.reviewer is None or identity.access is None:
            return NoIdentityCluster(self._identity_missing)
        return TokenReviewAuthenticator(
            identity.reviewer, settings.authn_audiences,
            token_ttl=settings.authn_cache_ttl, deny_ttl=settings.authz_deny_cache_ttl,
            max_entries=settings.authz_cache_size,
            local=identity.follow_tokens(self._identities_revoked))

    def _identities_revoked(self) -> None:
        """Identities the identity cluster's tokens stood for were revoked (an account or
        its Pod deleted; from an informer's thread): every cluster's open streams check
        their caller again (``Cluster.access_changed``)."""
        for cluster in list(self.clusters.values()):
            cluster.access_changed()

    async def start(self) -> None:
        """Start serving every cluster.

        Raises:
            ValueError: ``--history`` names no store it can open.
            ForeignStore: the history store holds another cluster's history under a name.
        """
        self.loop = asyncio.get_running_loop()
        if self.settings.history:
            self.history_store = open_store(self.settings.history,
                                            self.settings.history_password_file)
        if self.peers is not None:
            await self.peers.start()
        for cluster in self.clusters.values():
            if self.history_store is not None:
                cluster.keep_history(self.history_store)
            await cluster.start()
        self._settling = asyncio.create_task(self.heap.run())
        if not self.settings.query_memory_bytes:
            self._sizing = asyncio.create_task(self._size_query_memory())
        if self._unconnected and self._retrying is None:
            self._retrying = asyncio.create_task(self._retry_unavailable())

    async def apply(self, specs: list[ClusterSpec], connect: Connector) -> None:
        """Serve the clusters ``specs`` name, and only those (one change at a time).

        A cluster whose spec is unchanged keeps its caches and streams (being made the
        default or not changes no connection); one removed or changed has its streams ended
        with a 404 naming it and its informers stopped; one added or changed is connected
        (``connect``, on a thread) and started. One that cannot be connected is kept
        in ``unavailable`` with the reason, and logged.
        """
        async with self._applying:
            if self.closing.is_set():
                return  # stopping: no cluster is added or changed any more
            self._connect = connect
            if not self.identity_name and specs:
                self.identity_name = default_of(specs).name  # pinned from now on
            self._warn_of_shared_names(specs)
            wanted = {s.name: dataclasses.replace(s, default=False) for s in specs}
            changed = {n for n in self.clusters
                       if self.specs.get(n, wanted.get(n)) != wanted.get(n)}
            self.connecting = {n for n in wanted if n not in self.clusters or n in changed}
            self.default_name = default_of(specs).name if specs else ""
            try:
                for name in list(self.clusters):
                    if name in changed or name not in wanted:
                        await self.remove(name)
                for name in list(self.unavailable):
                    if name not in wanted:
                        del self.unavailable[name]
                        self._causes.pop(name, None)
                        self._unconnected.pop(name, None)
                for name, spec in wanted.items():
                    if name in self.clusters:
                        self.clusters[name].default = name == self.default_name
                        self.specs[name] = spec
                        continue
                    await self._connect_one(spec, connect)
                    self.connecting.discard(name)
            finally:
                self.connecting = set()
            self._identity_changed()
            if self._unconnected and self.loop is not None and self._retrying is None:
                self._retrying = asyncio.create_task(self._retry_unavailable())

    async def _connect_one(self, spec: ClusterSpec, connect: Connector) -> bool:
        """Connect and serve the cluster of ``spec``; one that cannot be connected is kept
        in ``unavailable`` with the reason (logged), to be tried again."""
        name = spec.name
        try:
            cluster = await run_blocking(connect, spec, name == self.default_name)
        except Exception as exc:  # noqa: BLE001 - any way of failing is said, not raised
            # the cause to the log; callers (/clusters, its paths' 503) read its kind alone
            reason = why_not_connected(exc)
            cause = str(exc) or type(exc).__name__
            if self._causes.get(name) != cause:
                log.error("cluster %s (%s) cannot be served: %s", name, spec.source or name, cause)
            self._causes[name] = cause
            self.unavailable[name] = reason
            self._unconnected[name] = spec
            return False
        self.unavailable.pop(name, None)
        self._causes.pop(name, None)
        self._unconnected.pop(name, None)
        self.specs[name] = spec
        await self.add(cluster)
        return True

    def _warn_of_shared_names(self, specs: list[ClusterSpec]) -> None:
        """Say, once per configuration, which clusters know callers by the identity cluster's
        names: there a ServiceAccount of the identity cluster is the same-named one, and
        ``system:authenticated`` every caller of every cluster."""
        if self.settings.authz != "kubernetes":
            return
        bare = sorted(s.name for s in specs if s.name != self.identity_name
                      and not s.user_prefix and not s.group_prefix)
        if bare and bare != self._warned_bare:
            log.warning(
                "clusters %s know callers by the names the identity cluster %s gives them, "
                "without userPrefix or groupPrefix: a ServiceAccount token of %s stands for "
                "the same-named ServiceAccount there, and their bindings of "
                "system:authenticated or system:serviceaccounts grant every caller of %s; "
                "give each a prefix unless the clusters share their users on purpose",
                ", ".join(bare), self.identity_name, self.identity_name, self.identity_name)
        self._warned_bare = bare

    def _identity_missing(self) -> str:
        """Why no caller can be authenticated now: the identity cluster's state, by name only
        (a cause could carry an address or a plugin's output: those go to the log)."""
        name = self.identity_name
        if not name:
            return "no identity cluster is configured yet"
        if name in self.connecting:
            return f"the identity cluster {name!r} is being connected"
        if name in self.unavailable:
            return f"the identity cluster {name!r} cannot be connected"
        return f"the identity cluster {name!r} is not served by this gateway"

    def _identity_changed(self) -> None:
        """With ``--authz kubernetes``: the authenticator follows the identity cluster — a new
        one when it is connected again, ``NoIdentityCluster`` the moment it is not served —
        and every cluster authorizes with it from then on."""
        if self.settings.authz != "kubernetes":
            return
        identity = self.clusters.get(self.identity_name)
        wanted = identity.reviewer if identity is not None else None
        if self.authenticator is not None and self.authenticator.reviewer is wanted:
            return
        self.authenticator = self._authenticator()
        for cluster in self.clusters.values():
            cluster.authorize_with(self.policy, self.authenticator, self.review_budget)

    async def _retry_unavailable(self) -> None:
        """Every ``retry_every`` seconds, connect again the clusters that could not be."""
        try:
            while self._unconnected:
                await asyncio.sleep(self.retry_every)
                async with self._applying:
                    for name, spec in list(self._unconnected.items()):
                        if name in self.clusters or name not in self.unavailable:
                            self._unconnected.pop(name, None)
                            continue
                        if self._connect is not None and await self._connect_one(spec,
                                                                                 self._connect):
                            log.info("cluster %s connected on a later try", name)
                    self._identity_changed()
        finally:
            self._retrying = None

    async def add(self, cluster: Cluster) -> None:
        """Start serving ``cluster`` (under its name; at the plain paths if it is the default)."""
        self.clusters[cluster.name] = cluster
        self._identity_changed()
        self._join(cluster)
        if self.history_store is not None:
            cluster.keep_history(self.history_store)
        if self.loop is not None:
            try:
                await cluster.start()
            except ForeignStore as exc:  # served without history: said in its reads' 503
                log.error("cluster %s is served without history: %s", cluster.name, exc)
        self._changed()
        log.info("serving cluster %s", cluster.name)

    async def remove(self, name: str) -> None:
        """Stop serving cluster ``name``: its streams end with a 404 naming it."""
        cluster = self.clusters.pop(name, None)
        self.specs.pop(name, None)
        if cluster is None:
            return
        self._identity_changed()  # a removed identity cluster reviews no token from now on
        log.info("no longer serving cluster %s", name)
        self._changed()
        await cluster.stop(not_found(f"cluster {name!r} is no longer served by this gateway",
                                     resource="clusters", name=name))

    def _changed(self) -> None:
        self.clusters_version += 1
        self.merged_lists.clear()  # what they were read from may be gone
        for wakeup in self.clusters_changed:
            wakeup.set()

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
        for cluster in list(self.clusters.values()):
            cluster.begin_shutdown()

    async def stop(self) -> None:
        if self._sizing is not None:
            self._sizing.cancel()
        if self._settling is not None:
            self._settling.cancel()
            await asyncio.gather(self._settling, return_exceptions=True)
        if self._retrying is not None:
            self._retrying.cancel()
        self.begin_shutdown()
        if self.peers is not None:
            await self.peers.close()
        # A change of clusters under way (a removal joining its informers' threads) ends
        # first, so that nothing of it outlives the gateway.
        async with self._applying:
            for cluster in list(self.clusters.values()):
                await cluster.stop()
        if self.history_store is not None:
            self.history_store.close()
