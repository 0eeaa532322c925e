"""The ASGI entry point: resource paths go straight to the hot path, the rest to FastAPI.

FastAPI's stack — error, telemetry and body-limit middleware, exception
middleware, an async exit stack per request, route matching over every route —
cost as much per request as answering a small list from the cache: with it, a
single Pod by name served at 0.8× the API server's rate (8 connections); the
hot path alone needs none of it. So ``GatewayApp`` looks at the path once: a
resource path (``/api/<v>/<resource>...``, ``/apis/<g>/<v>/<resource>...``,
``/<group>/<version>/<resource>...``) is answered by
``app.http.resources``; operations, discovery and everything else go
through FastAPI, which keeps its own catch-all for any path left over.

A gateway that does not authorize its callers and listens on loopback answers
only requests whose ``Host`` names a loopback host: a web page whose DNS name
was re-pointed at 127.0.0.1 (DNS rebinding) must not read the cluster through
a developer's gateway, as it could through ``kubectl proxy`` without its
``--accept-hosts``.

A gateway that authorizes its callers (``--authz kubernetes``) authenticates
every request here but the open probes (``/healthz``, ``/livez``,
``/readyz``), before anything else — 401 comes first, as from the API server
— and authorizes ``get`` on any path that is not a resource path: discovery and
``/version`` in the cluster the path names, ``/metrics`` in the identity cluster
(``Gateway.authorize_own``): ``app.auth.authorization`` decides, this only asks.
The gateway's own paths (the probes, ``/metrics``, ``/clusters``) exist at the top
only: under ``/clusters/NAME/`` they are 404, after authentication, so that no
cluster prefix — an unknown one, ``*`` — can stand in for the review they need.

Here too each request gets its ``RequestContext`` (``app.kube.context``), with the
cluster it reads resolved once: every part of the answer after this reaches the
cluster's caches, discovery and decisions through it. ``/clusters/NAME/PATH`` is
``PATH`` of cluster ``NAME`` (any path: resources, discovery, ``/version``, the page):
the prefix is taken off here, once, and kept in the context, so nothing after
knows the difference; the plain paths are the default cluster's.

Latency metrics, the access log and CORS (when configured) wrap both sides here, once; the hot
path answers anything unexpected with a ``Status`` 500 (logged) instead of a
bare error page, as the FastAPI side's exception handler does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from typing import Any

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request

from app.http.access_log import AccessLog
from app.http.history import PREFIX as HISTORY_PREFIX
from app.http.history import history_answer, merged_history_answer
from app.http.merged import merged_endpoint
from app.http.resources import resource_answer
from app.kube.context import RequestContext
from app.kube.status import StatusError, not_found, status_bytes, status_response
from app.settings import is_loopback

__all__ = ["GatewayApp", "cors_options", "is_resource_path", "route_label"]

log = logging.getLogger(__name__)

_OPEN = frozenset({"/healthz", "/livez", "/readyz"})  # probes: no credentials needed
_INTERNAL = status_bytes(500, "internal error", "InternalError")
_NOT_READY = status_bytes(503, "the gateway is starting", "ServiceUnavailable")


_PROBES_AND_METRICS = frozenset({"/healthz", "/livez", "/readyz", "/metrics"})
_MERGED = "/clusters/*"  # the prefix of merged reads (app.http.merged)
# the gateway's own paths: at the top only (404 under /clusters/...), whatever clusters it serves
_GATEWAY_WIDE = _PROBES_AND_METRICS | {"/clusters"}
_KEEP_SLASH = frozenset({"/ui"})
_HISTORY = HISTORY_PREFIX + "/"  # the past of a resource path (app.http.history)  # the page at /ui/: its relative links need the slash


def without_trailing_slashes(path: str) -> str:
    """``path`` as the API server reads it: trailing slashes mean nothing on discovery,
    ``/version`` and resource paths (``/api/v1/pods/``, ``/apis/apps/v1//``), while
    the probes and ``/metrics`` answer 404 with one, as the API server's do; ``/ui/``
    keeps it."""
    stripped = path.rstrip("/")
    if not stripped or stripped in _PROBES_AND_METRICS or stripped in _KEEP_SLASH:
        return path
    return stripped


def is_resource_path(path: str) -> bool:
    """Whether ``path`` names a resource collection or object (not discovery or operations)."""
    if path.startswith("/openapi/"):
        return False  # the API server's OpenAPI documents (/openapi/v3/apis/apps/v1 too)
    segments = path.count("/", 1) + (0 if path.endswith("/") else 1)
    if path.startswith("/apis/"):
        return segments >= 4
    return segments >= 3


def cors_options(origins: tuple[str, ...]) -> dict[str, Any]:
    """``CORSMiddleware`` options: read-only verbs, the headers browsers need for streams."""
    return {"allow_origins": list(origins), "allow_methods": ["GET", "HEAD", "OPTIONS"],
            "allow_headers": ["Accept", "Authorization", "Last-Event-ID", "If-None-Match",
                              "Content-Type"],
            "expose_headers": ["ETag", "Retry-After"], "max_age": 600}


class GatewayApp:
    """The whole gateway as one ASGI callable; ``state`` is the FastAPI app's.

    Every HTTP request is timed here, once, and CORS (when configured) wraps
    both sides, so the FastAPI side needs no middleware of its own for either.
    """

    def __init__(self, api: FastAPI, cors_origins: tuple[str, ...] = (),
                 local_only: bool = False, access_log: bool = False,
                 authenticates: bool = False, worker: int | None = None) -> None:
        self.api = api
        self.client_cas: Any = None  # app.auth.client_certs.ClientCAs, when certificates are asked for
        # one of several processes: every answer says which (operators and tests tell them apart)
        self._worker_header = None if worker is None else (b"kcg-worker", str(worker).encode())
        self.state = api.state
        # the state's own dict: read per request without ``State.__getattr__``'s Python call
        self._state = api.state._state
        self._local_only = local_only
        self._authenticates = authenticates
        self.access_log = AccessLog() if access_log else None
        self._hosts: dict[bytes, bool] = {}  # Host header -> names a loopback host
        self._routes: dict[str, str] = {}  # path -> its route label (a client asks the same again)
        entry: Any = self._dispatch
        if cors_origins:
            entry = CORSMiddleware(entry, **cors_options(cors_origins))
        self._entry = entry

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.api(scope, receive, send)  # the lifespan
            return
        path = scope["path"]
        gateway = self._state.get("gateway")
        cluster, prefix = None, ""
        if gateway is not None:
            cluster = gateway.default
            if path.startswith("/clusters/") and len(path) > 10:
                name, slash, rest = path[10:].partition("/")
                prefix, path = "/clusters/" + name, slash + rest or "/"
                scope["path"] = path
                cluster = gateway.clusters.get(name)  # None: answered in _dispatch
        if path[-1:] == "/" and len(path) > 1:
            path = scope["path"] = without_trailing_slashes(path)
        route = self._routes.get(path)
        if route is None:
            route = route_label(path)
            if len(path) <= 512:  # hostile variety must not grow memory: kept few and short
                if len(self._routes) >= 4096:
                    self._routes.clear()
                self._routes[path] = route
        if gateway is None:  # before the lifespan made the gateway: nothing to time with
            scope["kcg"] = RequestContext(route)
            await self._entry(scope, receive, send)
            return
        # the request's cluster, resolved once, here: everything after reads it from the context
        context = scope["kcg"] = RequestContext(route, cluster, prefix, gateway)
        started = time.perf_counter()
        observe = gateway.metrics.latency.observe
        access_log = self.access_log
        worker_header = self._worker_header

        def timed_send(message: dict) -> Awaitable[None]:
            # the server's own send, returned to be awaited: a coroutine of this one's
            # around it on every message was a measurable part of one object's answer
            if message["type"] == "http.response.start":
                context.answered = True
                took = time.perf_counter() - started
                observe(route, message["status"], took)
                if access_log is not None:
                    access_log.write(scope, message["status"], took)
                if worker_header is not None:
                    message["headers"] = [*message.get("headers", ()), worker_header]
            return send(message)

        await self._entry(scope, receive, timed_send)

    async def _dispatch(self, scope: dict, receive: Any, send: Any) -> None:
        if self._local_only:
            host = _host_header(scope)
            allowed = self._hosts.get(host)
            if allowed is None:
                allowed = host == b"" or is_loopback(_host_name(host))
                if len(host) <= 300:  # no host name is longer: a longer one is not kept
                    self._hosts[host] = allowed
                    if len(self._hosts) > 1024:  # hostile variety must not grow memory
                        self._hosts.clear()
            if not allowed:
                await _send_json(send, 403, status_bytes(
                    403, f"the Host {host.decode('latin-1')[:200]!r} is not a loopback name: this "
                         f"gateway does not authorize its callers, so it answers only requests "
                         f"addressed to 127.0.0.1, [::1] or localhost (DNS rebinding protection)",
                    "Forbidden"))
                return
        context = scope["kcg"]
        route = context.route
        cluster = context.cluster
        gateway = context.gateway
        started = gateway is not None  # else 503, below
        try:
            own = route in _GATEWAY_WIDE
            if self._authenticates and route not in _OPEN and started:
                if own and not context.prefix:
                    await gateway.authorize_own(scope, route)
                elif cluster is None or own:  # who asks, and no more: a 404 or 503 follows
                    await gateway.authenticate(scope)
                elif route in ("resource", "history"):
                    authorization = cluster.authorization
                    if authorization.identify(scope) is None:  # no kept review
                        await authorization.authenticate(scope)
                else:
                    await cluster.authorization.authorize_path(scope, scope["path"])
            if own and context.prefix:
                raise not_found(f"{route} is the gateway's own and exists only at the top, not "
                                f"under {context.prefix}/", resource="clusters",
                                name=context.prefix[10:])
            merged = context.prefix == _MERGED
            if merged and route not in ("resource", "history"):
                raise not_found("only collection paths are merged under /clusters/*/ (discovery "
                                "and /version are each cluster's: /clusters/NAME/...)",
                                resource="clusters", name="*")
            if cluster is None and started and not merged and not own:
                # an unknown cluster (404), one that cannot be connected or a default
                # cluster not connected yet (503)
                named = context.prefix[10:]
                if context.prefix and not named:
                    raise not_found("a cluster name is missing from the path", resource="clusters")
                gateway.cluster(named or gateway.default_name)
                raise StatusError(503, "the cluster is being added; retry", "ServiceUnavailable",
                                  headers={"Retry-After": "1"})  # it came meanwhile
        except StatusError as error:
            await status_response(error)(scope, receive, send)
            return
        if route not in ("resource", "history"):
            await self.api(scope, receive, send)
            return
        # a resource's answer, here rather than in a call of its own: the cheapest answer
        # (one object by name) is a few dozen Python calls, each a measurable part of it
        if not started:  # a request before start-up
            await _send_json(send, 503, _NOT_READY)
            return
        scope["app"] = self.api  # what ``request.app`` reads
        try:
            try:
                if route == "history":
                    response = await (merged_history_answer(scope, receive)
                                      if context.prefix == _MERGED else
                                      history_answer(scope, receive))
                else:
                    response = await (merged_endpoint(Request(scope, receive))
                                      if context.prefix == _MERGED else
                                      resource_answer(scope, receive))
            except StatusError as error:
                response = status_response(error)
            await response(scope, receive, send)
        except Exception:
            log.exception("unexpected error answering %s %s", scope.get("method"), scope.get("path"))
            if not context.answered:  # (``timed_send`` notes the answer's start)
                await _send_json(send, 500, _INTERNAL)


def _host_header(scope: dict) -> bytes:
    for name, value in scope["headers"]:
        if name == b"host":
            return value
    return b""  # HTTP/1.0 without Host: not a browser, so not a rebinding


def _host_name(header: bytes) -> str:
    """The host of a Host header, without its port (``[::1]:8080`` -> ``::1``)."""
    text = header.decode("latin-1").strip()
    if text.startswith("["):
        return text[1:text.find("]")] if "]" in text else text
    name, colon, port = text.rpartition(":")
    return name if colon and port.isdigit() else text


def route_label(path: str) -> str:
    """The ``route`` label of the latency histogram: a few fixed values, never the path itself."""
    if path.startswith(_HISTORY):
        return "history"
    if is_resource_path(path):
        return "resource"
    if path in ("/healthz", "/readyz", "/livez", "/metrics", "/version", "/api", "/apis",
                "/clusters"):
        return path
    if path.startswith(("/api/", "/apis/")):
        return "discovery"
    if path.startswith("/openapi/"):
        return "openapi"
    return "other"


async def _send_json(send: Any, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
