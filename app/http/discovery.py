"""Discovery, as the API server serves it: /api, /apis, /api/v1, /apis/{group}[/{version}], /version.

The documents are the API server's own (refreshed when older than a few
seconds, one refresh at a time however many ask: ``ClusterCache.discovery_within``), so kubectl and the official Python client see the same resources,
verbs and short names. Discovery is not authorization: denied resources are
listed too; reading them answers 403.
"""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from app.http.context import context_of
from app.kube.status import not_found
from informer_core.discovery import Discovery

__all__ = ["router"]

router = APIRouter()
_MAX_AGE = 10.0


def _json(doc: object) -> Response:
    return Response(orjson.dumps(doc), media_type="application/json")


async def _discovery(request: Request) -> Discovery:
    cluster = context_of(request.scope).cluster or request.app.state.gateway.default
    return await cluster.caches.discovery_within(_MAX_AGE)


@router.get("/api", include_in_schema=False)
async def api_versions(request: Request) -> Response:
    return _json((await _discovery(request)).api_versions_doc)


@router.get("/apis", include_in_schema=False)
async def api_groups(request: Request) -> Response:
    return _json((await _discovery(request)).api_groups_doc)


@router.get("/api/{version}", include_in_schema=False)
async def core_resources(request: Request, version: str) -> Response:
    return await _resource_list(request, version)


@router.get("/apis/{group}", include_in_schema=False)
async def api_group(request: Request, group: str) -> Response:
    discovery = await _discovery(request)
    for doc in discovery.api_groups_doc.get("groups") or []:
        if doc.get("name") == group:
            return _json({"kind": "APIGroup", "apiVersion": "v1", **{
                k: v for k, v in doc.items() if k not in ("kind", "apiVersion")}})
    raise not_found(f"the server could not find the requested resource (API group {group!r})")


@router.get("/apis/{group}/{version}", include_in_schema=False)
async def group_resources(request: Request, group: str, version: str) -> Response:
    return await _resource_list(request, f"{group}/{version}")


async def _resource_list(request: Request, group_version: str) -> Response:
    discovery = await _discovery(request)
    doc = discovery.resource_lists.get(group_version)
    if doc is None:
        raise not_found(
            f"the server could not find the requested resource (group version {group_version!r})")
    return _json(doc)


@router.get("/version", include_in_schema=False)
async def version(request: Request) -> Response:
    return _json((await _discovery(request)).version_doc)
