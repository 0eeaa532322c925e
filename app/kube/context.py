"""What the gateway learns about one request as it answers it, in one typed place.

The entry (``app.http.asgi``) makes a ``RequestContext`` for every HTTP request
and keeps it in the ASGI scope under one key, ``kcg``; the same scope reaches
the hot path and the FastAPI routes, so every part of the answer reads the same
object: the route label, the gateway and the cluster, set at the entry once; the caller's
credentials and identity, set by authentication; the access asked for and the
refusal, if any, set by authorization; the access log reads them all when the
answer starts. A field is ``None`` until someone has set it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RequestContext", "context_of"]

_KEY = "kcg"


class RequestContext:
    """One request's notes; see the module docstring. Lives as long as its scope."""

    __slots__ = ("route", "cluster", "prefix", "gateway", "credentials", "identity", "access",
                 "denied", "answered")

    def __init__(self, route: str = "other", cluster: Any = None, prefix: str = "",
                 gateway: Any = None) -> None:
        self.route = route
        self.gateway = gateway  # app.gateway.Gateway answering, None before start-up
        self.cluster = cluster  # app.clusters.cluster.Cluster: whose data the request reads
        self.prefix = prefix  # "/clusters/NAME" when the request named its cluster, else ""
        self.credentials: Any = None  # app.auth.identity.Credentials, read once
        self.identity: Any = None  # app.auth.authentication.Identity, once authenticated
        self.access: Any = None  # app.auth.authorization.Access asked for
        self.denied: BaseException | None = None  # why it was refused (401, 403, 503)
        self.answered = False  # the answer has started (its head sent): no other can follow


def context_of(scope: dict) -> RequestContext:
    """The request's context, made (empty) if the entry did not make one (a direct call)."""
    context = scope.get(_KEY)
    if context is None:
        context = scope[_KEY] = RequestContext()
    return context
