"""The one authorization point every request and every stream passes.

``Authorization`` decides, in this order, for every request — one path, each step with
the one cache that earns its place:

1. **who is asking** (``identify``, then ``authenticate``): nobody in particular with
   ``--authz none``; with ``--authz kubernetes`` whom the ``Authenticator``
   (``app.auth.authentication``) says the credentials stand for — a client certificate
   checked against the client CAs on every request, a ServiceAccount token verified here
   with the identity cluster's keys (``app.auth.service_account_tokens``), any other token
   by a ``TokenReview`` — maybe impersonating someone; 401 before anything else, as the
   API server answers. Kept: the identity by the token's salted digest (a verification
   costs a signature check, a review a round trip; a kept one, one lookup), until the
   token's review would expire or what it rests on is revoked;
2. for a resource path, the ``ResourcePolicy`` (allow and deny lists;
   ``secrets`` denied by default), then the caller's own rights for the
   ``Access`` (``authorize``: the cluster's RBAC, read here, then — where it allows
   nothing — that cluster's ``SubjectAccessReview``s, ``app.auth.access_review``), before
   any informer is touched, so a denied resource never gets one; for any other path but
   the open probes, ``get`` on the path (``authorize_path``: discovery, ``/version``,
   ``/metrics``). Kept: the ``Grant`` of a get or list by identity and access on the same
   epoch of RBAC (``granted``: 2.5 µs in process, identity included, against 6.6 µs for
   RBAC's evaluation among 2,000 bindings and a new grant — on the cheapest answer, one
   object by name, about 10 µs in all, that is most of authorization's cost), and the
   reviews' answers (``AccessReviews``: a round trip each);
3. for a stream, again whenever the decision it was opened with expires, the cluster's
   RBAC changes or the identity is revoked: from the caches where they can say
   (``regranted``), else in full (``reauthorize``).

With ``--namespace-partitioned-lists``, a cluster-wide list or watch that the
caller may not make is not refused at once: the caller's partition — the
namespaces in which they may make it, each decided as its own access — is
served instead (403 if there is none). The partition is kept per user and
access while the set of namespaces and the RBAC are the same, and no longer than
the first answer it was built from; a stream whose partition changes ends with
410, so its client lists again and gets the new one.

Every allowed access is a ``Grant`` that says until when it holds, and on which
epoch of the cluster's RBAC (``AccessReviews.epoch``) it rests. What was
decided is left in the request's context (``app.kube.context``) for the access log.

Discovery is not authorization: discovery documents list denied resources too,
as the API server lists resources a caller cannot read.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from app.auth.access_review import AccessReviews, Attributes
from app.auth.authentication import Authenticator, Identity
from app.auth.decisions import DecisionCache
from app.auth.identity import PEER_USER, Credentials, credentials_from_scope
from app.auth.policy import ResourcePolicy
from app.auth.review_budget import AccessBudget
from app.auth.reviews import ReviewError
from app.kube.access import Access
from app.kube.context import context_of
from app.kube.status import StatusError

__all__ = ["Access", "Authorization", "Grant", "attributes", "credentials_of"]


class Grant(NamedTuple):
    """An allowed access: what, by whom, and until when the decision holds."""

    access: Access
    identity: Identity | None = None  # None: callers are not authenticated (--authz none)
    credentials: Credentials | None = None
    expires: float = math.inf  # monotonic; a stream re-checks at this time
    namespaces: frozenset[str] | None = None  # a partition: only these namespaces' objects
    epoch: int = 0  # the cluster's RBAC it rests on (``AccessReviews.epoch``): another, re-check


def attributes(access: Access) -> Attributes:
    """The ``SubjectAccessReview`` attributes the API server would build for ``access``."""
    res = access.resource
    return Attributes(access.verb, res.resource, res.group, res.version,
                      access.namespace or "", access.name or "")


def credentials_of(scope: dict) -> Credentials:
    """The request's credentials, read from its headers once and kept in its context.

    Read when needed, not on every request: a caller known by ``Authenticator.known``
    needs none (a stream's grant does, to be checked again).
    """
    context = context_of(scope)
    credentials = context.credentials
    if credentials is None:
        credentials = context.credentials = credentials_from_scope(scope)
    return credentials


# (version, names) of the cluster's namespaces, from the gateway's own cache.
NamespaceSource = Callable[[], Awaitable[tuple[int, list[str]]]]
_PARTITION_REVIEWS = 16  # concurrent reviews while a partition is computed


class Authorization:
    """The policy, then (with ``--authz kubernetes``) the caller's rights. The single point.

    One per cluster: the authenticator is the gateway's (identity is established
    once, in the identity cluster), the access reviews are the cluster's own.
    """

    def __init__(self, policy: ResourcePolicy, authenticator: Authenticator | None = None,
                 access: AccessReviews | None = None,
                 namespaces: NamespaceSource | None = None,
                 budget: AccessBudget | None = None) -> None:
        if (authenticator is None) != (access is None):
            raise ValueError("an authenticator and access reviews go together")
        self.policy = policy
        self.authenticator = authenticator
        self.access = access
        self._namespaces = namespaces  # set: cluster-wide lists are partitioned
        size, clock = (access.accesses.max_entries, access.accesses.clock) if access else (1, None)
        # the partitions by (user, access, namespaces' version, epoch): see ``_partition``
        self.partitions: DecisionCache[frozenset[str]] = DecisionCache(
            size, clock or time.monotonic)
        # Grants of gets and lists by (identity, what they ask): see ``granted``.
        self.grants: DecisionCache[Grant] = DecisionCache(size, clock or time.monotonic)
        # Reviews callers may cause: a caller with no rights listing every resource of a
        # cluster of 2,000 namespaces cluster-wide would make one per namespace and resource
        # every half minute (100k); a merged read, one per cluster. Per user and in total,
        # bursts then a steady rate; the gateway's, shared by every cluster.
        self.budget = budget if budget is not None else AccessBudget()

    def current(self, grant: Grant) -> bool:
        """Whether ``grant`` still rests on the RBAC held now and on an identity that holds
        (expiry aside)."""
        identity = grant.identity
        if identity is not None and not identity.current():
            return False
        return self.access is None or grant.epoch == self.access.epoch

    @property
    def authenticates(self) -> bool:
        """Whether callers are authenticated (``--authz kubernetes``)."""
        return self.authenticator is not None

    def identify(self, scope: dict) -> Identity | None:
        """Who asks, from the caches alone (kept in the scope); ``None`` when a review is due.

        The hot path: a caller whose token review is kept is known without a
        coroutine. Without authentication (``--authz none``) nobody is known.

        Raises:
            StatusError: 400 for malformed impersonation, 401 for no token or
                one whose rejection is kept.
        """
        context = context_of(scope)
        identity = context.identity
        if identity is None and self.authenticator is not None:
            if PEER_USER not in scope.get("extensions", ()):  # a certificate comes first
                identity = self.authenticator.known(scope["headers"])
            if identity is None:
                identity = self.authenticator.cached_identity(credentials_of(scope))
            if identity is not None:
                context.identity = identity
        return identity

    async def authenticate(self, scope: dict) -> Identity | None:
        """Who asks (cached in the scope); ``None`` when callers are not authenticated.

        Raises:
            StatusError: 400 for malformed impersonation, 401, 403 for a refused
                impersonation, 503 when the API server cannot be asked.
        """
        if self.authenticator is None:
            return None
        identity = self.identify(scope)
        if identity is None:
            context = context_of(scope)
            identity = context.identity = await self.authenticator.authenticate(
                credentials_of(scope))
        return identity

    def granted(self, scope: dict | None, access: Access) -> Grant | None:
        """``authorize`` from the caches alone: the grant, or ``None`` when a review is due.

        A get or a list (not a stream, whose grant carries its credentials for
        ``reauthorize``) answered here is kept in ``grants`` by its identity
        and what it asks, until the first of the decisions it rests on expires:
        the same caller asking the same again — a dashboard, a client polling
        one object — is then granted with one lookup, instead of building the
        review's attributes, looking the decision up by them and making a new
        grant. On the cheapest answer (one object by name) those steps were a
        measurable part of the whole request. The policy is fixed for the
        process, so what it allowed once it allows again; it is still asked
        first, so its 403 comes before any other.

        Raises:
            StatusError: 403 (the policy's, or a kept denial that no partition
                may turn into an answer), 401 as ``identify``.
        """
        context = context_of(scope) if scope is not None else None
        if context is not None:
            context.access = access
        try:
            self.policy.check(access.resource, access.name)
            reviews = self.access
            if reviews is None:
                return Grant(access)
            identity = self.identify(scope)
            if identity is None or identity.impersonation is not None:
                return None  # an impersonation is decided here, by a review: ``_decide``
            if access.verb == "watch":
                return self._kept_grant(reviews, identity, scope, access)
            res = access.resource
            key = (identity, access.verb, res.group, res.version, res.resource,
                   access.namespace, access.name)
            kept = self.grants.peek(key)
            if kept is not None and kept[1].epoch == reviews.epoch:
                return kept[1]
            grant = self._kept_grant(reviews, identity, scope, access)
            if grant is not None:
                self.grants.keep(key, grant, grant.expires)
            return grant
        except Exception as exc:
            if context is not None:
                context.denied = exc
            raise

    def _kept_grant(self, reviews: AccessReviews, identity: Identity, scope: dict,
                    access: Access) -> Grant | None:
        epoch = reviews.epoch  # read before deciding: a change after it is a re-check
        try:
            until = reviews.cached_check(identity.user, attributes(access))
        except StatusError as denied:  # a kept denial; maybe a partition instead
            if not self._partitionable(access, denied):
                raise
            return None
        if until is None:
            return None
        return Grant(access, identity, credentials_of(scope), min(until, identity.expires),
                     epoch=epoch)

    async def authorize(self, request: Any, access: Access) -> Grant:
        """Allow ``access`` (returning its ``Grant``) or raise a 403 ``StatusError``.

        ``request`` is the request or its scope (``None`` without authentication).
        """
        scope = getattr(request, "scope", request)
        grant = self.granted(scope, access)
        if grant is not None:  # the common case: nothing to await
            return grant
        try:
            identity = await self.authenticate(scope)
            return await self._decide(identity, credentials_of(scope), access)
        except Exception as exc:
            context_of(scope).denied = exc
            raise

    async def check_impersonation(self, identity: Identity) -> float:
        """Allow the impersonation ``identity`` carries in this cluster (until when), or 403."""
        return await self._impersonating(identity)

    async def _impersonating(self, identity: Identity) -> float:
        """Until when this cluster lets the caller act as whom they impersonate (``inf``
        without impersonation), or 403: asked here, of the cluster that holds the data."""
        if identity.impersonation is None or identity.impersonator is None or self.access is None:
            return math.inf
        return await self.access.impersonation(identity.impersonator, identity.impersonation)

    async def _decide(self, identity: Identity, credentials: Credentials, access: Access) -> Grant:
        assert self.access is not None
        epoch = self.access.epoch  # read before deciding: a change after it is a re-check
        lent = await self._impersonating(identity)
        if lent != math.inf:
            identity = identity._replace(expires=min(identity.expires, lent))
        attrs = attributes(access)
        if self.access.would_ask(identity.user, attrs):
            self.budget.take(identity.user.name, 1, access.describe())
        try:
            until = await self.access.check(identity.user, attrs)
        except StatusError as denied:
            if not self._partitionable(access, denied):
                raise
            until, namespaces = await self._partition(identity, access, epoch)
            if not namespaces:
                raise
            return Grant(access, identity, credentials, min(until, identity.expires), namespaces,
                         epoch)
        return Grant(access, identity, credentials, min(until, identity.expires), epoch=epoch)

    def _partitionable(self, access: Access, denied: StatusError) -> bool:
        return (self._namespaces is not None and denied.code == 403
                and not isinstance(denied, ReviewError) and access.namespace is None
                and access.resource.namespaced and access.verb in ("list", "watch"))

    async def _partition(self, identity: Identity, access: Access,
                         epoch: int) -> tuple[float, frozenset[str]]:
        """(until when, the namespaces where the caller may make ``access``): until the first
        of the answers it was built from expires, or RBAC changes (``epoch``)."""
        assert self.access is not None and self._namespaces is not None
        reviews = self.access
        version, names = await self._namespaces()
        attrs = attributes(access)
        gate = asyncio.Semaphore(_PARTITION_REVIEWS)

        async def allowed(namespace: str) -> tuple[bool, float]:
            async with gate:
                return await reviews.allowed(identity.user, attrs._replace(namespace=namespace))

        async def compute() -> tuple[frozenset[str], float]:
            # one review per namespace not decided lately: a set for the caller, and for all
            cost = sum(1 for ns in names
                       if reviews.would_ask(identity.user, attrs._replace(namespace=ns)))
            if cost:
                self.budget.take(identity.user.name, cost,
                                 f"finding the namespaces in which {access.describe()} is "
                                 f"allowed (or ask for one namespace)")
            answers = await asyncio.gather(*(allowed(ns) for ns in names))
            # it lives no longer than the first answer in it to expire (a denial may turn
            # into an allowance, an allowance be revoked): never the set's own TTL from now
            until = min((expires for _, expires in answers), default=math.inf)
            return (frozenset(ns for ns, (ok, _) in zip(names, answers) if ok),
                    until - self.partitions.clock())

        key = (identity.user, attrs, version, epoch)
        expires, namespaces, _ = await self.partitions.get(key, compute)
        return expires, namespaces

    async def authorize_path(self, scope: dict, path: str) -> None:
        """Allow ``get`` on a non-resource ``path`` for the caller, or raise 401/403."""
        if self.access is None:
            return
        try:
            identity = await self.authenticate(scope)
            await self._impersonating(identity)
            await self.access.check(identity.user, Attributes("get", path=path))
        except Exception as exc:
            context_of(scope).denied = exc
            raise

    def regranted(self, grant: Grant) -> Grant | None:
        """``reauthorize`` from the caches alone, as ``granted`` is ``authorize``'s: the same
        access granted again on the identity and the RBAC held now, or ``None`` when only
        ``reauthorize`` can say (a review due, a refusal to be worded, a partition, an
        impersonation). A stream woken by a change of RBAC that still allows it goes on
        without a task or a coroutine: ten thousand streams of one caller re-checked after
        every change cost a lookup each, not ten thousand tasks.
        """
        if self.authenticator is None or grant.credentials is None:
            return grant
        reviews = self.access
        if reviews is None or grant.namespaces is not None:
            return None
        try:
            identity = self.authenticator.cached_identity(grant.credentials)
        except StatusError:
            return None
        if identity is None:
            return None
        epoch = reviews.epoch
        try:
            until = reviews.cached_check(identity.user, attributes(grant.access))
        except StatusError:
            return None
        if until is None:
            return None
        return Grant(grant.access, identity, grant.credentials, min(until, identity.expires),
                     epoch=epoch)

    async def reauthorize(self, grant: Grant) -> Grant:
        """The same access checked again (a stream's decision expired): a new grant, or 401/403.

        Raises:
            StatusError: 401 or 403 when the right is gone; 410 when the caller's
                partition changed (list again to get the new one); 503 when the
                API server cannot be asked.
        """
        if self.authenticator is None or grant.credentials is None:
            return grant
        identity = await self.authenticator.authenticate(grant.credentials)
        renewed = await self._decide(identity, grant.credentials, grant.access)
        if renewed.namespaces != grant.namespaces:
            raise StatusError(410, "the namespaces this stream may read have changed; list "
                                   "again to read the new ones", "Expired")
        return renewed
