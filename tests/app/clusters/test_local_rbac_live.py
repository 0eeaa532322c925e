"""Decisions from the cluster's RBAC followed by the gateway, against the real API server.

The gateway runs as a ServiceAccount of its own, bound as the chart binds it: read what it
serves, ``system:auth-delegator``, and read RBAC. Every expected answer is the API server's:
the same request, straight to it, with the same token.
"""

from __future__ import annotations

import ssl
import statistics
import time

import httpx
import pytest

from app.kube.access import Attributes
from control_plane.kubeapi import KubeAPI
from tests.app import accounts
from tests.app.accounts import cluster_role, remove_prefixed
from tests.app.readers import LineReader
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster

NS = "local-rbac"
PREFIX = "kcg-local-rbac-"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
PODS = f"/api/v1/namespaces/{NS}/pods"
READ = ["get", "list", "watch"]




def bind(kube: KubeAPI, name: str, role: str, account: str, namespace: str | None = NS) -> str:
    """A RoleBinding in ``namespace`` (None: a ClusterRoleBinding) of ``account`` (a
    ServiceAccount of ``NS``, named without its namespace, as a RoleBinding may); its path."""
    path = f"{RBAC}/namespaces/{namespace}/rolebindings" if namespace else \
        f"{RBAC}/clusterrolebindings"
    kube.delete(f"{path}/{name}")
    subject = {"kind": "ServiceAccount", "name": account}
    if namespace != NS:
        subject["namespace"] = NS
    kube.create(path, {"apiVersion": "rbac.authorization.k8s.io/v1",
                       "kind": "RoleBinding" if namespace else "ClusterRoleBinding",
                       "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
                       "subjects": [subject],
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                   "name": role}})
    return f"{path}/{name}"


@pytest.fixture(scope="module")
def kube(local_cluster):
    kube = KubeAPI.for_cluster(local_cluster)
    kube.ensure_namespace(NS)
    kube.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"},
                       "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    cluster_role(kube, PREFIX + "read-pods", [
        {"apiGroups": [""], "resources": ["pods"], "verbs": READ}])
    cluster_role(kube, PREFIX + "gateway", [
        {"apiGroups": [""], "resources": ["pods", "namespaces"], "verbs": READ}])
    cluster_role(kube, PREFIX + "rbac-reader", [
        {"apiGroups": ["rbac.authorization.k8s.io"],
         "resources": ["roles", "clusterroles", "rolebindings", "clusterrolebindings"],
         "verbs": READ}])
    for name in ("gateway", "gateway-blind"):
        bind(kube, PREFIX + name, PREFIX + "gateway", name, None)
        bind(kube, PREFIX + name + "-delegator", "system:auth-delegator", name, None)
    bind(kube, PREFIX + "gateway-rbac", PREFIX + "rbac-reader", "gateway", None)
    yield kube
    remove_prefixed(kube, PREFIX, NS)


def running_as(local_cluster, kube: KubeAPI, account: str, **settings):
    return accounts.running_as(local_cluster, kube, NS, account, **settings)


@pytest.fixture(scope="module")
def gateway(local_cluster, kube):
    with running_as(local_cluster, kube, "gateway") as running:
        wait_until(lambda: running.gateway.default.access.rbac.deciding, 30,
                   message="the cluster's RBAC to be followed")
        yield running


def caller(kube: KubeAPI, name: str) -> str:
    return kube.service_account_token(NS, name)


def status_of(url: str, token: str, verify=True) -> int:
    return httpx.get(url + PODS, headers={"Authorization": f"Bearer {token}"}, verify=verify,
                     timeout=10).status_code


def refused_within(url: str, token: str, limit: float, verify=True) -> float:
    """Seconds until ``url`` answers 403 (polled every 10 ms), at most ``limit``."""
    began = time.monotonic()
    while status_of(url, token, verify) != 403:
        assert time.monotonic() - began < limit, f"still allowed after {limit} s"
        time.sleep(0.01)
    return time.monotonic() - began


def test_rbac_decides_with_no_review_and_a_removed_binding_is_refused_at_the_next_request(
        local_cluster, kube, gateway):
    access = gateway.gateway.default.access
    sent = access.sent
    callers = [f"reader-{i}" for i in range(20)]
    bindings = {name: bind(kube, PREFIX + name, PREFIX + "read-pods", name) for name in callers}
    tokens = {name: caller(kube, name) for name in callers}
    api = local_cluster.primary
    api_tls = ssl.create_default_context(cafile=str(api.ca_file))
    api_tls.check_hostname = False  # the serving certificate names the host differently
    listing = Attributes("list", "pods", "", "v1", NS)
    wait_until(lambda: all(access.rbac.allows(f"system:serviceaccount:{NS}:{name}", (), listing)
                           for name in callers), 5, message="the bindings to be followed")
    for name in callers:
        assert status_of(gateway.url, tokens[name]) == 200
    assert access.sent == sent, "an access RBAC allows was reviewed"
    allowed_reviews = access.sent - sent
    delays, api_delays = [], []
    for name in callers:
        kube.delete(bindings[name])
        # the API server's own RBAC follows its storage through its watch cache, as ours does
        api_delays.append(refused_within(api.url, tokens[name], 5, verify=api_tls))
        delays.append(refused_within(gateway.url, tokens[name], 1.0))
    print(f"\n20 bindings removed: the gateway refused after p50 {statistics.median(delays)*1000:.0f}"
          f" ms, at most {max(delays)*1000:.0f} ms (the API server itself: p50 "
          f"{statistics.median(api_delays)*1000:.0f} ms, at most {max(api_delays)*1000:.0f} ms); "
          f"{allowed_reviews} reviews for the 20 callers' accesses RBAC allowed, "
          f"{access.sent - sent} for the refusals (RBAC allowing nothing, the cluster asked)")


def test_a_new_binding_is_allowed_at_the_next_request(kube, gateway):
    token = caller(kube, "latecomer")
    assert status_of(gateway.url, token) == 403
    binding = bind(kube, PREFIX + "latecomer", PREFIX + "read-pods", "latecomer")
    try:
        began = time.monotonic()
        while status_of(gateway.url, token) != 200:
            assert time.monotonic() - began < 1.0, "the new binding was not in effect within 1 s"
            time.sleep(0.01)
    finally:
        kube.delete(binding)


@pytest.mark.parametrize("kind", ["watch", "sse"])
def test_open_streams_of_a_caller_who_lost_the_right_end_within_a_second(kube, gateway, kind):
    account = f"streamer-{kind}"
    binding = bind(kube, PREFIX + account, PREFIX + "read-pods", account)
    token = caller(kube, account)
    wait_until(lambda: status_of(gateway.url, token) == 200, 5, message="the binding in effect")
    headers = {"Authorization": f"Bearer {token}"}
    if kind == "sse":
        headers["Accept"] = "text/event-stream"
    reader = LineReader(gateway.url + PODS + ("?watch=true" if kind == "watch" else ""),
                        headers=headers)
    try:
        reader.wait_for(lambda lines: any('"p1"' in line for line in lines), timeout=10)
        kube.delete(binding)
        began = time.monotonic()
        reader.wait_for(lambda lines: any('"code":403' in line for line in lines), timeout=5)
        took = time.monotonic() - began
        assert reader.ended(timeout=2), "the stream should end after its 403"
        last = [line for line in reader.lines if '"code":403' in line][-1]
        assert 'cannot watch resource \\"pods\\"' in last or 'cannot watch resource "pods"' in last
    finally:
        reader.close()
    assert took < 1.0, f"the {kind} stream ended {took:.2f} s after the binding was removed"
    print(f"\n{kind}: ended {took * 1000:.0f} ms after the RoleBinding was deleted")


def test_the_api_server_words_an_allow_of_its_rbac_as_the_gateway_reads_it(kube, gateway):
    """A review's allow that names the API server's RBAC, while RBAC here does not allow, is
    kept a second only (``app.auth.access_review``): the two copies a moment apart. That
    rests on the API server's wording, read here from the real one."""
    from app.auth.access_review import _RBAC_REASON

    account = "worded"
    binding = bind(kube, PREFIX + account, PREFIX + "read-pods", account)
    try:
        cluster = gateway.gateway.default
        spec = {**Attributes("list", "pods", "", "v1", NS).review_spec(),
                "user": f"system:serviceaccount:{NS}:{account}",
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NS}",
                           "system:authenticated"]}
        status = wait_until(lambda: (lambda s: s if s.get("allowed") else None)(
            cluster.reviewer.review_access(spec)), 5, message="the binding in effect there")
        assert status["reason"].startswith(_RBAC_REASON), status
        assert f'"{PREFIX}{account}/{NS}"' in status["reason"]  # the binding that allowed it
        other = cluster.reviewer.review_access({**spec, "groups": ["system:masters"],
                                                "user": "someone"})
        assert other["allowed"] and not other.get("reason", "").startswith(_RBAC_REASON)
    finally:
        kube.delete(binding)


def test_what_rbac_does_not_allow_is_asked_of_the_cluster_in_its_words(local_cluster, kube, gateway):
    access = gateway.gateway.default.access
    sent = access.sent
    token = caller(kube, "stranger")
    through = httpx.get(gateway.url + PODS, headers={"Authorization": f"Bearer {token}"})
    api_tls = ssl.create_default_context(cafile=str(local_cluster.primary.ca_file))
    api_tls.check_hostname = False
    direct = httpx.get(local_cluster.primary.url + PODS, headers={"Authorization": f"Bearer {token}"},
                       verify=api_tls)
    assert through.status_code == direct.status_code == 403
    assert through.json()["message"] == direct.json()["message"]
    assert access.sent == sent + 1  # other authorizers may allow: asked, once


def test_a_gateway_that_may_not_read_rbac_asks_the_cluster_for_every_access(local_cluster, kube):
    account = "blind-reader"
    binding = bind(kube, PREFIX + account, PREFIX + "read-pods", account)
    token = caller(kube, account)
    try:
        with running_as(local_cluster, kube, "gateway-blind", sync_timeout=2.0) as running:
            cluster = running.gateway.default
            wait_until(lambda: httpx.get(running.url + "/readyz").status_code == 200, 10,
                       message="readiness not to wait for RBAC it may not read")
            assert status_of(running.url, token) == 200
            assert not cluster.access.rbac.deciding and cluster.access.sent >= 1
            kube.delete(binding)  # asked of the cluster: kept for the allow TTL, as before
    finally:
        kube.delete(binding)


def test_rbac_is_not_followed_with_local_rbac_false(local_cluster, kube):
    with running_as(local_cluster, kube, "gateway", authz_local_rbac="false") as running:
        cluster = running.gateway.default
        assert cluster.local_rbac.state.startswith("off: ")
        time.sleep(0.5)
        assert len(cluster.access.rbac) == 0 and not cluster.access.rbac.deciding
