"""The application: ``create_app(settings, factory=None)`` builds everything.

No module-level app or settings: tests build as many apps as they like, each
with its own factory (a real one against the test cluster, or one over a fake
lister-watcher). Resource paths go straight to the resource endpoint
(``app.http.asgi``); the FastAPI app serves operations and discovery, and sends any
other path to the resource endpoint too (``/api/...`` and ``/apis/...`` paths
are Kubernetes paths; any other first segment is the short form).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from prometheus_client import generate_latest
from starlette.responses import Response
from starlette.routing import Route

from app.http.asgi import GatewayApp
from app.auth.authorization import Authorization, ResourcePolicy
from app.cache.resources import GatewayCache
from app.auth.delegated import DelegatedAuth
from app.http.limits import StreamLimiter
from app.http.metrics import Metrics
from app.process.peers import Peers, merge_expositions
from app.auth.reviews import ApiReviewer, Reviewer
from app.http import discovery, ops, ui
from app.http.resources import resource_endpoint
from app.settings import Settings, is_loopback
from app.kube.status import StatusError, status_response
from informer_core.discovery import GroupVersionResource
from informer_core.factory import SharedInformerFactory
from informer_core.pages import metadata_transform

__all__ = ["Gateway", "build_factory", "create_app", "strip_managed_fields"]

log = logging.getLogger(__name__)

_ALL_METHODS = ["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"]


@metadata_transform  # it touches only metadata: list pages need not be built as dicts
def strip_managed_fields(obj: dict) -> dict:
    """The default transform: drop ``metadata.managedFields`` (about 40% of an object)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


class Gateway:
    """Everything one gateway process holds; ``app.state.gateway``."""

    def __init__(self, settings: Settings, factory: SharedInformerFactory,
                 reviewer: Reviewer | None = None, worker: Any = None) -> None:
        self.settings = settings
        self.cache = GatewayCache(settings, factory)
        self.worker = worker  # app.process.supervisor.WorkerInfo when one of several processes
        self.peers: Peers | None = None
        if worker is not None:
            self.peers = Peers(worker.index, worker.count, worker.peer_dir,
                               {"metrics": self._own_metrics, "load": self._load_for_sibling})
            self.cache.announce = self._announce_load
        self.policy = ResourcePolicy(settings.allow, settings.deny)
        partitioned = settings.namespace_partitioned_lists and settings.authz == "kubernetes"
        self.authorization = Authorization(self.policy, _delegated(settings, factory, reviewer),
                                           self._namespaces if partitioned else None)
        self._namespace_resource: Any = None
        self.limiter = StreamLimiter(settings.max_streams, settings.max_streams_per_client)
        self.metrics = Metrics(self.cache.entries)
        self.closing = asyncio.Event()
        self.loop: asyncio.AbstractEventLoop | None = None

    async def _namespaces(self) -> tuple[int, list[str]]:
        """(version, names) of the cluster's namespaces, from this gateway's own cache of them."""
        if self._namespace_resource is None:
            self._namespace_resource = await self.cache.resolve_text("namespaces")
        entry = await self.cache.load(self._namespace_resource, wait=self.settings.sync_timeout)
        return entry.hub.rv, [o.name for o in entry.hub.view.values()]

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        if self.peers is not None:
            await self.peers.start()
        await self.cache.start(permits=self.policy.permits)

    async def metrics_exposition(self) -> bytes:
        """``/metrics``: this process's, or every worker's of the pod, labelled by worker."""
        own = generate_latest(self.metrics.registry)
        if self.peers is None:
            return own
        return merge_expositions({self.peers.index: own, **await self.peers.ask_all("metrics")})

    async def _own_metrics(self, argument: str) -> bytes:
        return generate_latest(self.metrics.registry)

    def _announce_load(self, gvr: GroupVersionResource) -> None:
        if self.peers is not None:
            self.peers.tell_all("load", f"{gvr.group}/{gvr.version}/{gvr.resource}")

    async def _load_for_sibling(self, argument: str) -> bytes:
        group, _, rest = argument.partition("/")
        version, _, resource = rest.partition("/")
        gvr = GroupVersionResource(group, version, resource)
        if resource:
            self.cache.warm(gvr, self.policy.permits)
        return b"ok"

    def begin_shutdown(self) -> None:
        """End every open stream now (on the loop), before the server waits for connections."""
        self.closing.set()
        for entry in self.cache.entries().values():
            entry.hub.close_all()

    async def stop(self) -> None:
        self.begin_shutdown()
        if self.peers is not None:
            await self.peers.close()
        await self.cache.close()


def _delegated(settings: Settings, factory: SharedInformerFactory,
               reviewer: Reviewer | None) -> DelegatedAuth | None:
    """With ``--authz kubernetes``: reviews by the API server the factory reads from."""
    if settings.authz != "kubernetes":
        return None
    return DelegatedAuth(
        reviewer or ApiReviewer(factory.api_client), settings.authn_audiences,
        token_ttl=settings.authn_cache_ttl, allow_ttl=settings.authz_cache_ttl,
        deny_ttl=settings.authz_deny_cache_ttl, max_entries=settings.authz_cache_size)


def build_factory(settings: Settings, api_client: Any = None, **seams: Any) -> SharedInformerFactory:
    """A factory configured from settings (managedFields stripped unless kept).

    ``seams`` are passed on (``lister_watcher_func``, ``discovery``): a gateway
    over an in-memory cluster is built exactly as one over a real server.
    """
    return SharedInformerFactory(
        api_client, default_resync=settings.resync_period,
        namespace=settings.namespace or None, page_size=settings.page_size,
        transform=None if settings.keep_managed_fields else strip_managed_fields, **seams)


def create_app(settings: Settings | None = None, factory: SharedInformerFactory | None = None,
               api_client: Any = None, reviewer: Reviewer | None = None,
               worker: Any = None) -> GatewayApp:
    """Build the gateway application.

    Args:
        settings: the gateway's settings (defaults if ``None``).
        factory: the informer factory to serve from; built from ``api_client``
            (or the default kube configuration) if ``None``.
        reviewer: who answers token and access reviews with ``--authz
            kubernetes`` (default: the API server the factory reads from).
        worker: the ``app.process.supervisor.WorkerInfo`` of a worker process (one of several).
    """
    settings = settings or Settings()
    factory = factory or build_factory(settings, api_client)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        gateway = Gateway(settings, factory, reviewer, worker)
        app.state.gateway = gateway
        await gateway.start()
        try:
            yield
        finally:
            await gateway.stop()

    app = FastAPI(title="kube-cache-gateway", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.include_router(ops.router)
    app.include_router(discovery.router)
    app.include_router(ui.router)
    # Resource paths are answered before FastAPI (app.http.asgi); this catches the rest.
    app.router.routes.append(Route("/{path:path}", resource_endpoint, methods=_ALL_METHODS))
    app.add_exception_handler(StatusError, _status_error)
    app.add_exception_handler(Exception, _internal_error)
    # Metrics, CORS, authentication and the loopback Host check for every path.
    return GatewayApp(app, settings.cors_origins,
                      local_only=settings.authz == "none" and is_loopback(settings.host),
                      access_log=settings.access_log, authenticates=settings.authz == "kubernetes",
                      worker=worker.index if worker is not None else None)


async def _status_error(request: Any, exc: StatusError) -> Response:
    return status_response(exc)


async def _internal_error(request: Any, exc: Exception) -> Response:
    log.error("unexpected error answering %s %s", request.method, request.url.path,
              exc_info=exc)
    return status_response(StatusError(500, "internal error", "InternalError"))
