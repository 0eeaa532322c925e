"""May this user do this? ``SubjectAccessReview``s in the cluster that holds the data, kept.

``--authz kubernetes`` asks the API server about every access, as an aggregated
API server or kube-rbac-proxy does: a ``SubjectAccessReview`` with the attributes
the API server itself would use, so the cluster's RBAC (or whatever authorizer it
runs) answers exactly as it would for a direct request, and a denial is worded as
the API server words it.

Answers are kept in a ``DecisionCache`` with kube-apiserver's own webhook
defaults: allowed accesses 5 minutes, denied ones 30 seconds. A kept answer costs a
dictionary lookup (``cached_check``, no coroutine); a miss costs a round trip on a
worker thread, shared with every concurrent identical question. One
``AccessReviews`` per cluster: a decision of one cluster says nothing of another,
and each cluster may know the caller by prefixed names (``userPrefix``,
``groupPrefix`` of the clusters file), as an API server configured with OIDC
prefixes would.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from app.auth.decisions import DecisionCache
from app.auth.identity import Impersonation, UserInfo
from app.auth.reviews import ReviewError, Reviewer
from app.bridge import run_blocking
from app.kube.status import StatusError, forbidden

__all__ = ["AccessReviews", "Attributes", "forbidden_message"]

_SA_PREFIX = "system:serviceaccount:"
_AUTHN_GROUP = "authentication.k8s.io"


class Attributes(NamedTuple):
    """What a ``SubjectAccessReview`` asks about: a resource access or a non-resource path."""

    verb: str
    resource: str = ""
    group: str = ""
    version: str = ""
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    path: str = ""  # set for a non-resource request (``/metrics``, ``/apis``)

    def review_spec(self) -> dict:
        if self.path:
            return {"nonResourceAttributes": {"path": self.path, "verb": self.verb}}
        attrs = {"verb": self.verb, "group": self.group, "version": self.version,
                 "resource": self.resource}
        for key in ("namespace", "name", "subresource"):
            value = getattr(self, key)
            if value:
                attrs[key] = value
        return {"resourceAttributes": attrs}


def forbidden_message(user: str, attrs: Attributes, reason: str = "") -> str:
    """The API server's wording of a denied access (``pods is forbidden: User "alice" ...``)."""
    if attrs.path:
        text = f'forbidden: User "{user}" cannot {attrs.verb} path "{attrs.path}"'
    else:
        resource = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
        where = (f' in the namespace "{attrs.namespace}"' if attrs.namespace
                 else " at the cluster scope")
        what = attrs.resource + (f".{attrs.group}" if attrs.group else "")
        subject = f'{what} "{attrs.name}"' if attrs.name else what
        text = (f'{subject} is forbidden: User "{user}" cannot {attrs.verb} resource '
                f'"{resource}" in API group "{attrs.group}"{where}')
    return f"{text}: {reason}" if reason else text


def _denied(user: str, attrs: Attributes, reason: str) -> StatusError:
    message = forbidden_message(user, attrs, reason)
    if attrs.path:
        return StatusError(403, message, "Forbidden")
    return forbidden(message, resource=attrs.resource, name=attrs.name, group=attrs.group)


class AccessReviews:
    """``SubjectAccessReview``s of one cluster, cached and single-flighted."""

    def __init__(self, reviewer: Reviewer, allow_ttl: float = 300.0, deny_ttl: float = 30.0,
                 max_entries: int = 10_000, clock: Callable[[], float] = time.monotonic,
                 user_prefix: str = "", group_prefix: str = "") -> None:
        self.reviewer = reviewer
        # the cluster's names for the caller: prepended to the user and groups in its reviews
        self.user_prefix = user_prefix
        self.group_prefix = group_prefix
        self.allow_ttl = allow_ttl
        self.deny_ttl = deny_ttl
        self.accesses: DecisionCache[tuple[bool, str]] = DecisionCache(max_entries, clock)
        self.failures = 0  # reviews the API server could not answer (kcg_reviews_failed_total)

    def cached_check(self, user: UserInfo, attrs: Attributes) -> float | None:
        """``check`` from the cache alone: until when allowed, ``None`` on a miss.

        Raises:
            StatusError: 403 for a kept denial.
        """
        found = self.accesses.peek((user, attrs))
        if found is None:
            return None
        self.accesses.hits += 1
        allowed, reason = found[1]
        if not allowed:
            raise _denied(self.user_prefix + user.name, attrs, reason)
        return found[0]

    async def check(self, user: UserInfo, attrs: Attributes) -> float:
        """Allow ``attrs`` for ``user`` (returning until when) or raise a 403 as the API server.

        Raises:
            StatusError: 403 when denied; 503 when the API server cannot be asked.
        """
        expires, (allowed, reason), _ = await self.accesses.get(
            (user, attrs), lambda: self._review_access(user, attrs))
        if not allowed:
            raise _denied(self.user_prefix + user.name, attrs, reason)
        return expires

    async def impersonation(self, caller: UserInfo, imp: Impersonation) -> float:
        """Allow ``caller`` to act as what ``imp`` asks in this cluster (until when), or 403.

        As the API server: ``impersonate`` on each part of the identity asked for —
        ``users`` (or ``serviceaccounts``), each of ``groups``, ``uids``, each
        ``userextras/KEY`` value — one review each, cached like any other. The names are
        this cluster's, prefixed as the impersonated identity will be in its reviews: a
        cluster that knows callers by ``c:`` names is asked about ``c:system:masters``,
        never about the bare group another cluster means by it.

        Raises:
            StatusError: 403 naming the first part refused; 503 when it cannot be asked.
        """
        asks: list[Attributes] = []
        if imp.user.startswith(_SA_PREFIX) and not self.user_prefix:
            namespace, _, name = imp.user[len(_SA_PREFIX):].partition(":")
            asks.append(Attributes("impersonate", "serviceaccounts", namespace=namespace,
                                   name=name))
        else:
            asks.append(Attributes("impersonate", "users", name=self.user_prefix + imp.user))
        asks.extend(Attributes("impersonate", "groups", name=self.group_prefix + g)
                    for g in imp.groups)
        for key, values in imp.extra:
            asks.extend(Attributes("impersonate", "userextras", _AUTHN_GROUP, name=v,
                                   subresource=key) for v in values)
        if imp.uid:
            asks.append(Attributes("impersonate", "uids", _AUTHN_GROUP, name=imp.uid))
        until = math.inf
        for attrs in asks:
            until = min(until, await self.check(caller, attrs))
        return until

    async def allowed(self, user: UserInfo, attrs: Attributes) -> bool:
        """Whether ``attrs`` is allowed for ``user`` (the same cached review as ``check``)."""
        _, (allowed, _), _ = await self.accesses.get(
            (user, attrs), lambda: self._review_access(user, attrs))
        return allowed

    async def _review_access(self, user: UserInfo, attrs: Attributes) -> tuple[tuple[bool, str], float]:
        spec: dict[str, Any] = {**attrs.review_spec(),
                                **user.review_spec(self.user_prefix, self.group_prefix)}
        try:
            status = await run_blocking(self.reviewer.review_access, spec)
        except ReviewError:
            self.failures += 1
            raise
        allowed = bool(status.get("allowed")) and not status.get("denied")
        reason = str(status.get("reason") or "") if not allowed else ""
        return (allowed, reason), self.allow_ttl if allowed else self.deny_ttl
