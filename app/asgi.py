"""The ASGI entry point: resource paths go straight to the hot path, the rest to FastAPI.

FastAPI's stack — error, telemetry and body-limit middleware, exception
middleware, an async exit stack per request, route matching over every route —
cost as much per request as answering a small list from the cache: with it, a
single Pod by name served at 0.8× the API server's rate (8 connections); the
hot path alone needs none of it. So ``GatewayApp`` looks at the path once: a
resource path (``/api/<v>/<resource>...``, ``/apis/<g>/<v>/<resource>...``,
``/<group>/<version>/<resource>...``) is answered by
``app.routers.resources``; operations, discovery and everything else go
through FastAPI, which keeps its own catch-all for any path left over.

The hot path keeps what the FastAPI side gets from middleware: latency metrics,
CORS when configured, and a ``Status`` 500 (logged) instead of a bare error
page for anything unexpected.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson
from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request

from app.routers.resources import resource_endpoint

__all__ = ["GatewayApp", "cors_options", "is_resource_path"]

log = logging.getLogger(__name__)

_INTERNAL = orjson.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                          "message": "internal error", "reason": "InternalError", "code": 500})
_NOT_READY = orjson.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": "the gateway is starting", "reason": "ServiceUnavailable",
                           "code": 503})


def is_resource_path(path: str) -> bool:
    """Whether ``path`` names a resource collection or object (not discovery or operations)."""
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
    """The whole gateway as one ASGI callable; ``state`` is the FastAPI app's."""

    def __init__(self, api: FastAPI, cors_origins: tuple[str, ...] = ()) -> None:
        self.api = api
        self.state = api.state
        hot: Any = self._resource
        if cors_origins:
            hot = CORSMiddleware(hot, **cors_options(cors_origins))
        self._hot = hot
        self._children: dict[tuple[int, int], Any] = {}

    def _latency(self, gateway: Any, status: int) -> Any:
        """The latency histogram's child for ``status`` (labelling costs more than observing)."""
        key = (id(gateway.metrics), status)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = gateway.metrics.latency.labels("resource", str(status))
        return child

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and is_resource_path(scope["path"]):
            scope["app"] = self.api  # what ``request.app`` reads
            await self._hot(scope, receive, send)
        else:
            await self.api(scope, receive, send)

    async def _resource(self, scope: dict, receive: Any, send: Any) -> None:
        gateway = getattr(self.state, "gateway", None)
        if gateway is None:  # a request before the lifespan started the gateway
            await _send_json(send, 503, _NOT_READY)
            return
        started = time.perf_counter()
        answered = False

        async def timed_send(message: dict) -> None:
            nonlocal answered
            if message["type"] == "http.response.start":
                answered = True
                self._latency(gateway, message["status"]).observe(time.perf_counter() - started)
            await send(message)

        try:
            response = await resource_endpoint(Request(scope, receive))
            await response(scope, receive, timed_send)
        except Exception:
            log.exception("unexpected error answering %s %s", scope.get("method"), scope.get("path"))
            if not answered:
                await _send_json(timed_send, 500, _INTERNAL)


async def _send_json(send: Any, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
