"""Operations: liveness, readiness, metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import PlainTextResponse, Response

__all__ = ["router"]

router = APIRouter()


@router.get("/healthz", include_in_schema=False)
@router.get("/livez", include_in_schema=False)
async def healthz() -> Response:
    """The process is alive and its event loop answers."""
    return PlainTextResponse("ok")


@router.get("/readyz", include_in_schema=False)
async def readyz(request: Request) -> Response:
    """Ready when the pre-warmed caches are synced and the API server answers."""
    cache = request.app.state.gateway.cache
    problems = []
    if not cache.prewarm_ready():
        problems.append("pre-warmed caches are not synced yet")
    if not await cache.api_server_reachable():
        problems.append("the API server does not answer")
    if problems:
        return PlainTextResponse("not ready: " + "; ".join(problems) + "\n", status_code=503)
    return PlainTextResponse("ok")


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    registry = request.app.state.gateway.metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
