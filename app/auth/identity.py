"""Who is asking: the caller's credentials as sent, and the user they stand for.

``Credentials`` is what a request carries — a bearer token and, maybe,
impersonation headers — read from the ASGI scope in one pass over its
headers. ``UserInfo`` is who the cluster says that is (a ``TokenReview``'s
answer, or the identity an allowed impersonation asks for), shaped as a
``SubjectAccessReview`` wants it.

Impersonation follows the API server's rules: ``Impersonate-User`` is required
whenever any other ``Impersonate-*`` header is given; a user named
``system:serviceaccount:NS:NAME`` is a ServiceAccount (checked as the
``serviceaccounts`` resource, and given the ServiceAccount groups when no group
is asked for); ``Impersonate-Extra-KEY`` keys are percent-decoded and lower
case; and every impersonated user but ``system:anonymous`` is in
``system:authenticated`` unless ``system:authenticated`` or
``system:unauthenticated`` was asked for.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable
from typing import Any, NamedTuple

from app.kube.status import bad_request

__all__ = ["ANONYMOUS", "PEER_USER", "Credentials", "Impersonation", "PeerCertificate", "UserInfo",
           "bearer_token",
           "credentials_from_scope", "impersonated_user"]

_SA_PREFIX = "system:serviceaccount:"
# the scope extension holding the connection's verified client certificate (its
# ``PeerCertificate``), set by the HTTP protocol on each request while it is current
# (app.auth.client_certs)
PEER_USER = "kcg.peer_user"
_AUTHENTICATED = "system:authenticated"
_UNAUTHENTICATED = "system:unauthenticated"
_ANONYMOUS_NAME = "system:anonymous"


class UserInfo(NamedTuple):
    """A user as the cluster knows it: name, uid, groups and extra attributes.

    A named tuple, not a dataclass: it is hashed on every request (a key of the
    access cache), and a tuple's hash is computed in C.
    """

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()  # sorted by key

    @classmethod
    def from_review(cls, user: dict) -> UserInfo:
        """The ``user`` of a ``TokenReview``'s status."""
        extra = user.get("extra") or {}
        return cls(str(user.get("username") or ""), str(user.get("uid") or ""),
                   tuple(str(g) for g in user.get("groups") or ()),
                   tuple(sorted((str(k), tuple(str(v) for v in vs or ()))
                                for k, vs in extra.items())))

    def names_in(self, user_prefix: str = "", group_prefix: str = "") -> tuple[str, tuple[str, ...]]:
        """(user, groups) as a cluster with these prefixes knows them: what its reviews ask
        about and what its RBAC is read for (``review_spec``)."""
        if not user_prefix and not group_prefix:
            return self.name, self.groups
        return user_prefix + self.name, tuple(
            g if not group_prefix or g in _EVERYONE else group_prefix + g for g in self.groups)

    def review_spec(self, user_prefix: str = "", group_prefix: str = "") -> dict:
        """The user part of a ``SubjectAccessReview`` spec, the cluster's prefixes applied.

        ``system:authenticated`` and ``system:unauthenticated`` are not prefixed: every
        API server gives them by itself to whoever it has (not) authenticated, so their
        bindings (discovery, ``system:basic-user``) hold in every cluster.
        """
        name, groups = self.names_in(user_prefix, group_prefix)
        spec: dict = {"user": name, "groups": list(groups)}
        if self.uid:
            spec["uid"] = self.uid
        if self.extra:
            spec["extra"] = {k: list(v) for k, v in self.extra}
        return spec


_EVERYONE = frozenset({_AUTHENTICATED, _UNAUTHENTICATED})
ANONYMOUS = UserInfo(_ANONYMOUS_NAME, groups=(_UNAUTHENTICATED,))


class Impersonation(NamedTuple):
    """What the ``Impersonate-*`` headers ask for."""

    user: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


class PeerCertificate(NamedTuple):
    """The caller of a connection's verified client certificate, and what that rests on: the
    certificate's ``notAfter`` and the client CAs that verified it. A connection — a watch
    above all — outlives both, so each request asks again (``current``)."""

    user: UserInfo
    not_after: float  # seconds since the epoch
    verified_by: Any  # the client CAs' TLS context of the handshake
    trusted: Callable[[Any], bool]  # whether those are still the CAs (``ClientCAs.trusts``)

    def current(self, now: float | None = None) -> bool:
        """Whether the certificate still names its caller: not expired, its CAs unchanged."""
        return (time.time() if now is None else now) < self.not_after and \
            self.trusted(self.verified_by)


class Credentials(NamedTuple):
    """What a request presents: a bearer token (or none) and maybe an impersonation, from
    a client address (what new tokens are budgeted by: ``app.auth.review_budget``); and the
    user of the client certificate its connection was verified with (``None`` without one:
    ``app.auth.client_certs``)."""

    token: str | None
    impersonation: Impersonation | None = None
    client: str = ""
    certificate: PeerCertificate | None = None


def bearer_token(headers: list[tuple[bytes, bytes]]) -> tuple[bytes | None, bool]:
    """The bearer token as sent (its bytes, ASCII spaces stripped; ``None`` without one),
    and whether any ``Impersonate-*`` header came with it: one pass over the headers.

    The one reading of the ``Authorization`` header: ``credentials_from_scope`` and the
    hot path's ``Authenticator.known`` both start here, so a token is the same token to
    both (the last ``Bearer`` header wins, the scheme's case does not matter).
    """
    token = None
    impersonating = False
    for name, value in headers:  # names are lower case in ASGI
        if name == b"authorization":
            if value[:7].lower() == b"bearer ":
                token = value[7:].strip() or None
        elif name[:12] == b"impersonate-":
            impersonating = True
    return token, impersonating


def credentials_from_scope(scope: dict) -> Credentials:
    """Read the bearer token and the ``Impersonate-*`` headers.

    Raises:
        StatusError: 400 for impersonation headers without ``Impersonate-User``.
    """
    raw, impersonating = bearer_token(scope["headers"])
    token = raw.decode("latin-1") if raw is not None else None
    peer = scope.get("client")
    client = peer[0] if peer else ""
    certificate = (scope.get("extensions") or {}).get(PEER_USER)
    if not impersonating:
        return Credentials(token, None, client, certificate)
    return Credentials(token, _impersonation(scope["headers"]), client, certificate)


_LONGEST_IMPERSONATION = 1024


def _impersonation(headers: list[tuple[bytes, bytes]]) -> Impersonation:
    user = None
    groups: list[str] = []
    uid = ""
    extra: dict[str, list[str]] = {}
    others: list[str] = []
    for name, value in headers:
        if name[:12] != b"impersonate-":
            continue
        if len(value) > _LONGEST_IMPERSONATION or len(name) > _LONGEST_IMPERSONATION:
            # no user, group, uid or extra is this long; kept, it would be a decision's key
            raise bad_request(f"{name[:64].decode('latin-1')} is longer than "
                              f"{_LONGEST_IMPERSONATION} bytes")
        text = value.decode("latin-1")
        header = name.decode("latin-1")
        if header == "impersonate-user":
            user = text
        elif header == "impersonate-group":
            groups.append(text)
            others.append("Impersonate-Group")
        elif header == "impersonate-uid":
            uid = text
            others.append("Impersonate-Uid")
        elif header.startswith("impersonate-extra-"):
            key = urllib.parse.unquote(header[len("impersonate-extra-"):]).lower()
            extra.setdefault(key, []).append(text)
            others.append(f"Impersonate-Extra-{key}")
    if user is None:
        raise bad_request(f"requested {', '.join(sorted(set(others)))} without impersonating "
                          f"a user: give Impersonate-User too")
    return Impersonation(user, tuple(groups), uid,
                         tuple(sorted((k, tuple(v)) for k, v in extra.items())))


def impersonated_user(imp: Impersonation) -> UserInfo:
    """The identity an allowed impersonation gives, as the API server builds it."""
    groups = list(imp.groups)
    if imp.user.startswith(_SA_PREFIX) and not groups:
        namespace = imp.user[len(_SA_PREFIX):].partition(":")[0]
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    if imp.user == _ANONYMOUS_NAME:
        if _UNAUTHENTICATED not in groups:
            groups.append(_UNAUTHENTICATED)
    elif _AUTHENTICATED not in groups and _UNAUTHENTICATED not in groups:
        groups.append(_AUTHENTICATED)
    return UserInfo(imp.user, imp.uid, tuple(groups), imp.extra)
