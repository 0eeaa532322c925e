"""One cluster as the gateway serves it: its API client, discovery, informers, caches and reviews.

Everything that talks to one cluster's API server or holds its data lives in its
``Cluster``: the API client (the factory's), discovery, the informer factory, the
per-resource caches with their event hubs (``app.cache.resources``), the
``Reviewer`` that asks it ``SubjectAccessReview``s and the cached answers
(``app.auth.access_review``), and the ``Authorization`` that decides reads of its
data. The gateway (``app.gateway``) holds clusters by name; a request resolves
its cluster once, at the entry (``app.http.asgi``), and from there on reaches a
factory, a client or a decision only through it.

Identity is the one thing not per cluster: a caller is authenticated once, in the
identity cluster, by the gateway's ``Authenticator``; every cluster's
authorization shares it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from app.auth.access_review import AccessReviews
from app.auth.authentication import Authenticator
from app.auth.authorization import Authorization
from app.auth.policy import ResourcePolicy
from app.auth.review_budget import AccessBudget
from app.auth.reviews import ApiReviewer, Reviewer
from app.auth.service_account_tokens import ServiceAccountTokens
from app.cache.metadata_only import covering
from app.bridge import call_on_loop
from app.cache.resources import ClusterCache
from app.clusters.local_rbac import STALE_AFTER, LocalRBAC
from app.clusters.local_tokens import LocalTokens, identity_metadata
from app.history.cluster_history import ClusterHistory
from app.history.store import HistoryStore
from app.kube.shapes import RequestShapes
from app.kube.status import StatusError
from app.query.budget import QueryMemory
from app.settings import Settings
from informer_core.discovery import Discovery
from informer_core.factory import SharedInformerFactory
from informer_core.pages import metadata_transform

__all__ = ["DEFAULT_CLUSTER", "Cluster", "build_factory", "strip_managed_fields"]

DEFAULT_CLUSTER = "default"  # the name of the cluster a gateway of one cluster serves
# Open streams are woken to check their access again at most this often (seconds) while
# the cluster's RBAC changes: a burst of changes is one look per stream, not one per change.
RBAC_SWEEP_EVERY = 0.2


@metadata_transform  # it touches only metadata: list pages need not be built as dicts
def strip_managed_fields(obj: dict) -> dict:
    """The default transform: drop ``metadata.managedFields`` (about 40% of an object)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def build_factory(settings: Settings, api_client: Any = None, **seams: Any) -> SharedInformerFactory:
    """A factory configured from settings (managedFields stripped unless kept, the
    ``--metadata-only`` resources' informers keeping metadata alone).

    ``seams`` are passed on (``lister_watcher_func``, ``discovery``): a gateway
    over an in-memory cluster is built exactly as one over a real server.
    """
    return SharedInformerFactory(
        api_client, default_resync=settings.resync_period,
        namespace=settings.namespace or None, page_size=settings.page_size,
        transform=None if settings.keep_managed_fields else strip_managed_fields,
        metadata_only=covering(settings.metadata_only), **seams)


class Cluster:
    """One cluster's client, discovery, informers, caches, hubs and reviews; see the module."""

    def __init__(self, name: str, settings: Settings, factory: SharedInformerFactory,
                 reviewer: Reviewer | None = None, default: bool = True,
                 memory: QueryMemory | None = None, user_prefix: str = "",
                 group_prefix: str = "", local_rbac: str = "") -> None:
        self.name = name
        self.default = default
        self.settings = settings
        self.factory = factory
        self.caches = ClusterCache(settings, factory, memory)
        self.shapes = RequestShapes()  # requests to this cluster already checked
        self.reviewer: Reviewer | None = None
        self.access: AccessReviews | None = None
        self.local_rbac: LocalRBAC | None = None
        # its ServiceAccount tokens judged here, when it is the identity cluster (``follow_tokens``)
        self.local_tokens: LocalTokens | None = None
        self._follow_tokens = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sweep_due = False  # streams are to be woken (RBAC changed)
        self._swept_at = 0.0
        if settings.authz == "kubernetes":
            self.reviewer = reviewer or ApiReviewer(factory.api_client)
            self.local_rbac = LocalRBAC(
                name, lambda: factory.sibling(transform=strip_managed_fields),
                local_rbac or settings.authz_local_rbac,
                getattr(self.reviewer, "review_rules", None), self.access_changed,
                stale_after=max(STALE_AFTER, settings.authz_cache_ttl))
            self.access = AccessReviews(
                self.reviewer, allow_ttl=settings.authz_cache_ttl,
                deny_ttl=settings.authz_deny_cache_ttl, max_entries=settings.authz_cache_size,
                user_prefix=user_prefix, group_prefix=group_prefix, rbac=self.local_rbac.rbac)
            if settings.authn_local_tokens:
                self.local_tokens = LocalTokens(
                    name, ServiceAccountTokens(settings.authn_audiences),
                    lambda: factory.sibling(transform=identity_metadata,
                                            metadata_only=lambda resource: True, namespace=None),
                    lambda path: factory.get_document(
                        path, "application/json, application/jwk-set+json"),
                    stale_after=max(STALE_AFTER, settings.authn_cache_ttl))
        self.authorization = Authorization(ResourcePolicy(settings.allow, settings.deny))
        self._namespace_resource: Any = None
        self.history: ClusterHistory | None = None  # the changes kept (``keep_history``)

    @property
    def api_client(self) -> Any:
        """The cluster's ``kubernetes.client.ApiClient`` (transport, credentials, configuration)."""
        return self.factory.api_client

    @property
    def discovery(self) -> Discovery:
        return self.factory.discovery

    def authorize_with(self, policy: ResourcePolicy, authenticator: Authenticator | None,
                       budget: AccessBudget | None = None) -> None:
        """Decide reads of this cluster's data: ``policy``, then (when callers are
        authenticated) the caller's rights here, by this cluster's own reviews, within the
        gateway's ``budget`` of reviews."""
        partitioned = (self.settings.namespace_partitioned_lists and authenticator is not None)
        self.authorization = Authorization(
            policy, authenticator, self.access if authenticator is not None else None,
            self._namespaces if partitioned else None, budget)

    async def _namespaces(self) -> tuple[int, list[str]]:
        """(version, names) of this cluster's namespaces, from its own cache of them."""
        if self._namespace_resource is None:
            self._namespace_resource = await self.caches.resolve_text("namespaces")
        entry = await self.caches.load(self._namespace_resource, wait=self.settings.sync_timeout)
        return entry.hub.rv, [o.name for o in entry.hub.view.values()]

    def keep_history(self, store: HistoryStore) -> None:
        """Keep this cluster's changes in ``store`` (``app.history``), from its start on."""
        settings = self.settings
        self.history = ClusterHistory(store, self.name, settings.history_retention,
                                      settings.history_max_bytes or None)
        self.caches.recorder_for = self.history.recorder_for
        self.caches.seed_for = self.history.seed

    def identity_uid(self) -> str:
        """The cluster's identity: its ``kube-system`` namespace's UID (blocking).

        Raises:
            ValueError: it cannot be read (the gateway may not get that namespace?).
            ConnectionError: the API server cannot be reached.
        """
        status, found = self.factory.get_document("/api/v1/namespaces/kube-system")
        uid = ((found or {}).get("metadata") or {}).get("uid") if isinstance(found, dict) else None
        if status != 200 or not isinstance(uid, str) or not uid:
            raise ValueError(f"the cluster's identity, its kube-system namespace's UID, cannot be "
                             f"read (the API server answered {status}): the gateway needs get "
                             f"on namespaces")
        return uid

    async def start(self) -> None:
        """Begin serving: the history's claim on its store, the caches' reaper and heartbeat,
        the pre-warmed loads, and the following of the cluster's RBAC
        (``app.clusters.local_rbac``).

        Raises:
            ForeignStore: the history store holds another cluster's history under this name.
        """
        self._loop = asyncio.get_running_loop()
        if self.history is not None:
            await self.history.start(self.identity_uid)
        await self.caches.start(permits=self.authorization.policy.permits)
        if self.local_rbac is not None:
            await self.local_rbac.start()
        if self._follow_tokens and self.local_tokens is not None:
            self.local_tokens.start()

    def follow_tokens(self, on_revoke: Callable[[], None]) -> ServiceAccountTokens | None:
        """As the identity cluster: judge its ServiceAccount tokens here (``app.clusters.
        local_tokens``), calling ``on_revoke`` (from any thread) when identities were revoked;
        the verifier, or ``None`` with ``--authn-local-tokens false``. Idempotent."""
        if self.local_tokens is None:
            return None
        self.local_tokens.tokens.on_revoke = on_revoke
        self._follow_tokens = True
        if self._loop is not None:
            self.local_tokens.start()
        return self.local_tokens.tokens

    def access_changed(self) -> None:
        """The cluster's RBAC changed (from an informer's thread): every open stream of this
        cluster is woken to check its access again (``app.streams.live``), within
        ``RBAC_SWEEP_EVERY`` — one look however many changes came meanwhile."""
        loop = self._loop
        if loop is None or self._sweep_due:
            return
        self._sweep_due = True
        call_on_loop(loop, self._sweep)

    def _sweep(self) -> None:
        wait = self._swept_at + RBAC_SWEEP_EVERY - time.monotonic()
        if wait > 0:
            asyncio.get_running_loop().call_later(wait, self._sweep)
            return
        self._sweep_due = False  # a change from now on is another sweep
        self._swept_at = time.monotonic()
        # a waiting stream still allowed takes its new grant in place, one answer for the
        # streams of one caller and access (``memo``); the others are woken to check in full
        memo: dict = {}
        for entry in self.caches.entries().values():
            for subscriber in list(entry.hub.subscribers):
                regrant = subscriber.regrant
                if regrant is None or not regrant(memo):
                    subscriber.nudge()

    def begin_shutdown(self) -> None:
        """End every open stream of this cluster now (on the loop)."""
        for entry in self.caches.entries().values():
            entry.hub.close_all()

    async def stop(self, error: StatusError | None = None) -> None:
        """End every stream (``error`` its last word: the cluster is no longer served), stop
        every informer and join their threads."""
        if self.local_rbac is not None:
            await self.local_rbac.stop()
        if self.local_tokens is not None:
            await self.local_tokens.stop()
        await self.caches.close(error)
        if self.history is not None:
            await self.history.stop()  # after the caches: what they last saw is written
