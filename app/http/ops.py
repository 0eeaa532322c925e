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
_STALE_FOR = 30.0  # seconds a cache may go without following before /readyz?verbose names it


@router.get("/healthz", include_in_schema=False)
@router.get("/livez", include_in_schema=False)
async def healthz() -> Response:
    """The process is alive and its event loop answers."""
    return PlainTextResponse("ok")


@router.get("/readyz", include_in_schema=False)
async def readyz(request: Request) -> Response:
    """Ready once every pre-warmed cache has synced; then ready for as long as the process serves.

    With several clusters, the default cluster and every cluster whose API server answers
    count; one that does not (or cannot be connected) is listed as ``excluded``: a replica
    must not leave its Service because one cluster of ten is away.

    A replica that is not ready leaves its Service. The moment the API server is
    away is exactly when the caches are the only thing left to read, so that must
    not take replicas out: as CoreDNS's kubernetes plugin, the gateway is ready after
    its first sync and stays ready while it serves from a cache that is not following
    (its answers say how old they may be: ``app.cache.answer_age``). ``?verbose``
    lists each check as the API server's ``/readyz?verbose`` does, the caches that
    are not following among them.
    """
    lines, ready = ["[+]ping ok"], True
    now = time.time()
    gateway = request.app.state.gateway
    for name, why in sorted(gateway.unavailable.items()):
        counts = name == gateway.default_name
        ready = ready and not counts
        lines.append(f"[{'-' if counts else '+'}]cluster-{name}-connected "
                     f"{'failed' if counts else 'excluded'}: {why}")
    for cluster in list(gateway.clusters.values()):
        cache = cluster.caches
        # one cluster that cannot be reached does not hold the others' replicas hostage:
        # only the default cluster, and the clusters that answer, count
        counts = cluster.name == gateway.default_name or cache.api_server_answers()
        failed, excluded = ("failed", False) if counts else ("excluded", True)
        if cache.prewarm_ready():
            lines.append(f"[+]cluster-{cluster.name}-synced ok")
        else:
            ready = ready and excluded
            lines.append(f"[{'+' if excluded else '-'}]cluster-{cluster.name}-synced {failed}: "
                         f"the pre-warmed caches have not synced yet")
        if cache.credentials_problem is not None:
            ready = ready and cluster.name != gateway.default_name
            mark = "-" if cluster.name == gateway.default_name else "+"
            lines.append(f"[{mark}]cluster-{cluster.name}-credentials "
                         f"{'failed' if mark == '-' else 'excluded'}: {cache.credentials_problem}")
        behind = []
        if not cache.api_server_answers():
            behind.append("its API server does not answer the heartbeat")
        for gvr, entry in cache.entries().items():
            since = cache.stale_since(entry)
            if since is not None and now - since > _STALE_FOR:
                behind.append(f"{gvr.resource} not following for {int(now - since)} s")
        lines.append(f"[+]cluster-{cluster.name}-following ok" + (
            f" (serving from the cache: {'; '.join(behind)})" if behind else ""))
    verbose = "verbose" in request.query_params
    if not ready:
        body = "\n".join(lines) + "\nreadyz check failed\n" if verbose else (
            "not ready: " + "; ".join(l.split(": ", 1)[1] for l in lines if l.startswith("[-]")) + "\n")
        return PlainTextResponse(body, status_code=503)
    return PlainTextResponse("\n".join(lines) + "\nreadyz check passed\n" if verbose else "ok")


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    """Prometheus text: this process's figures, or every worker's of the pod (``worker`` label)."""
    body = await request.app.state.gateway.metrics_exposition()
    return Response(body, media_type=CONTENT_TYPE_LATEST)


@router.get("/openapi.json", include_in_schema=False)
async def openapi() -> Response:
    """The gateway's OpenAPI document (``app.http.openapi``)."""
    return Response(_OPENAPI, media_type="application/json")
