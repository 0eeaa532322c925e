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
from starlette.responses import Response
from starlette.routing import Route

from app.auth.client_certs import configured
from app.auth.reviews import Reviewer
from app.bridge import run_blocking
from app.clusters.cluster import DEFAULT_CLUSTER, Cluster, build_factory, strip_managed_fields
from app.clusters.config import ClusterSpec
from app.clusters.connect import connect as connect_cluster
from app.clusters.connect import own_namespace
from app.clusters.connect import Connector
from app.clusters.secrets import ClusterSecrets
from app.clusters.sources import ClusterSet, ClustersFile
from app.gateway import Gateway
from app.http import clusters, discovery, ops, ui
from app.http.asgi import GatewayApp
from app.http.resources import resource_endpoint
from app.kube.status import StatusError, status_response
from app.process.kubeconfig import api_client_for
from app.query.budget import MIN_LIMIT, QueryMemory
from app.settings import Settings, is_loopback
from informer_core.factory import SharedInformerFactory

__all__ = ["build_factory", "create_app", "strip_managed_fields"]

log = logging.getLogger(__name__)

_ALL_METHODS = ["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"]


def create_app(settings: Settings | None = None, factory: SharedInformerFactory | None = None,
               api_client: Any = None, reviewer: Reviewer | None = None,
               worker: Any = None, connector: Connector | None = None) -> GatewayApp:
    """Build the gateway application.

    Args:
        settings: the gateway's settings (defaults if ``None``).
        factory: the informer factory to serve from; built from ``api_client``
            (or the default kube configuration) if ``None``.
        reviewer: who answers token and access reviews with ``--authz
            kubernetes`` (default: the API server the factory reads from).
        worker: the ``app.launch.supervisor.WorkerInfo`` of a worker process (one of several).
        connector: with ``--clusters``, how a cluster of the file is connected
            (default: ``app.clusters.connect.connect``; ``api_client``, when given, is the
            default cluster's at start).

    Without ``--clusters`` the gateway serves one cluster, ``default``, from ``factory``
    (``app.clusters.cluster``; ``app.gateway`` holds it); with it, the file's clusters,
    followed as the file changes (``app.clusters.sources``).
    """
    settings = settings or Settings()
    several = bool(settings.clusters or settings.cluster_secrets)
    client_cas = configured(settings)  # serving TLS with authorization: certificates too
    if not several:
        factory = factory or build_factory(settings, api_client)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        memory = QueryMemory(settings.query_memory_bytes or MIN_LIMIT)  # one for the process
        sources: list[Any] = []
        if several:
            gateway = Gateway(settings, [], worker, memory)
            clusters = ClusterSet(gateway, _connector(settings, memory, connector, api_client,
                                                      reviewer))
            if settings.clusters:
                sources.append(ClustersFile(settings.clusters, clusters.told_by(ClusterSet.FILE)))
            if settings.cluster_secrets:
                own = (api_client if not settings.clusters and api_client is not None else
                       await run_blocking(api_client_for, settings.kubeconfig, settings.context,
                                          settings.serviceaccount_dir))
                sources.append(ClusterSecrets(own, settings.cluster_secrets_namespace
                                              or own_namespace(settings),
                                              clusters.told_by(ClusterSet.SECRETS),
                                              wait=settings.sync_timeout))
        else:
            gateway = Gateway(settings, [Cluster(DEFAULT_CLUSTER, settings, factory, reviewer,
                                                 memory=memory)], worker, memory)
        app.state.gateway = gateway
        app.state.clusters_source = sources[0] if sources else None
        await gateway.start()
        for source in sources:  # each source's clusters applied before the port serves
            await source.start()
        following = None if client_cas is None else asyncio.create_task(
            client_cas.follow(lambda path: _identity_get(gateway, path)))
        try:
            yield
        finally:
            if following is not None:
                following.cancel()
            for source in sources:
                await source.stop()
            await gateway.stop()

    app = FastAPI(title="kube-cache-gateway", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.include_router(ops.router)
    app.include_router(clusters.router)
    app.include_router(discovery.router)
    app.include_router(ui.router)
    # Resource paths are answered before FastAPI (app.http.asgi); this catches the rest.
    app.router.routes.append(Route("/{path:path}", resource_endpoint, methods=_ALL_METHODS))
    app.add_exception_handler(StatusError, _status_error)
    app.add_exception_handler(Exception, _internal_error)
    # Metrics, CORS, authentication and the loopback Host check for every path.
    served = GatewayApp(app, settings.cors_origins,
                        local_only=settings.authz == "none" and is_loopback(settings.host),
                        access_log=settings.access_log,
                        authenticates=settings.authz == "kubernetes",
                        worker=worker.index if worker is not None else None)
    served.client_cas = client_cas  # installed into the server's TLS (app.launch.server)
    return served


def _identity_get(gateway: Gateway, path: str) -> tuple[int, Any] | None:
    """GET ``path`` from the identity cluster's API server with the gateway's credentials
    there (off the loop); ``None`` while that cluster is not connected."""
    cluster = gateway.clusters.get(gateway.identity_name)
    return None if cluster is None else cluster.discovery.get(path)


def _connector(settings: Settings, memory: QueryMemory, connector: Connector | None,
               api_client: Any, reviewer: Reviewer | None) -> Connector:
    """How the gateway connects a cluster: ``connector``, else by its kubeconfig or Secret.

    The clusters file's default cluster, on its first connection, reuses ``api_client``
    (serve loaded it already, to end at once, with exit code 2, when its credentials cannot
    be had). Never a cluster of a Secret: that client is the gateway's own identity, and a
    Secret's cluster is read with the Secret's credentials only — else whoever may write a
    Secret would have the gateway's home cluster served under any name they chose.
    """
    if connector is not None:
        return connector
    given = [api_client] if settings.clusters else []

    def connect(spec: ClusterSpec, default: bool) -> Cluster:
        reuse = default and not spec.server and given and given[0] is not None
        client = given.pop() if reuse else None
        return connect_cluster(spec, settings, memory, default, client, reviewer)

    return connect


async def _status_error(request: Any, exc: StatusError) -> Response:
    return status_response(exc)


async def _internal_error(request: Any, exc: Exception) -> Response:
    log.error("unexpected error answering %s %s", request.method, request.url.path,
              exc_info=exc)
    return status_response(StatusError(500, "internal error", "InternalError"))
