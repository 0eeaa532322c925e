"""Discovery, as the API server serves it: /api, /apis, /api/v1, /apis/{group}[/{version}], /version.

The documents are the API server's own (refreshed when older than a few
seconds, one refresh at a time however many ask: ``ClusterCache.discovery_within``), so kubectl and the official Python client see the same resources,
verbs and short names. Discovery is not authorization: denied resources are
listed too; reading them answers 403.

``/api`` and ``/apis`` also answer the aggregated documents a current client asks for
(``app.kube.aggregated``), whatever the API server's version: every resource in two
requests, with an ``ETag``.

``/openapi/v2`` and ``/openapi/v3...`` are the API server's own documents, kept per
cluster and checked again only after a discovery refresh (``app.cache.openapi_documents``),
compressed when the client accepts it, with ETags: ``kubectl explain`` works through
the gateway.
"""

from __future__ import annotations

import weakref

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from app.cache.openapi_documents import PROTOBUF
from app.kube.aggregated import AggregatedDocuments, aggregated_version
from app.kube.context import context_of
from app.kube.status import not_found
from informer_core.discovery import Discovery

__all__ = ["router"]

router = APIRouter()
_MAX_AGE = 10.0
# each cluster's discovery -> its aggregated documents (built once per refresh)
_AGGREGATED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _json(doc: object, vary: bool = False) -> Response:
    """``vary``: the path also answers another document, chosen by ``Accept``."""
    return Response(orjson.dumps(doc), media_type="application/json",
                    headers={"Vary": "Accept"} if vary else None)


async def _discovery(request: Request) -> Discovery:
    cluster = context_of(request.scope).cluster or request.app.state.gateway.default
    return await cluster.caches.discovery_within(_MAX_AGE)


@router.get("/api", include_in_schema=False)
async def api_versions(request: Request) -> Response:
    discovery = await _discovery(request)
    return _aggregated(request, discovery, "api") or _json(discovery.api_versions_doc, vary=True)


@router.get("/apis", include_in_schema=False)
async def api_groups(request: Request) -> Response:
    discovery = await _discovery(request)
    return _aggregated(request, discovery, "apis") or _json(discovery.api_groups_doc, vary=True)


def _aggregated(request: Request, discovery: Discovery, root: str) -> Response | None:
    """The aggregated document of ``root``, when ``Accept`` asks for it first (else None)."""
    version = aggregated_version(request.headers.get("accept"))
    if version is None:
        return None
    documents = _AGGREGATED.get(discovery)
    if documents is None:
        documents = _AGGREGATED[discovery] = AggregatedDocuments()
    body, etag, media_type = documents.document(discovery, root, version)
    headers = {"ETag": etag, "Vary": "Accept", "Cache-Control": "public"}
    if etag in [t.strip() for t in request.headers.get("if-none-match", "").split(",")]:
        return Response(status_code=304, headers=headers)
    return Response(body, headers={**headers, "Content-Type": media_type})


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


@router.get("/openapi/v2", include_in_schema=False)
async def openapi_v2(request: Request) -> Response:
    accept = request.headers.get("accept", "")
    return await _openapi(request, "/openapi/v2", "protobuf" if PROTOBUF in accept else "json")


@router.get("/openapi/v3", include_in_schema=False)
async def openapi_v3_root(request: Request) -> Response:
    return await _openapi(request, "/openapi/v3", "json")


@router.get("/openapi/v3/{group_version:path}", include_in_schema=False)
async def openapi_v3(request: Request, group_version: str) -> Response:
    # the query (kubectl's ``hash``) names a version of the same document: the current one
    # is served, and no query is ever a key of what is kept
    return await _openapi(request, f"/openapi/v3/{group_version}", "json")


async def _openapi(request: Request, path: str, kind: str) -> Response:
    """One of the cluster's OpenAPI documents, from memory (see the module)."""
    context = context_of(request.scope)
    cluster = context.cluster or request.app.state.gateway.default
    discovery = await _discovery(request)
    kept = await cluster.caches.openapi.document(path, kind, discovery.api_groups_doc)
    headers = {"ETag": kept.etag, "Vary": "Accept, Accept-Encoding",
               "Cache-Control": "no-cache, private"}
    if kept.etag in [t.strip() for t in request.headers.get("if-none-match", "").split(",")]:
        return Response(status_code=304, headers=headers)
    body = kept.body
    if path == "/openapi/v3" and context.prefix:
        # the root names each document by a path from the server's root: under a cluster's
        # prefix, that path must carry the prefix (a client resolves it against its host)
        root = orjson.loads(body)
        for entry in (root.get("paths") or {}).values():
            if isinstance(entry, dict) and isinstance(entry.get("serverRelativeURL"), str):
                entry["serverRelativeURL"] = context.prefix + entry["serverRelativeURL"]
        body = orjson.dumps(root)
    elif "gzip" in request.headers.get("accept-encoding", ""):
        return Response(kept.gzipped, headers={**headers, "Content-Type": kept.media_type,
                                               "Content-Encoding": "gzip"})
    return Response(body, headers={**headers, "Content-Type": kept.media_type})
