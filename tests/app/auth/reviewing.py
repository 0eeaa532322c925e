"""What the authentication and access-review tests share: a stepped clock, the two built alike."""

from __future__ import annotations

import asyncio
import base64
import json

from app.auth.access_review import AccessReviews
from app.auth.authentication import TokenReviewAuthenticator
from app.auth.rbac import RBAC

ALICE = {"username": "alice", "uid": "a-1", "groups": ["dev", "system:authenticated"]}


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def reviews(reviewer, clock=None, allow_ttl: float = 300.0, deny_ttl: float = 30.0) -> AccessReviews:
    return AccessReviews(reviewer, allow_ttl, deny_ttl, clock=clock or Clock())


def authenticator(reviewer, clock=None, wall=None, allow_ttl: float = 300.0, deny_ttl: float = 30.0,
                  **kw) -> TokenReviewAuthenticator:
    clock = clock or Clock()
    return TokenReviewAuthenticator(reviewer, deny_ttl=deny_ttl, clock=clock,
                                    wall_clock=wall or (lambda: 1.7e9), **kw)


def rbac_reading_pods(*subjects: tuple[str, str]) -> RBAC:
    """RBAC that decides, in which ``subjects`` may read pods in the namespace ``a``."""
    rbac = RBAC()
    rbac.set_cluster_role({"metadata": {"name": "read-pods"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "get", "watch"]}]})
    rbac.set_binding("RoleBinding", {
        "metadata": {"name": "readers", "namespace": "a"},
        "subjects": [{"kind": kind, "name": name} for kind, name in subjects],
        "roleRef": {"kind": "ClusterRole", "name": "read-pods"}})
    rbac.decide(True)
    return rbac


def run(coro):
    return asyncio.run(coro)


def jwt(claims: dict) -> str:
    def b64(doc):
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=").decode()
    return f"{b64({'alg': 'RS256'})}.{b64(claims)}.c2ln"
