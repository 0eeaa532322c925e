"""One JSON line per request: who read what, and what they were told (``--access-log``).

Operators audit a gateway the way they audit the API server: for each
request, the user it was served to (after impersonation, with the
impersonator), the access it asked for, the decision and the answer's status.
The line is written when the answer starts (a stream's line comes when it
opens), from what authorization left in the request's context (``app.kube.context``).

Lines go to standard output through the ``kube-cache-gateway.access`` logger,
unformatted (each line is the JSON object), separate from the diagnostic log
on standard error.
"""

from __future__ import annotations

import logging
import sys
from datetime import datetime, timezone
from typing import Any

import orjson

from app.kube.context import context_of

__all__ = ["AccessLog"]

LOGGER = "kube-cache-gateway.access"


def _logger() -> logging.Logger:
    logger = logging.getLogger(LOGGER)
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


class AccessLog:
    """Writes the access line of each request."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._logger = logger or _logger()

    def record(self, scope: dict, status: int, seconds: float) -> dict[str, Any]:
        """The line's fields for a request answered with ``status`` after ``seconds``."""
        line: dict[str, Any] = {
            "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
            "method": scope.get("method", ""), "path": scope.get("path", ""),
        }
        query = scope.get("query_string", b"")
        if query:
            line["query"] = query.decode("latin-1")
        client = scope.get("client")
        if client:
            line["client"] = client[0]
        context = context_of(scope)
        identity = context.identity
        if identity is not None:
            line["user"] = identity.user.name
            line["groups"] = list(identity.user.groups)
            if identity.impersonator is not None:
                line["impersonatedBy"] = identity.impersonator.name
        access = context.access
        if access is not None:
            res = access.resource
            line.update(verb=access.verb, resource=res.resource, group=res.group,
                        version=res.version)
            if access.namespace:
                line["namespace"] = access.namespace
            if access.name:
                line["name"] = access.name
        denied = context.denied
        if denied is not None:
            code = getattr(denied, "code", 500)
            line["decision"] = {401: "unauthenticated", 403: "forbidden"}.get(code, "error")
            line["reason"] = getattr(denied, "message", str(denied))
        elif identity is not None or access is not None:
            line["decision"] = "allowed"
        line["status"] = status
        line["latencyMs"] = round(seconds * 1000, 3)
        return line

    def write(self, scope: dict, status: int, seconds: float) -> None:
        self._logger.info(orjson.dumps(self.record(scope, status, seconds)).decode())

