"""ServiceAccount tokens verified by the gateway, against the real API server's own.

The gateway runs as a ServiceAccount bound as the chart binds it (read what it serves and the
objects tokens are bound to, ``system:auth-delegator``). Every expected identity is the one
the API server's ``TokenReview`` gives for the same token; every expected refusal is its own.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from app.auth.identity import Credentials, UserInfo
from app.kube.status import StatusError
from control_plane.cluster import SERVICE_ACCOUNT_ISSUER
from control_plane.kubeapi import KubeAPI
from tests.app import accounts
from tests.app.accounts import cluster_role, remove_prefixed
from tests.app.readers import LineReader
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster

NS = "local-tokens"
PREFIX = "kcg-local-tokens-"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
PODS = f"/api/v1/namespaces/{NS}/pods"
READ = ["get", "list", "watch"]


def _cluster_binding(kube: KubeAPI, name: str, role: str, account: str) -> None:
    kube.delete(f"{RBAC}/clusterrolebindings/{name}")
    kube.create(f"{RBAC}/clusterrolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": NS}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}})




def pod(kube: KubeAPI, name: str, account: str = "default") -> dict:
    kube.delete(f"{PODS}/{name}")
    wait_until(lambda: kube.get(f"{PODS}/{name}", ok_missing=True) is None, 30)
    return kube.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                              "spec": {"serviceAccountName": account,
                                       "containers": [{"name": "c", "image": "nginx"}]}})


@pytest.fixture(scope="module")
def kube(local_cluster):
    kube = KubeAPI.for_cluster(local_cluster)
    kube.ensure_namespace(NS)
    cluster_role(kube, PREFIX + "gateway", [
        {"apiGroups": [""], "resources": ["pods", "namespaces", "serviceaccounts", "nodes"],
         "verbs": READ},
        {"apiGroups": ["rbac.authorization.k8s.io"],
         "resources": ["roles", "clusterroles", "rolebindings", "clusterrolebindings"],
         "verbs": READ}])
    cluster_role(kube, PREFIX + "blind", [
        {"apiGroups": [""], "resources": ["pods", "namespaces"], "verbs": READ}])
    cluster_role(kube, PREFIX + "read-pods", [
        {"apiGroups": [""], "resources": ["pods"], "verbs": READ}])
    for account, role in (("gateway", "gateway"), ("gateway-blind", "blind")):
        _cluster_binding(kube, PREFIX + account, PREFIX + role, account)
        _cluster_binding(kube, PREFIX + account + "-delegator", "system:auth-delegator", account)
    for account in ("reader", "pod-reader", "doomed"):
        kube.service_account_token(NS, account)  # creates the account
        _cluster_binding(kube, PREFIX + account, PREFIX + "read-pods", account)
    yield kube
    remove_prefixed(kube, PREFIX, NS)


def running_as(local_cluster, kube: KubeAPI, account: str, **settings):
    return accounts.running_as(local_cluster, kube, NS, account, **settings)


@pytest.fixture(scope="module")
def gateway(local_cluster, kube):
    with running_as(local_cluster, kube, "gateway") as running:
        wait_until(lambda: running.gateway.authenticator.local.deciding, 30,
                   message="the identity cluster's tokens to be verified here")
        yield running


def identity_of(running, token: str) -> UserInfo | None:
    """The gateway's identity for ``token`` (``None``: it refused it), asked on its loop."""
    gateway = running.gateway
    future = asyncio.run_coroutine_threadsafe(
        gateway.authenticator.authenticate(Credentials(token)), gateway.loop)
    try:
        return future.result(30).user
    except StatusError as refused:
        assert refused.code == 401, refused
        return None


def reviewed(kube: KubeAPI, token: str) -> UserInfo | None:
    """The API server's own answer: ``TokenReview`` (``None``: not authenticated)."""
    status = kube.create("/apis/authentication.k8s.io/v1/tokenreviews", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token}})["status"]
    return UserInfo.from_review(status["user"]) if status.get("authenticated") else None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def tokens_of_every_kind(local_cluster, kube: KubeAPI) -> dict[str, tuple[str, bool]]:
    """name -> (token, whether the gateway judges it without a review)."""
    account = kube.get(f"/api/v1/namespaces/{NS}/serviceaccounts/reader")
    bound = pod(kube, "bound-1", "reader")
    genuine = kube.service_account_token(NS, "reader")
    header = json.loads(base64.urlsafe_b64decode(genuine.split(".")[0] + "=="))
    claims = local_cluster.service_account_claims(NS, "reader", account["metadata"]["uid"],
                                                  time.time() + 600)
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    head, body, signature = genuine.split(".")
    altered = dict(json.loads(base64.urlsafe_b64decode(body + "==")),
                   sub=f"system:serviceaccount:{NS}:gateway")
    return {
        "static with groups": (local_cluster.user.token, False),
        "admin": (local_cluster.admin.token, False),
        "service account": (genuine, True),
        "bound to a pod": (kube.service_account_token(NS, "reader", bound_to=bound), True),
        "for another audience": (kube.service_account_token(
            NS, "reader", audiences=("https://vault.example",)), False),
        "expired": (local_cluster.sign_token(dict(claims, exp=int(time.time()) - 300)), True),
        "not valid yet": (local_cluster.sign_token(dict(claims, nbf=int(time.time()) + 300)), True),
        "of a foreign key": (jwt.encode(claims, stranger, algorithm="RS256",
                                        headers={"kid": header["kid"]}), True),
        "forged claims": (f"{head}.{_b64(json.dumps(altered).encode())}.{signature}", True),
        "another issuer": (local_cluster.sign_token(dict(claims, iss="https://elsewhere")), False),
        "of a deleted account": (local_cluster.sign_token(
            dict(claims, **{"kubernetes.io": dict(claims["kubernetes.io"], serviceaccount={
                "name": "never-was", "uid": "0000"})})), False),
        "garbage": ("not-a-token", False),
    }


def test_every_kind_of_token_has_the_identity_token_review_gives(local_cluster, kube, gateway):
    authenticator = gateway.gateway.authenticator
    for name, (token, local) in tokens_of_every_kind(local_cluster, kube).items():
        sent = authenticator.sent
        want, got = reviewed(kube, token), identity_of(gateway, token)
        assert got == want, name
        assert (authenticator.sent == sent) == local, f"{name}: reviews {authenticator.sent - sent}"
    assert SERVICE_ACCOUNT_ISSUER == authenticator.local.keys.issuer


def test_new_service_account_callers_cost_no_review(kube, gateway):
    authenticator = gateway.gateway.authenticator
    access = gateway.gateway.default.access
    # tokens of one account asked in one second are the same JWT: another lifetime each
    tokens = [kube.service_account_token(NS, "reader", seconds=4000 + i) for i in range(20)]
    sent, verified = authenticator.sent, authenticator.verified
    for token in tokens:
        response = httpx.get(gateway.url + PODS, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200, response.text
    assert authenticator.sent == sent and authenticator.verified == verified + 20
    assert access is not None


def _refused_within(url: str, token: str, limit: float) -> float:
    began = time.monotonic()
    while httpx.get(url + PODS, headers={"Authorization": f"Bearer {token}"}).status_code != 401:
        assert time.monotonic() - began < limit, f"still authenticated after {limit} s"
        time.sleep(0.01)
    return time.monotonic() - began


@pytest.mark.parametrize("deleted", ["pod", "account"])
def test_a_deleted_pod_or_account_refuses_its_token_at_once_and_ends_its_watch(
        kube, gateway, deleted):
    account = "pod-reader" if deleted == "pod" else "doomed"
    bound = pod(kube, f"doomed-{deleted}", account)
    token = kube.service_account_token(NS, account, bound_to=bound)
    headers = {"Authorization": f"Bearer {token}"}
    wait_until(lambda: httpx.get(gateway.url + PODS, headers=headers).status_code == 200, 5)
    assert gateway.gateway.authenticator.cached_identity(Credentials(token)).bound is not None
    reader = LineReader(gateway.url + PODS + "?watch=true", headers=headers)
    try:
        reader.wait_for(lambda lines: any(f'"doomed-{deleted}"' in line for line in lines))
        began = time.monotonic()
        if deleted == "pod":
            kube.delete(f"{PODS}/{bound['metadata']['name']}")  # unscheduled: gone at once
        else:
            kube.delete(f"/api/v1/namespaces/{NS}/serviceaccounts/{account}")
        refused = _refused_within(gateway.url, token, 5)
        reader.wait_for(lambda lines: any('"code":401' in line for line in lines), timeout=5)
        ended = time.monotonic() - began
        assert reader.ended(timeout=2), "the stream should end after its 401"
    finally:
        reader.close()
    assert reviewed(kube, token) is None  # the API server refuses it too
    assert refused < 1.0 and ended < 1.0, (refused, ended)
    print(f"\n{deleted} deleted: refused after {refused * 1000:.0f} ms, watch ended after "
          f"{ended * 1000:.0f} ms")
    if deleted == "account":
        kube.service_account_token(NS, account)  # as the fixture left it


def test_a_pod_being_deleted_keeps_its_token_for_the_api_servers_minute(kube, gateway):
    bound = kube.create(PODS, {"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": "lingering", "finalizers": ["example.com/hold"]},
                               "spec": {"serviceAccountName": "reader",
                                        "containers": [{"name": "c", "image": "nginx"}]}})
    token = kube.service_account_token(NS, "reader", bound_to=bound)
    try:
        kube.delete(f"{PODS}/lingering")  # held by its finalizer: being deleted, not gone
        wait_until(lambda: (kube.get(f"{PODS}/lingering") or {})["metadata"].get(
            "deletionTimestamp"), 10)
        time.sleep(0.5)  # the gateway's informer sees the deletion time
        assert identity_of(gateway, token) == reviewed(kube, token) is not None
    finally:
        kube.patch(f"{PODS}/lingering", {"metadata": {"finalizers": None}})


def test_with_local_tokens_off_every_token_is_reviewed(local_cluster, kube):
    with running_as(local_cluster, kube, "gateway", authn_local_tokens=False) as running:
        authenticator = running.gateway.authenticator
        assert authenticator.local is None
        token = kube.service_account_token(NS, "reader")
        assert identity_of(running, token) == reviewed(kube, token)
        assert authenticator.sent == 1


def test_a_gateway_that_may_not_list_accounts_reviews_every_token_and_says_why(
        local_cluster, kube, caplog):
    with running_as(local_cluster, kube, "gateway-blind") as running:
        authenticator = running.gateway.authenticator
        wait_until(lambda: any("may not list and watch serviceaccounts" in r.getMessage()
                               for r in caplog.records), 30, message="the refusal said")
        token = kube.service_account_token(NS, "reader")
        assert identity_of(running, token) == reviewed(kube, token)
        assert authenticator.sent == 1 and not authenticator.local.deciding
        assert "[+]cluster-default-tokens ok" in httpx.get(
            running.url + "/readyz", params={"verbose": "1"}).text
