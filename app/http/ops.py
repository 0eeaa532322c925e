"""Operations: liveness, readiness, metrics."""

from __future__ import annotations

import time

import orjson
from fastapi import APIRouter, Request
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.responses import PlainTextResponse, Response

from app.http.openapi import document

__all__ = ["router"]

router = APIRouter()

_OPENAPI = orjson.dumps(document())
_STALE_FOR = 30.0  # seconds a pre-warmed cache may go without following before not ready


@router.get("/healthz", include_in_schema=False)
@router.get("/livez", include_in_schema=False)
async def healthz() -> Response:
    """The process is alive and its event loop answers."""
    return PlainTextResponse("ok")


@router.get("/readyz", include_in_schema=False)
async def readyz(request: Request) -> Response:
    """Ready when the pre-warmed caches are synced and following, and the API server answers.

    Answers keep coming from the caches either way (saying how old they may be:
    ``app.cache.answer_age``); not ready tells a load balancer to prefer a replica
    that is following the API server.
    """
    problems = []
    for cluster in request.app.state.gateway.clusters.values():
        cache = cluster.caches
        if not cache.prewarm_ready():
            problems.append("pre-warmed caches are not synced yet")
        if not await cache.api_server_reachable():
            problems.append("the API server does not answer")
        now = time.time()
        for gvr, entry in cache.entries().items():
            since = cache.stale_since(entry)
            if entry.prewarmed and since is not None and now - since > _STALE_FOR:
                problems.append(f"the pre-warmed cache of {gvr.resource} has not followed the "
                                f"API server for {int(now - since)} s")
    if problems:
        return PlainTextResponse("not ready: " + "; ".join(problems) + "\n", status_code=503)
    return PlainTextResponse("ok")


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    """Prometheus text: this process's figures, or every worker's of the pod (``worker`` label)."""
    body = await request.app.state.gateway.metrics_exposition()
    return Response(body, media_type=CONTENT_TYPE_LATEST)


@router.get("/openapi.json", include_in_schema=False)
async def openapi() -> Response:
    """The gateway's OpenAPI document (``app.http.openapi``)."""
    return Response(_OPENAPI, media_type="application/json")
