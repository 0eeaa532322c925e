"""May this user do this? ``SubjectAccessReview``s in the cluster that holds the data, kept.

``--authz kubernetes`` asks the API server about every access, as an aggregated
API server or kube-rbac-proxy does: a ``SubjectAccessReview`` with the attributes
the API server itself would use, so the cluster's RBAC (or whatever authorizer it
runs) answers exactly as it would for a direct request, and a denial is worded as
the API server words it.

Where the cluster's RBAC is held here and may decide (``rbac``: followed by the
cluster's own informers, ``app.clusters.local_rbac``), it is read first, as the API
server reads it: an allow found there is the answer, with no review, and holds until
RBAC changes (``epoch``). Only what RBAC does not allow is asked — another authorizer
of the cluster (Node, a webhook) may allow it — and that answer is kept for the deny TTL
at most, an allow only until RBAC changes too: it may have been the API server's RBAC
allowing what this copy had not yet seen, which a later change here may take back. An
allow the API server's RBAC gave (its reason ``RBAC: allowed by ...``) while the RBAC held
here did not is a disagreement of two copies of the same objects a moment apart: the copy
here may be behind (a binding just made, whose event is on its way), or the API server's
(a binding just deleted: its authorizer follows RBAC through a watch of its own, and a
review asked the instant the deletion arrived here may still be allowed there). Kept for
the deny TTL, that allow let an open stream of a revoked caller run for half a minute,
with no change of RBAC to come and end it. So it is asked again ``CATCH_UP`` later, and an
allow still given is kept ``DISAGREEMENT_TTL`` only (``kcg_rbac_disagreements_total``
counts them: one that keeps growing is a question this copy decides differently). A
denial is not dropped on a change: RBAC is read before any kept answer, so an allow that
RBAC gains is seen at once, and a partition made of many denials is not asked again
after every change of RBAC.

Elsewhere (no RBAC held, not yet synced, fallen behind) answers are kept in a
``DecisionCache`` with kube-apiserver's own webhook defaults: allowed accesses 5
minutes, denied ones 30 seconds. A kept answer costs a dictionary lookup
(``cached_check``, no coroutine); a miss costs a round trip on a worker thread,
shared with every concurrent identical question. One
``AccessReviews`` per cluster: a decision of one cluster says nothing of another,
and each cluster may know the caller by prefixed names (``userPrefix``,
``groupPrefix`` of the clusters file), as an API server configured with OIDC
prefixes would.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any

from app.auth.decisions import DecisionCache
from app.auth.identity import Impersonation, UserInfo
from app.auth.rbac import RBAC
from app.auth.reviews import ReviewError, Reviewer
from app.bridge import run_blocking
from app.kube.access import Attributes
from app.kube.status import StatusError, forbidden

__all__ = ["AccessReviews", "Attributes", "forbidden_message"]

_SA_PREFIX = "system:serviceaccount:"
_AUTHN_GROUP = "authentication.k8s.io"
_RBAC_REASON = "RBAC:"  # how the API server's RBAC authorizer begins the reason of its allow
CATCH_UP = 0.1  # seconds before an allow of the cluster's RBAC that RBAC here lacks is asked again
DISAGREEMENT_TTL = 1.0  # seconds such an allow, given again, is kept


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
    """One cluster's answers: its RBAC read here where held, else its reviews, cached and
    single-flighted (see the module)."""

    def __init__(self, reviewer: Reviewer, allow_ttl: float = 300.0, deny_ttl: float = 30.0,
                 max_entries: int = 10_000, clock: Callable[[], float] = time.monotonic,
                 user_prefix: str = "", group_prefix: str = "",
                 rbac: RBAC | None = None) -> None:
        self.reviewer = reviewer
        # the cluster's names for the caller: prepended to the user and groups in its reviews
        self.user_prefix = user_prefix
        self.group_prefix = group_prefix
        self.allow_ttl = allow_ttl
        self.deny_ttl = deny_ttl
        self.rbac = rbac  # the cluster's RBAC, when followed here (it decides once synced)
        # (allowed, reason, epoch asked in) by (user, attributes): see ``_kept``
        self.accesses: DecisionCache[tuple[bool, str, int]] = DecisionCache(max_entries, clock)
        self.failures = 0  # reviews the API server could not answer (kcg_reviews_failed_total)
        self.sent = 0  # reviews sent (kcg_access_reviews_total)
        self.local_allows = 0  # accesses RBAC allowed here, with no review
        self.disagreements = 0  # allows of the cluster's RBAC that RBAC here did not give

    @property
    def epoch(self) -> int:
        """What decisions rest on: RBAC's generation while it decides here (any change of
        it, or its stopping to decide, is a new epoch); 0 while reviews alone decide."""
        rbac = self.rbac
        return rbac.generation if rbac is not None and rbac.deciding else 0

    def _kept(self, user: UserInfo, attrs: Attributes) -> tuple[float, tuple[bool, str, int]] | None:
        """The kept answer for ``user`` and ``attrs`` that still holds: an allow asked in
        another epoch of RBAC is dropped (see the module)."""
        key = (user, attrs)
        found = self.accesses.peek(key)
        if found is not None and found[1][0] and found[1][2] != self.epoch:
            self.accesses.drop(key)
            return None
        return found

    def rbac_allows(self, user: UserInfo, attrs: Attributes) -> bool:
        """Whether the cluster's RBAC, held here and deciding, allows ``attrs`` (no review)."""
        rbac = self.rbac
        if rbac is None or not rbac.deciding:
            return False
        name, groups = user.names_in(self.user_prefix, self.group_prefix)
        return rbac.allows(name, groups, attrs) is not None

    def would_ask(self, user: UserInfo, attrs: Attributes) -> bool:
        """Whether deciding ``attrs`` for ``user`` now would send a review (what the budget
        of reviews counts): RBAC here does not allow it, and no answer is kept or coming."""
        if self.rbac_allows(user, attrs):
            return False
        return self._kept(user, attrs) is None and not self.accesses.computing((user, attrs))

    def cached_check(self, user: UserInfo, attrs: Attributes) -> float | None:
        """``check`` without a review: until when allowed (``inf``: until RBAC changes),
        ``None`` when a review is due.

        Raises:
            StatusError: 403 for a kept denial.
        """
        if self.rbac_allows(user, attrs):
            self.local_allows += 1
            return math.inf
        found = self._kept(user, attrs)
        if found is None:
            return None
        self.accesses.hits += 1
        allowed, reason, _ = found[1]
        if not allowed:
            raise _denied(self.user_prefix + user.name, attrs, reason)
        return found[0]

    async def check(self, user: UserInfo, attrs: Attributes) -> float:
        """Allow ``attrs`` for ``user`` (returning until when) or raise a 403 as the API server.

        Raises:
            StatusError: 403 when denied; 503 when the API server cannot be asked.
        """
        allowed, reason, expires = await self._answer(user, attrs)
        if not allowed:
            raise _denied(self.user_prefix + user.name, attrs, reason)
        return expires

    async def allowed(self, user: UserInfo, attrs: Attributes) -> tuple[bool, float]:
        """Whether ``attrs`` is allowed for ``user``, and until when that answer holds (the
        same as ``check``'s: a value built from several answers lives no longer than the
        first of them to expire)."""
        allowed, _, expires = await self._answer(user, attrs)
        return allowed, expires

    async def _answer(self, user: UserInfo, attrs: Attributes) -> tuple[bool, str, float]:
        if self.rbac_allows(user, attrs):
            self.local_allows += 1
            return True, "", math.inf
        epoch = self.epoch
        self._kept(user, attrs)  # an allow of another epoch is not to be read
        expires, (allowed, reason, _), _ = await self.accesses.get(
            (user, attrs), lambda: self._review_access(user, attrs, epoch))
        return allowed, reason, expires

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

    async def _review_access(self, user: UserInfo, attrs: Attributes,
                             epoch: int) -> tuple[tuple[bool, str, int], float]:
        spec: dict[str, Any] = {**attrs.review_spec(),
                                **user.review_spec(self.user_prefix, self.group_prefix)}
        status = await self._ask(spec)
        disagreeing = bool(epoch) and _rbacs_allow(status) and not self.rbac_allows(user, attrs)
        if disagreeing:
            # the two copies of RBAC a moment apart (see the module): asked again once the
            # API server's may have caught up (unless this copy caught up meanwhile)
            self.disagreements += 1
            await asyncio.sleep(CATCH_UP)
            if not self.rbac_allows(user, attrs):
                status = await self._ask(spec)
        allowed = _allowed(status)
        reason = str(status.get("reason") or "") if not allowed else ""
        if not epoch:  # reviews alone decide: the API server's webhook defaults
            ttl = self.allow_ttl if allowed else self.deny_ttl
        elif disagreeing and _rbacs_allow(status):  # its RBAC's allow, given again: a moment
            ttl = min(DISAGREEMENT_TTL, self.deny_ttl)
        else:  # asked beside RBAC: the deny TTL at most (an allow: until RBAC changes too)
            ttl = min(self.deny_ttl, self.allow_ttl)
        return (allowed, reason, epoch), ttl

    async def _ask(self, spec: dict[str, Any]) -> dict:
        """The cluster's answer (a ``SubjectAccessReview``'s status), counted."""
        self.sent += 1
        try:
            return await run_blocking(self.reviewer.review_access, spec)
        except ReviewError:
            self.failures += 1
            raise


def _allowed(status: dict) -> bool:
    """Whether a review's status allows: ``allowed``, and not ``denied`` by an authorizer."""
    return bool(status.get("allowed")) and not status.get("denied")


def _rbacs_allow(status: dict) -> bool:
    """Whether a review's status is an allow of the API server's RBAC authorizer."""
    return _allowed(status) and str(status.get("reason") or "").startswith(_RBAC_REASON)
