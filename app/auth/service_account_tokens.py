"""ServiceAccount tokens verified here, as the API server verifies them, with no round trip.

A ``TokenReview`` for every new caller moves the API server's own work onto it again.
The API server checks a ServiceAccount token itself, with nothing secret: the JWT's
signature against its published keys, its issuer, audience and times, and that the
ServiceAccount — and the Pod or Node it is bound to — still exists with the same UID
(``pkg/serviceaccount``). The gateway can do each of those from what it holds: the keys
(``/openid/v1/jwks``) and the objects, followed by informers (``app.clusters.
local_tokens``). ``ServiceAccountTokens.verify`` answers one of three things:

- a ``Verified`` identity, exactly the one ``TokenReview`` would give: user
  ``system:serviceaccount:NS:NAME``, the account's UID, groups ``system:serviceaccounts``,
  ``system:serviceaccounts:NS``, ``system:authenticated``, and the extra the API server of
  that version adds (``authentication.kubernetes.io/pod-name`` and ``pod-uid``; from 1.30
  ``credential-id`` and ``node-name``/``node-uid``, as its default feature gates do);
- ``REFUSED``: what the API server refuses whatever it holds — a signature that does not
  verify with the issuer's key of that ``kid``, an algorithm that is not the key's (never
  ``none``, never an HMAC keyed with a public key), times outside its minute of leeway, an
  audience not accepted, a bound object being deleted for more than that minute. A 401
  that costs no review;
- ``ASK``: everything it cannot judge from what it holds, left to ``TokenReview`` as
  before: tokens of another issuer (static, OIDC, legacy Secret-based tokens, whose issuer
  is ``kubernetes/serviceaccount``), tokens bound to a Secret (following Secrets would
  need the right to list them), an account or bound object not in the gateway's cache or
  with another UID there (the cache may be behind the token: the API server, too, asks
  its storage when its cache misses), and everything while the objects are not followed.

And ``UNKNOWN_KEY``: a ``kid`` not among the keys held: the keys are fetched again, then
``verify`` is asked once more with ``refreshed`` (a ``kid`` still unknown is refused).

Audiences: with ``--authn-audiences`` the token must name one of them (what a
``TokenReview`` with those ``spec.audiences`` checks). Without, the API server judges by its
own ``--api-audiences``, which the gateway cannot read: it learns them from the reviews it
sends (``learn_audiences``: a review's ``status.audiences`` are audiences the API server
accepts), and a token naming none learnt yet is asked.

A verified identity carries its ``TokenBinding``: the objects it rests on. Each change of
one of them (deleted, another UID, being deleted for a minute) revokes the bindings on it
(``object_changed``, from the informers' threads), so that a kept identity and every open
stream of it is checked again at once. Lookups and the binding's record happen under one
lock with the revocations, so a change is never missed between the two.
"""

from __future__ import annotations

import base64
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from typing import Any, NamedTuple, Protocol

import jwt
import orjson

from app.auth.identity import UserInfo

__all__ = ["ASK", "LEEWAY", "REFUSED", "UNKNOWN_KEY", "BoundObjects", "ServiceAccountTokens",
           "SigningKeys", "TokenBinding", "Verified"]

LEEWAY = 60.0  # go-jose's DefaultLeeway, the API server's: times, and a bound object's deletion
# What the API server signs with (``pkg/serviceaccount/jwt.go``): RS256 for RSA keys, ES256/384/
# 512 for EC keys of P-256/384/521. Anything else — ``none``, HS*, PS* — is never accepted.
_ALGORITHMS = {("RSA", None): "RS256", ("EC", "P-256"): "ES256", ("EC", "P-384"): "ES384",
               ("EC", "P-521"): "ES512"}
_SA_GROUPS = "system:serviceaccounts"
_AUTHENTICATED = "system:authenticated"
_EXTRA = "authentication.kubernetes.io/"
_VERIFIERS = {name: verifier for name, verifier in jwt.algorithms.get_default_algorithms().items()
              if name in _ALGORITHMS.values()}


class _Verdict:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


ASK = _Verdict("ASK")  # not judged here: TokenReview
REFUSED = _Verdict("REFUSED")  # the API server refuses it too: 401, no review
UNKNOWN_KEY = _Verdict("UNKNOWN_KEY")  # fetch the keys again, then verify again


class TokenBinding:
    """What a verified identity rests on; ``revoked`` once any of it changed (see the module).

    Read on every request of a kept identity (one attribute), set from an informer's thread.
    """

    __slots__ = ("revoked", "objects", "__weakref__")

    def __init__(self, objects: tuple[tuple[str, str, str, str], ...]) -> None:
        self.revoked = False
        self.objects = objects  # (kind, namespace, name, uid): "key" kind for the signing key


class Verified(NamedTuple):
    """A token verified here: its identity, its ``exp`` (Unix seconds), what it rests on."""

    user: UserInfo
    expires_at: float
    binding: TokenBinding


class BoundObjects(Protocol):
    """The objects tokens are bound to, as the gateway follows them (thread-safe reads)."""

    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        """The object's ``metadata`` (``uid``, maybe ``deletionTimestamp``); ``None`` if not
        held. ``kind``: ``serviceaccounts``, ``pods`` or ``nodes``."""


class SigningKeys(NamedTuple):
    """The issuer and its published verification keys, by ``kid``: (key, algorithm name,
    PyJWT's verifier of that algorithm)."""

    issuer: str
    keys: dict[str, tuple[Any, str, Any]]

    @classmethod
    def from_jwks(cls, issuer: str, jwks: dict) -> SigningKeys:
        """The keys of a JWKS document, each pinned to the one algorithm its type signs with
        (a key of any other type, or whose ``alg`` says otherwise, is left out).

        Raises:
            ValueError: the document holds no key the API server signs with.
        """
        keys: dict[str, tuple[Any, str, Any]] = {}
        for jwk in jwks.get("keys") or ():
            if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
                continue
            kty = jwk.get("kty")
            algorithm = _ALGORITHMS.get((kty, jwk.get("crv") if kty == "EC" else None))
            if algorithm is None or jwk.get("alg", algorithm) != algorithm:
                continue
            try:
                key = jwt.PyJWK(jwk, algorithm).key
            except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
                continue
            keys[str(jwk.get("kid") or "")] = (key, algorithm, _VERIFIERS[algorithm])
        if not keys:
            raise ValueError("the JWKS holds no RSA or EC signing key")
        return cls(issuer, keys)


async def _nothing() -> None:
    return None


def _b64(part: str) -> bytes:
    """A JWS segment's bytes; ``ValueError`` unless it is their canonical unpadded base64url
    (Python's decoder skips what is not base64: a segment it took that way is not the one
    signed, nor one the API server's strict decoder takes — such a token is asked)."""
    raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    if base64.urlsafe_b64encode(raw).rstrip(b"=") != part.encode("ascii", "replace"):
        raise ValueError("not canonical unpadded base64url")
    return raw


def _b64_json(part: str) -> Any:
    return orjson.loads(_b64(part))


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("not a NumericDate")
    return float(value)


def _time(value: Any) -> float:
    """An RFC 3339 time of Kubernetes metadata, in Unix seconds."""
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def _ref(claims: dict, name: str) -> tuple[str, str] | None:
    found = claims.get(name)
    if found is None:
        return None
    if not isinstance(found, dict):
        raise ValueError(f"{name} is not an object")
    return str(found.get("name") or ""), str(found.get("uid") or "")


def _signed(parts: list[str], header: dict, signature: bytes,
            found: tuple[Any, str, Any]) -> bool:
    """Whether the JWS ``parts`` carry the signature of ``found``'s key, by the one algorithm
    that key signs with (the header must name it: never ``none``, never another key type's).

    PyJWT's verifier of that algorithm checks the signature (``cryptography`` underneath);
    the segments are split and decoded here, once: its own ``decode_complete`` checks each
    character of a segment in Python, three times the signature's own cost."""
    key, algorithm, verifier = found
    if header.get("alg") != algorithm:
        return False
    return bool(verifier.verify(f"{parts[0]}.{parts[1]}".encode("ascii"), key, signature))


class ServiceAccountTokens:
    """The verifier of one cluster's ServiceAccount tokens; see the module.

    ``keys`` and ``objects`` are set by whoever follows the cluster (``app.clusters.
    local_tokens``); until both are, and while ``following`` says the objects are current,
    every token is ``ASK``.
    """

    def __init__(self, audiences: Iterable[str] = (), server_minor: int = 0,
                 clock: Callable[[], float] = time.time) -> None:
        self.audiences = frozenset(audiences)  # --authn-audiences; empty: learnt
        self.learnt: set[str] = set()  # audiences the API server's reviews accepted
        self.keys: SigningKeys | None = None
        self.objects: BoundObjects | None = None
        self.following: Callable[[], bool] = lambda: False
        self.server_minor = server_minor  # the API server's minor version: its extra
        self.clock = clock
        self.on_revoke: Callable[[], None] = lambda: None  # after bindings were revoked
        # fetches the keys again (a ``kid`` not held); set by whoever follows the cluster
        self.refresh: Callable[[], Awaitable[None]] = _nothing
        self._lock = threading.Lock()  # lookups + records against revocations
        self._bindings: dict[tuple[str, str, str], weakref.WeakSet[TokenBinding]] = {}
        self._terminating: dict[tuple[str, str, str], float] = {}  # key -> refused from

    @property
    def deciding(self) -> bool:
        """Whether tokens are judged here now: keys held, objects followed."""
        return self.keys is not None and self.objects is not None and self.following()

    def learn_audiences(self, audiences: Iterable[str]) -> None:
        """Audiences a ``TokenReview`` of the API server accepted (its ``status.audiences``)."""
        if not self.audiences:
            self.learnt.update(str(a) for a in audiences)

    def verify(self, token: str, refreshed: bool = False) -> Verified | _Verdict:
        """What the API server would say of ``token``, from what is held; see the module."""
        keys, objects = self.keys, self.objects
        if keys is None or objects is None or not self.following():
            return ASK
        parts = token.split(".")
        if len(parts) != 3:
            return ASK  # not a JWT: a static token, a bootstrap token
        try:
            header, claims = _b64_json(parts[0]), _b64_json(parts[1])
            signature = _b64(parts[2])
        except (ValueError, orjson.JSONDecodeError):
            return ASK
        if not isinstance(header, dict) or not isinstance(claims, dict):
            return ASK
        if claims.get("iss") != keys.issuer:
            return ASK  # another issuer: OIDC, a legacy Secret-based token
        private = claims.get("kubernetes.io")
        if not isinstance(private, dict) or private.get("secret") is not None:
            return ASK  # not a bound token of ours, or bound to a Secret (not followed)
        kid = header.get("kid")
        if kid is None:  # no kid: each key is tried, as the API server does
            kid = next((k for k, found in keys.keys.items()
                        if _signed(parts, header, signature, found)), None)
            if kid is None:
                return REFUSED if refreshed else UNKNOWN_KEY
        elif not isinstance(kid, str):
            return REFUSED
        else:
            found = keys.keys.get(kid)
            if found is None:
                return REFUSED if refreshed else UNKNOWN_KEY
            if not _signed(parts, header, signature, found):
                return REFUSED  # forged, or another algorithm than the key's
        try:
            return self._judged(claims, private, str(kid), objects)
        except (ValueError, TypeError, AttributeError):
            return ASK  # signed by the cluster, shaped unlike its tokens: let it judge

    def _judged(self, claims: dict, private: dict, kid: str,
                objects: BoundObjects) -> Verified | _Verdict:
        now = self.clock()
        exp, nbf, iat = (_number(claims[c]) if c in claims else None
                         for c in ("exp", "nbf", "iat"))
        if nbf is not None and now + LEEWAY < nbf:
            return REFUSED  # not valid yet
        if exp is not None and now - LEEWAY > exp:
            return REFUSED  # expired
        if iat is not None and now + LEEWAY < iat:
            return REFUSED  # issued in the future
        audiences = claims.get("aud")
        audiences = {audiences} if isinstance(audiences, str) else set(audiences or ())
        accepted = self.audiences or self.learnt
        if not audiences & accepted:
            return REFUSED if self.audiences else ASK
        namespace = str(private.get("namespace") or "")
        account, pod, node = (_ref(private, "serviceaccount"), _ref(private, "pod"),
                              _ref(private, "node"))
        if not namespace or account is None or not account[0]:
            return ASK
        newer = self.server_minor >= 30  # the defaults of 1.30's feature gates (module)
        if node is not None and pod is None and not newer:
            return ASK  # bound to a Node, on an API server that may not judge those
        bound = [("serviceaccounts", namespace, account[0], account[1])]
        if pod is not None:
            bound.append(("pods", namespace, pod[0], pod[1]))
        elif node is not None:
            bound.append(("nodes", "", node[0], node[1]))
        with self._lock:
            for kind, ns, name, uid in bound:
                meta = objects.get(kind, ns, name)
                if meta is None or str(meta.get("uid") or "") != uid:
                    return ASK  # not held, or held as another: the cache may be behind
                deleted = meta.get("deletionTimestamp")
                if deleted:
                    refused_from = _time(deleted) + LEEWAY
                    if refused_from < now:
                        return REFUSED  # being deleted for more than the leeway
                    self._terminating[(kind, ns, name)] = refused_from
            binding = TokenBinding((("key", "", kid, ""), *bound))
            for kind, ns, name, _ in binding.objects:
                held = self._bindings.get((kind, ns, name))
                if held is None:
                    held = self._bindings[(kind, ns, name)] = weakref.WeakSet()
                held.add(binding)
        extra: list[tuple[str, tuple[str, ...]]] = []
        if pod is not None:
            extra += [(_EXTRA + "pod-name", (pod[0],)), (_EXTRA + "pod-uid", (pod[1],))]
        jti = claims.get("jti")
        if newer and isinstance(jti, str) and jti:
            extra.append((_EXTRA + "credential-id", (f"JTI={jti}",)))
        if newer and node is not None and node[0]:
            extra.append((_EXTRA + "node-name", (node[0],)))
            if node[1]:
                extra.append((_EXTRA + "node-uid", (node[1],)))
        user = UserInfo(f"system:serviceaccount:{namespace}:{account[0]}", account[1],
                        (_SA_GROUPS, f"{_SA_GROUPS}:{namespace}", _AUTHENTICATED),
                        tuple(sorted(extra)))
        return Verified(user, exp if exp is not None else float("inf"), binding)

    # -- what the informers say -------------------------------------------------------------

    def object_changed(self, kind: str, namespace: str, name: str, meta: dict | None) -> None:
        """An object tokens may be bound to was added, changed (``meta``: its metadata now)
        or deleted (``None``): the bindings it no longer holds up are revoked. From an
        informer's thread."""
        key = (kind, namespace, name)
        with self._lock:
            held = self._bindings.get(key)
            if held is None:
                return
            if meta is None:
                self._terminating.pop(key, None)
                revoked = list(held)
                del self._bindings[key]
            else:
                uid = str(meta.get("uid") or "")
                revoked = [b for b in held if any(o[:3] == key and o[3] != uid
                                                  for o in b.objects)]
                deleted = meta.get("deletionTimestamp")
                if deleted:
                    try:
                        self._terminating[key] = _time(deleted) + LEEWAY
                    except ValueError:
                        revoked = list(held)
        self._revoke(revoked)

    def keys_changed(self, keys: SigningKeys) -> None:
        """New keys: bindings on a key no longer published are revoked (a rotation that
        dropped it: the API server refuses its tokens from now on)."""
        old, self.keys = self.keys, keys
        if old is None:
            return
        with self._lock:
            gone = [("key", "", kid) for kid in old.keys if kid not in keys.keys]
            revoked = [b for key in gone for b in self._bindings.pop(key, ())]
        self._revoke(revoked)

    def expire(self, now: float | None = None) -> None:
        """Revoke the bindings on objects deleted for more than the leeway by now, and
        forget records whose bindings are all gone (called every second or so)."""
        now = self.clock() if now is None else now
        with self._lock:
            due = [key for key, at in self._terminating.items() if at < now]
            revoked = []
            for key in due:
                del self._terminating[key]
                revoked += list(self._bindings.pop(key, ()))
            for key in [k for k, held in self._bindings.items() if not held]:
                del self._bindings[key]
        self._revoke(revoked)

    def forget_all(self) -> None:
        """Revoke every binding (the objects are no longer followed)."""
        with self._lock:
            revoked = [b for held in self._bindings.values() for b in held]
            self._bindings.clear()
            self._terminating.clear()
        self._revoke(revoked)

    def _revoke(self, bindings: list[TokenBinding]) -> None:
        fresh = [b for b in bindings if not b.revoked]
        for binding in fresh:
            binding.revoked = True
        if fresh:
            self.on_revoke()
