"""The gateway's own OpenAPI 3 document, served at ``/openapi.json``.

Written out rather than derived: resource paths are answered below FastAPI
(``app.http.asgi``), so FastAPI's generator never sees them. It describes what a
client may send — the Kubernetes paths, the short form, every query parameter
the gateway reads — and what comes back: lists, objects, discovery documents
and, for every refusal, a Kubernetes ``Status`` with its code. The test suite
fuzzes the live gateway against it (schemathesis): no 5xx, no answer the
document does not describe.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

__all__ = ["document"]

_STATUS = {
    "type": "object", "required": ["kind", "apiVersion", "status", "message", "reason", "code"],
    "properties": {
        "kind": {"const": "Status"}, "apiVersion": {"const": "v1"},
        "metadata": {"type": "object"}, "status": {"enum": ["Failure", "Success"]},
        "message": {"type": "string"}, "reason": {"type": "string"},
        "details": {"type": "object"}, "code": {"type": "integer"},
    },
}
_META = {"type": "object", "properties": {"resourceVersion": {"type": "string"},
                                          "continue": {"type": "string"},
                                          "remainingItemCount": {"type": "integer"}}}
_OBJECT = {
    "type": "object", "required": ["apiVersion", "kind", "metadata"],
    "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                   "metadata": {"type": "object", "required": ["name"],
                                "properties": {"name": {"type": "string"},
                                               "namespace": {"type": "string"},
                                               "resourceVersion": {"type": "string"}}}},
}
_LIST = {
    "type": "object", "required": ["apiVersion", "kind", "metadata", "items"],
    "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                   "metadata": _META, "items": {"type": "array", "items": _OBJECT}},
}

_SUMMARY = {
    "type": "object", "required": ["apiVersion", "kind", "total", "counts"],
    "properties": {"apiVersion": {"const": "v1"}, "kind": {"const": "Summary"},
                   "metadata": _META, "total": {"type": "integer", "minimum": 0},
                   "counts": {"type": "object", "additionalProperties": {
                       "type": "object", "additionalProperties": {"type": "integer"}}}},
}

_ERRORS = {
    "400": "a bad selector, parameter or name", "401": "no token, or one the cluster rejects "
    "(--authz kubernetes)", "403": "denied by the policy or the caller's RBAC",
    "404": "no such resource or object", "405": "not a read", "406": "nothing acceptable offered",
    "410": "a version older than the cache keeps (Exact lists)", "414": "the query is too long",
    "422": "resourceVersionMatch against the API server's rules",
    "503": "the cache is not synced yet (Retry-After)",
    "504": "the watch did not bring the version asked for within 3 s (Retry-After)",
}


def _query(name: str, schema: dict, description: str) -> dict:
    return {"name": name, "in": "query", "required": False, "schema": schema,
            "description": description}


_LIST_PARAMS = [
    _query("labelSelector", {"type": "string"}, "kubectl's label selector grammar"),
    _query("fieldSelector", {"type": "string"}, "field selector on any dotted path"),
    _query("limit", {"type": "integer", "minimum": 0}, "page size; 0 for all"),
    _query("continue", {"type": "string"}, "the token of the previous page"),
    _query("resourceVersion", {"type": "string", "pattern": "^[0-9]*$"},
           "an answer not older than this (waited for up to 3 s); 0 or none: what the cache holds"),
    _query("resourceVersionMatch", {"enum": ["", "NotOlderThan", "Exact"]},
           "with resourceVersion: how it must match"),
    _query("watch", {"type": "boolean"}, "stream changes as the Kubernetes watch protocol"),
    _query("timeoutSeconds", {"type": "integer", "minimum": 0}, "end a watch after this long"),
    _query("allowWatchBookmarks", {"type": "boolean"}, "send BOOKMARK events on a watch"),
    _query("includeObject", {"enum": ["None", "Metadata", "Object"]}, "Table rows' objects"),
    {**_query("filter", {"type": "array", "items": {"type": "string"}},
              "PATH OP VALUE (=, !=, ~, !~, <, >, in (a,b), notin (a,b)); repeated: all must hold"),
     "style": "form", "explode": True},
    _query("sortBy", {"type": "string"}, "PATH[,-PATH...]: sorted by value, '-' descending"),
    _query("fields", {"type": "string"}, "PATH,...: items carry only these (and their identity)"),
    _query("summary", {"type": "string"}, "PATH,...: counts per value instead of the objects"),
]
_GET_PARAMS = [_LIST_PARAMS[4]]


_COLLECTION = {"anyOf": [_LIST, _SUMMARY]}


def _path(name: str, description: str, example: str) -> dict:
    return {"name": name, "in": "path", "required": True, "description": description,
            "schema": {"type": "string", "minLength": 1}, "example": example}


def _errors() -> dict:
    return {code: {"description": why, "content": {"application/json": {"schema": _STATUS}}}
            for code, why in _ERRORS.items()}


def _operation(summary: str, params: list[dict], body: dict) -> dict:
    return {"get": {"summary": summary, "parameters": params, "responses": {
        "200": {"description": "the answer", "content": {"application/json": {"schema": body}}},
        "304": {"description": "unchanged since the ETag in If-None-Match"},
        **_errors()}}}


def _resource_paths(prefix: str, prefix_params: list[dict]) -> dict[str, Any]:
    ns = _path("namespace", "a namespace", "demo-shop")
    res = _path("resource", "a resource's plural name", "pods")
    name = _path("name", "an object's name", "web-1")
    return {
        f"{prefix}/{{resource}}": _operation(
            "list (or watch, or stream as SSE) a resource in all namespaces",
            [*prefix_params, res, *_LIST_PARAMS], _COLLECTION),
        f"{prefix}/namespaces/{{namespace}}/{{resource}}": _operation(
            "list (or watch, or stream as SSE) a resource in one namespace",
            [*prefix_params, ns, res, *_LIST_PARAMS], _COLLECTION),
        f"{prefix}/{{resource}}/{{name}}": _operation(
            "get a cluster-scoped object", [*prefix_params, res, name, *_GET_PARAMS], _OBJECT),
        f"{prefix}/namespaces/{{namespace}}/{{resource}}/{{name}}": _operation(
            "get a namespaced object", [*prefix_params, ns, res, name, *_GET_PARAMS], _OBJECT),
    }


def _plain(summary: str, media: str = "text/plain") -> dict:
    return {"get": {"summary": summary, "responses": {
        "200": {"description": "ok", "content": {media: {"schema": {"type": "string"}}}},
        "503": {"description": "not ready", "content": {media: {"schema": {"type": "string"}}}}}}}


def _discovery(summary: str, params: list[dict] | None = None) -> dict:
    return {"get": {"summary": summary, "parameters": params or [], "responses": {
        "200": {"description": "the API server's discovery document",
                "content": {"application/json": {"schema": {"type": "object"}}}},
        **_errors()}}}


def _version() -> str:
    try:
        return importlib.metadata.version("kube-cache-gateway")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return "0.0.0"


_CLUSTER_LIST = {
    "type": "object", "required": ["apiVersion", "kind", "items"],
    "properties": {"apiVersion": {"type": "string"}, "kind": {"const": "ClusterList"},
                   "items": {"type": "array", "items": {
                       "type": "object",
                       "required": ["name", "default", "ready", "lastSyncedAt", "resourcesCached"],
                       "properties": {"name": {"type": "string"}, "default": {"type": "boolean"},
                                      "ready": {"type": "boolean"},
                                      "lastSyncedAt": {"type": ["string", "null"]},
                                      "resourcesCached": {"type": "integer", "minimum": 0},
                                      "message": {"type": "string"}}}}},
}


def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the gateway's HTTP interface."""
    group = _path("group", "an API group", "apps")
    version = _path("version", "an API version", "v1")
    cluster = _path("cluster", "a cluster this gateway serves (GET /clusters)", "default")
    several = "/clusters/{cluster}"
    paths: dict[str, Any] = {
        "/clusters": _operation("the clusters this gateway serves", [], _CLUSTER_LIST),
        f"{several}/api": _discovery("API versions of a cluster's legacy group", [cluster]),
        f"{several}/apis": _discovery("a cluster's API groups", [cluster]),
        f"{several}/version": _discovery("a cluster's API server version", [cluster]),
        **_resource_paths(f"{several}/api/{{version}}", [cluster, version]),
        **_resource_paths(f"{several}/apis/{{group}}/{{version}}", [cluster, group, version]),
        "/api": _discovery("API versions of the legacy group"),
        "/apis": _discovery("API groups"),
        "/api/{version}": _discovery("resources of the legacy group", [version]),
        "/apis/{group}": _discovery("versions of a group", [group]),
        "/apis/{group}/{version}": _discovery("resources of a group version", [group, version]),
        "/version": _discovery("the API server's version"),
        **_resource_paths("/api/{version}", [version]),
        **_resource_paths("/apis/{group}/{version}", [group, version]),
        "/healthz": _plain("the process is alive"), "/livez": _plain("the process is alive"),
        "/readyz": _plain("pre-warmed caches synced and following, the API server answering"),
        "/metrics": _plain("Prometheus metrics", "text/plain; version=0.0.4; charset=utf-8"),
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "kube-cache-gateway", "version": _version(),
                 "description": "Kubernetes resources served from informer caches, read-only. "
                                "Streams: watch=true (the watch protocol) or Accept: "
                                "text/event-stream (Server-Sent Events) on collection paths. "
                                "The short form /{group}/{version}/{resource} ('core' for the "
                                "legacy group) answers as /api and /apis paths do."},
        "paths": paths,
        "components": {"schemas": {"Status": _STATUS, "List": _LIST, "Object": _OBJECT},
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{}, {"bearer": []}],
    }
