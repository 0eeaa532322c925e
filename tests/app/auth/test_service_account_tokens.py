"""ServiceAccountTokens: a JWT judged as the API server judges it, or left to TokenReview.

Keys are made here with ``cryptography`` and tokens signed with PyJWT, as the API server
would sign them; the live proof against the API server's own tokens and ``TokenReview`` is in
``tests/app/clusters/test_local_tokens_live.py``.
"""

from __future__ import annotations

import base64
import json

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from app.auth.identity import UserInfo
from app.auth.service_account_tokens import (ASK, LEEWAY, REFUSED, UNKNOWN_KEY,
                                             ServiceAccountTokens, SigningKeys, Verified)

ISSUER = "https://kubernetes.default.svc"
NOW = 1_700_000_000.0
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_RSA = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _jwk(private, kid: str, alg: str) -> dict:
    jwk = json.loads(jwt.algorithms.get_default_algorithms()[alg].to_jwk(private.public_key()))
    return {**jwk, "kid": kid, "alg": alg, "use": "sig"}


JWKS = {"keys": [_jwk(RSA_KEY, "rsa-1", "RS256"), _jwk(EC_KEY, "ec-1", "ES256")]}


class Objects:
    """Bound objects by (kind, namespace, name): their metadata."""

    def __init__(self) -> None:
        self.held: dict[tuple[str, str, str], dict] = {
            ("serviceaccounts", "shop", "api"): {"uid": "sa-uid"},
            ("pods", "shop", "api-7"): {"uid": "pod-uid"},
            ("nodes", "", "node-1"): {"uid": "node-uid"},
        }

    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        return self.held.get((kind, namespace, name))


def verifier(audiences=(ISSUER,), minor: int = 20, objects: Objects | None = None,
             following: bool = True) -> ServiceAccountTokens:
    tokens = ServiceAccountTokens(audiences, server_minor=minor, clock=lambda: NOW)
    tokens.keys = SigningKeys.from_jwks(ISSUER, JWKS)
    tokens.objects = objects or Objects()
    tokens.following = lambda: following
    return tokens


def claims(**private) -> dict:
    base = {"iss": ISSUER, "aud": [ISSUER], "sub": "system:serviceaccount:shop:api",
            "iat": int(NOW), "nbf": int(NOW), "exp": int(NOW) + 3600,
            "kubernetes.io": {"namespace": "shop",
                              "serviceaccount": {"name": "api", "uid": "sa-uid"}}}
    base["kubernetes.io"].update(private)
    return base


def sign(payload: dict, key=RSA_KEY, kid: str | None = "rsa-1", alg: str = "RS256") -> str:
    headers = {"kid": kid} if kid is not None else {}
    return jwt.encode(payload, key, algorithm=alg, headers=headers)


POD = {"pod": {"name": "api-7", "uid": "pod-uid"}}


def test_a_pod_bound_token_is_the_identity_token_review_gives():
    verdict = verifier().verify(sign(claims(**POD)))
    assert isinstance(verdict, Verified)
    assert verdict.user == UserInfo(
        "system:serviceaccount:shop:api", "sa-uid",
        ("system:serviceaccounts", "system:serviceaccounts:shop", "system:authenticated"),
        (("authentication.kubernetes.io/pod-name", ("api-7",)),
         ("authentication.kubernetes.io/pod-uid", ("pod-uid",))))
    assert verdict.expires_at == NOW + 3600
    assert ("pods", "shop", "api-7", "pod-uid") in verdict.binding.objects


def test_an_api_server_of_1_30_adds_the_credential_id_and_the_pods_node():
    token = sign({**claims(**POD, node={"name": "node-1", "uid": "node-uid"}), "jti": "j-1"})
    old, new = verifier(minor=29).verify(token), verifier(minor=30).verify(token)
    assert [k for k, _ in old.user.extra] == ["authentication.kubernetes.io/pod-name",
                                              "authentication.kubernetes.io/pod-uid"]
    assert dict(new.user.extra) == {
        "authentication.kubernetes.io/credential-id": ("JTI=j-1",),
        "authentication.kubernetes.io/node-name": ("node-1",),
        "authentication.kubernetes.io/node-uid": ("node-uid",),
        "authentication.kubernetes.io/pod-name": ("api-7",),
        "authentication.kubernetes.io/pod-uid": ("pod-uid",)}


def test_an_ec_key_verifies_its_own_tokens():
    assert isinstance(verifier().verify(sign(claims(), EC_KEY, "ec-1", "ES256")), Verified)


@pytest.mark.parametrize("forge", ["other key", "none", "hmac with the public key",
                                   "rsa token on the ec key", "body changed"])
def test_a_forged_token_of_the_issuer_is_refused_without_a_review(forge):
    if forge == "other key":
        token = sign(claims(), OTHER_RSA)
    elif forge == "none":
        token = jwt.encode(claims(), None, algorithm="none", headers={"kid": "rsa-1"})
    elif forge == "hmac with the public key":
        pem = RSA_KEY.public_key().public_bytes(serialization.Encoding.PEM,
                                                serialization.PublicFormat.SubjectPublicKeyInfo)
        header = base64.urlsafe_b64encode(b'{"alg":"HS256","kid":"rsa-1"}').rstrip(b"=")
        body = base64.urlsafe_b64encode(json.dumps(claims()).encode()).rstrip(b"=")
        import hashlib
        import hmac
        mac = hmac.new(pem, header + b"." + body, hashlib.sha256).digest()
        token = b".".join([header, body, base64.urlsafe_b64encode(mac).rstrip(b"=")]).decode()
    elif forge == "rsa token on the ec key":
        token = sign(claims(), RSA_KEY, "ec-1")
    else:
        head, _, signature = sign(claims()).split(".")
        other = dict(claims(), sub="system:serviceaccount:kube-system:admin")
        body = base64.urlsafe_b64encode(json.dumps(other).encode()).rstrip(b"=").decode()
        token = f"{head}.{body}.{signature}"
    assert verifier().verify(token) is REFUSED


def test_an_unknown_kid_asks_for_the_keys_again_then_is_refused():
    tokens = verifier()
    token = sign(claims(), OTHER_RSA, "rotated")
    assert tokens.verify(token) is UNKNOWN_KEY
    assert tokens.verify(token, refreshed=True) is REFUSED
    tokens.keys_changed(SigningKeys.from_jwks(ISSUER, {"keys": [
        *JWKS["keys"], _jwk(OTHER_RSA, "rotated", "RS256")]}))
    assert isinstance(tokens.verify(token), Verified)


def test_a_token_without_a_kid_is_tried_on_every_key():
    tokens = verifier()
    assert isinstance(tokens.verify(sign(claims(), EC_KEY, None, "ES256")), Verified)
    assert tokens.verify(sign(claims(), OTHER_RSA, None)) is UNKNOWN_KEY


@pytest.mark.parametrize("token", [
    "a-static-token", "a.b", "not.a.jwt",
    sign(dict(claims(), iss="https://oidc.example.com")),
    sign({"iss": "kubernetes/serviceaccount",  # a legacy Secret-based token
          "kubernetes.io/serviceaccount/namespace": "shop"}),
    sign(claims(secret={"name": "s", "uid": "s-uid"})),  # bound to a Secret: not followed
    sign(dict(claims(), **{"kubernetes.io": {"namespace": "shop"}})),  # no account
])
def test_what_is_not_judged_here_is_asked(token):
    assert verifier().verify(token) is ASK


def test_nothing_is_judged_while_the_objects_are_not_followed():
    assert verifier(following=False).verify(sign(claims(**POD))) is ASK


@pytest.mark.parametrize("change, verdict", [
    ({"exp": int(NOW - LEEWAY + 1)}, Verified), ({"exp": int(NOW - LEEWAY - 1)}, REFUSED),
    ({"nbf": int(NOW + LEEWAY - 1)}, Verified), ({"nbf": int(NOW + LEEWAY + 1)}, REFUSED),
    ({"iat": int(NOW + LEEWAY + 1)}, REFUSED), ({"exp": "soon"}, ASK),
])
def test_times_are_judged_with_the_api_servers_minute_of_leeway(change, verdict):
    got = verifier().verify(sign(dict(claims(), **change)))
    assert got is verdict if verdict is not Verified else isinstance(got, Verified)


def test_audiences_given_must_be_named_and_learnt_ones_are_asked_until_learnt():
    token = sign(dict(claims(), aud=["https://vault"]))
    assert verifier(audiences=("https://gateway",)).verify(token) is REFUSED
    assert isinstance(verifier(audiences=("https://vault",)).verify(token), Verified)
    learning = verifier(audiences=())
    assert learning.verify(token) is ASK  # the API server's own audiences are not known yet
    learning.learn_audiences(["https://vault"])
    assert isinstance(learning.verify(token), Verified)
    assert isinstance(verifier().verify(sign(dict(claims(), aud=ISSUER))), Verified)  # a string


@pytest.mark.parametrize("held, verdict", [
    ({}, ASK),  # not held: the cache may be behind, the API server is asked
    ({"uid": "another"}, ASK),  # replaced, or the cache behind the token
    ({"uid": "pod-uid", "deletionTimestamp": "2023-11-14T22:12:21Z"}, REFUSED),  # NOW - 59 s
    ({"uid": "pod-uid", "deletionTimestamp": "2023-11-14T22:13:21Z"}, Verified),  # NOW + 1 s
])
def test_the_bound_pod_must_be_held_with_its_uid_and_not_deleted_for_a_minute(held, verdict):
    objects = Objects()
    if held:
        objects.held[("pods", "shop", "api-7")] = held
    else:
        del objects.held[("pods", "shop", "api-7")]
    tokens = verifier(objects=objects)
    tokens.clock = lambda: NOW + 60  # 2023-11-14T22:14:20Z
    got = tokens.verify(sign(claims(**POD)))
    assert got is verdict if verdict is not Verified else isinstance(got, Verified)


def test_a_node_bound_token_is_judged_by_its_node_from_1_30_and_asked_before():
    token = sign(claims(node={"name": "node-1", "uid": "node-uid"}))
    assert verifier(minor=29).verify(token) is ASK
    verdict = verifier(minor=30).verify(token)
    assert dict(verdict.user.extra) == {"authentication.kubernetes.io/node-name": ("node-1",),
                                        "authentication.kubernetes.io/node-uid": ("node-uid",)}
    objects = Objects()
    objects.held[("nodes", "", "node-1")] = {"uid": "new-node"}
    assert verifier(minor=30, objects=objects).verify(token) is ASK


def test_an_object_deleted_or_replaced_revokes_the_identities_resting_on_it():
    tokens = verifier()
    revoked = []
    tokens.on_revoke = lambda: revoked.append(1)
    pod_bound = tokens.verify(sign(claims(**POD))).binding
    account_only = tokens.verify(sign(claims())).binding
    tokens.object_changed("pods", "shop", "api-7", {"uid": "pod-uid", "labels": {}})
    assert not pod_bound.revoked and not revoked  # an update that keeps the UID: nothing
    tokens.object_changed("pods", "shop", "api-7", None)
    assert pod_bound.revoked and not account_only.revoked and revoked == [1]
    tokens.object_changed("serviceaccounts", "shop", "api", {"uid": "recreated"})
    assert account_only.revoked and revoked == [1, 1]


def test_an_object_being_deleted_revokes_them_a_minute_after_its_deletion_time():
    tokens = verifier()
    binding = tokens.verify(sign(claims(**POD))).binding
    tokens.object_changed("pods", "shop", "api-7",
                          {"uid": "pod-uid", "deletionTimestamp": "2023-11-14T22:13:30Z"})
    tokens.expire(NOW + 59)  # 22:13:19 + 59 s: before 22:14:30
    assert not binding.revoked
    tokens.expire(NOW + 72)
    assert binding.revoked


def test_a_key_dropped_from_the_published_ones_revokes_its_tokens():
    tokens = verifier()
    rsa_bound = tokens.verify(sign(claims())).binding
    ec_bound = tokens.verify(sign(claims(), EC_KEY, "ec-1", "ES256")).binding
    tokens.keys_changed(SigningKeys.from_jwks(ISSUER, {"keys": [JWKS["keys"][1]]}))
    assert rsa_bound.revoked and not ec_bound.revoked


def test_keys_the_api_server_does_not_sign_with_are_left_out():
    symmetric = {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac", "alg": "HS256"}
    mislabelled = dict(JWKS["keys"][0], alg="PS256", kid="ps")
    keys = SigningKeys.from_jwks(ISSUER, {"keys": [symmetric, mislabelled, JWKS["keys"][1]]})
    assert set(keys.keys) == {"ec-1"}
    with pytest.raises(ValueError):
        SigningKeys.from_jwks(ISSUER, {"keys": [symmetric]})
