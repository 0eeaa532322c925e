"""The application: ``create_app(settings, factory=None)`` builds everything.

No module-level app or settings: tests build as many apps as they like, each
with its own factory (a real one against the test cluster, or one over a fake
lister-watcher). Resource paths go straight to the resource endpoint
(``app.http.asgi``); the FastAPI app serves operations and discovery, and sends any
other path to the resource endpoint too (``/api/...`` and ``/apis/...`` paths
are Kubernetes paths; any other first segment is the short form).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.responses import Response
from starlette.routing import Route

from app.auth.reviews import Reviewer
from app.clusters.cluster import DEFAULT_CLUSTER, Cluster
from app.gateway import Gateway
from app.http import discovery, ops, ui
from app.http.asgi import GatewayApp
from app.http.resources import resource_endpoint
from app.kube.status import StatusError, status_response
from app.query.budget import MIN_LIMIT, QueryMemory
from app.settings import Settings, is_loopback
from informer_core.factory import SharedInformerFactory
from informer_core.pages import metadata_transform

__all__ = ["build_factory", "create_app", "strip_managed_fields"]

log = logging.getLogger(__name__)

_ALL_METHODS = ["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"]


@metadata_transform  # it touches only metadata: list pages need not be built as dicts
def strip_managed_fields(obj: dict) -> dict:
    """The default transform: drop ``metadata.managedFields`` (about 40% of an object)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


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

    The gateway serves one cluster, ``default``, from ``factory``
    (``app.clusters.cluster``; ``app.gateway`` holds it).
    """
    settings = settings or Settings()
    factory = factory or build_factory(settings, api_client)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        memory = QueryMemory(settings.query_memory_bytes or MIN_LIMIT)  # one for the process
        gateway = Gateway(settings, [Cluster(DEFAULT_CLUSTER, settings, factory, reviewer,
                                             memory=memory)], worker, memory)
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
