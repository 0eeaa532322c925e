"""``GET /clusters``: the clusters this gateway serves, for pickers and operators.

A ``ClusterList`` in name order, each ``{name, default, ready, lastSyncedAt,
resourcesCached}`` and, when it is not ready, ``message`` saying why. Any caller the
gateway authenticates may read it (names are not authorization, as discovery lists
resources a caller cannot read); it never carries a server address or a credential —
the gateway's own credentials to its clusters are exactly what Argo CD's cluster
list once leaked — so a reason that names an address has it taken out.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

__all__ = ["cluster_list", "router"]

router = APIRouter()

_ADDRESS = re.compile(r"\b(?:https?|wss?)://[^\s'\"),]+|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b")


def _without_addresses(text: str) -> str:
    return _ADDRESS.sub("<address>", text)


def _time(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cluster_list(gateway: Any) -> dict:
    """The ``ClusterList`` of ``gateway`` now (no request made to any API server)."""
    items = []
    for name in sorted({*gateway.clusters, *gateway.unavailable, *gateway.connecting}):
        cluster = gateway.clusters.get(name)
        item: dict[str, Any] = {"name": name, "default": name == gateway.default_name}
        if cluster is None:
            why = gateway.unavailable.get(name, "being connected")
            item.update(ready=False, lastSyncedAt=None, resourcesCached=0,
                        message=_without_addresses(why))
            items.append(item)
            continue
        caches = cluster.caches
        entries = caches.entries()
        problem = caches.credentials_problem
        if problem is None and not caches.api_server_answers():
            problem = "its API server does not answer"
        synced = caches.prewarm_ready() and problem is None
        item.update(ready=synced,
                    lastSyncedAt=_time(caches.confirmed_at) if caches.ever_confirmed() else None,
                    resourcesCached=len(entries))
        if not synced:
            item["message"] = _without_addresses(
                problem or "the pre-warmed caches have not synced yet")
        items.append(item)
    return {"kind": "ClusterList", "apiVersion": "kube-cache-gateway.io/v1",
            "metadata": {}, "items": items}


@router.get("/clusters", include_in_schema=False)
async def clusters(request: Request) -> Response:
    """Every configured cluster, in name order (see the module)."""
    return Response(orjson.dumps(cluster_list(request.app.state.gateway)),
                    media_type="application/json")

