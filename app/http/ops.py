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
    (its answers say how old they may be: ``app.cache.answer_age``).

    The probe is open to anyone who reaches the port, so it names its checks and never a
    cause — a cause can hold an exec plugin's output, an account id, a server's address —
    as the API server's own ``/readyz`` withholds its reasons: ``?verbose`` lists each
    check (``[+]NAME ok``, ``excluded``, ``stale``; ``[-]NAME failed: reason withheld``);
    a failing probe lists them too. The causes are in the log and, for an authenticated
    caller, ``GET /clusters``.
    """
    lines, ready = ["[+]ping ok"], True
    now = time.time()
    gateway = request.app.state.gateway

    def check(name: str, ok: bool, counts: bool, good: str = "ok") -> None:
        nonlocal ready
        if ok:
            lines.append(f"[+]{name} {good}")
        elif counts:
            ready = False
            lines.append(f"[-]{name} failed: reason withheld")
        else:
            lines.append(f"[+]{name} excluded")

    for name in sorted(gateway.unavailable):
        check(f"cluster-{name}-connected", False, name == gateway.default_name)
    for cluster in list(gateway.clusters.values()):
        cache = cluster.caches
        # one cluster that cannot be reached does not hold the others' replicas hostage:
        # only the default cluster, and the clusters that answer, count
        counts = cluster.name == gateway.default_name or cache.api_server_answers()
        check(f"cluster-{cluster.name}-synced", cache.prewarm_ready(), counts)
        rbac = cluster.local_rbac
        if rbac is not None and rbac.mode != "false":
            # its RBAC decides once synced; one that cannot sync (the gateway may not watch
            # RBAC) holds readiness no longer than a pre-warmed cache would: reviews decide
            check(f"cluster-{cluster.name}-rbac", rbac.settled or rbac.waited(
                cluster.settings.sync_timeout), counts)
        tokens = cluster.local_tokens
        if tokens is not None and tokens.started:
            # the identity cluster's tokens are judged here once its keys and accounts are
            # held; one that cannot (no right to read them) holds readiness no longer: reviews
            check(f"cluster-{cluster.name}-tokens", tokens.settled or tokens.waited(
                cluster.settings.sync_timeout), counts)
        if cache.credentials_problem is not None:
            check(f"cluster-{cluster.name}-credentials", False,
                  cluster.name == gateway.default_name)
        behind = not cache.api_server_answers() or any(
            since is not None and now - since > _STALE_FOR
            for since in map(cache.stale_since, cache.entries().values()))
        lines.append(f"[+]cluster-{cluster.name}-following "
                     + ("stale: serving from the cache" if behind else "ok"))
        history = cluster.history
        if history is not None:
            # a store that cannot be written holds up nothing of the present: said, not failed
            lines.append(f"[+]cluster-{cluster.name}-history "
                         + ("ok" if history.problem() is None else "behind: reason withheld"))
    if not ready:
        return PlainTextResponse("\n".join(lines) + "\nreadyz check failed\n", status_code=503)
    verbose = "verbose" in request.query_params
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
