"""Kubernetes ``Status`` errors: one exception type, one way to answer with it.

Every error the gateway gives is a ``Status`` object with the HTTP code it is
sent with, as the API server's: ``{"kind": "Status", "apiVersion": "v1",
"metadata": {}, "status": "Failure", "message", "reason", "details", "code"}``.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

__all__ = [
    "StatusError",
    "bad_request",
    "forbidden",
    "method_not_allowed",
    "not_acceptable",
    "not_found",
    "status_body",
    "status_bytes",
    "status_response",
]

_REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
    406: "NotAcceptable", 410: "Expired", 413: "RequestEntityTooLarge", 414: "RequestURITooLong",
    429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
}


class StatusError(Exception):
    """An error that becomes a ``Status`` answer."""

    def __init__(self, code: int, message: str, reason: str | None = None,
                 details: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.details = details
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return status_body(self.code, self.message, self.reason, self.details)


def status_body(code: int, message: str, reason: str | None = None,
                details: dict[str, Any] | None = None) -> dict[str, Any]:
    """Return a ``Status`` object as a dict."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure", "message": message,
                            "reason": reason or _REASONS.get(code, "Unknown")}
    if details:
        body["details"] = details
    body["code"] = code
    return body


def status_bytes(code: int, message: str, reason: str | None = None) -> bytes:
    """Return a ``Status`` object as JSON bytes (for answers written below Starlette)."""
    return orjson.dumps(status_body(code, message, reason))


def status_response(error: StatusError) -> Response:
    """Answer with ``error`` as a ``Status`` (its code as the HTTP status).

    The one way every error is answered: routes raise ``StatusError`` and the
    application's handler (FastAPI's, or ``GatewayApp`` for the hot path) calls this.
    """
    return Response(orjson.dumps(error.body()), status_code=error.code,
                    media_type="application/json", headers=error.headers)


def _details(resource: str = "", name: str = "", group: str = "") -> dict[str, Any] | None:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if resource:
        details["kind"] = resource
    return details or None


def not_found(message: str, resource: str = "", name: str = "", group: str = "") -> StatusError:
    return StatusError(404, message, "NotFound", _details(resource, name, group))


def forbidden(message: str, resource: str = "", name: str = "", group: str = "") -> StatusError:
    return StatusError(403, message, "Forbidden", _details(resource, name, group))


def bad_request(message: str) -> StatusError:
    return StatusError(400, message, "BadRequest")


def method_not_allowed(method: str) -> StatusError:
    return StatusError(405, f"the gateway is read-only: method {method} is not allowed; "
                            "use GET", "MethodNotAllowed",
                       headers={"Allow": "GET, HEAD, OPTIONS"})


def not_acceptable(accept: str) -> StatusError:
    return StatusError(406, f"only the following media types are accepted: application/json, "
                            f"application/json;as=Table;v=v1;g=meta.k8s.io, text/event-stream "
                            f"(got Accept: {accept})", "NotAcceptable")
