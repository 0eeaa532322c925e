"""Per-caller authorization against the real API server, with RBAC on.

Every expected answer is the API server's own: the same request, sent
straight to it with the same token (and the same impersonation headers).
The gateway runs as a ServiceAccount of its own with only what it needs —
get/list/watch on what it serves, and ``system:auth-delegator`` — never as
admin.
"""

from __future__ import annotations

import json
import logging
import ssl
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from control_plane.certs import self_signed_cert
from control_plane.cluster import User
from control_plane.kubeapi import KubeAPI, widget_crd
from tests.app.conftest import run_gateway
from tests.app.readers import LineReader
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster

NAMESPACES = ("authz-a", "authz-b", "authz-c")
IDS_NS = "authz-ids"
GROUP = "authz.example.com"
RESOURCES = {  # name: (API path prefix, resource, group)
    "pods": ("/api/v1", "pods", ""),
    "configmaps": ("/api/v1", "configmaps", ""),
    "deployments": ("/apis/apps/v1", "deployments", "apps"),
    "gadgets": (f"/apis/{GROUP}/v1", "gadgets", GROUP),
}
READ = ["get", "list", "watch"]
PREFIX = "kcg-authz-"  # cluster-scoped objects of this module


def rule(resource: str, verbs=READ, names=None) -> dict:
    _, plural, group = RESOURCES[resource]
    out = {"apiGroups": [group], "resources": [plural], "verbs": verbs}
    if names:
        out["resourceNames"] = names
    return out


def sa_subject(name: str) -> dict:
    return {"kind": "ServiceAccount", "name": name, "namespace": IDS_NS}


def cluster_role(kube: KubeAPI, name: str, rules: list[dict]) -> None:
    path = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
    kube.delete(f"{path}/{name}")
    kube.create(path, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                       "metadata": {"name": name}, "rules": rules})


def bind(kube: KubeAPI, name: str, role: str, subjects: list[dict], namespace: str | None = None,
         role_kind: str = "ClusterRole") -> str:
    """A RoleBinding in ``namespace`` (or a ClusterRoleBinding); returns its path."""
    base = "/apis/rbac.authorization.k8s.io/v1"
    kind = "RoleBinding" if namespace else "ClusterRoleBinding"
    path = (f"{base}/namespaces/{namespace}/rolebindings" if namespace
            else f"{base}/clusterrolebindings")
    kube.delete(f"{path}/{name}")
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    kube.create(path, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
                       "metadata": meta, "subjects": subjects,
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                                   "name": role}})
    return f"{path}/{name}"


class World:
    """The module's cluster: namespaces, objects, identities and the gateway's own account."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.kube = KubeAPI.for_cluster(cluster)
        self.tls = ssl.create_default_context(cafile=str(cluster.primary.ca_file))
        self.tls.check_hostname = False  # the serving certificate names the host differently
        self.api = cluster.primary.url
        self.tokens: dict[str, str] = {}

    def build(self) -> World:
        kube = self.kube
        kube.create_crd(widget_crd(GROUP, "gadgets", "Gadget"))
        for ns in (*NAMESPACES, IDS_NS):
            kube.ensure_namespace(ns)
        for ns in NAMESPACES:
            for i in (1, 2):
                kube.create(f"/api/v1/namespaces/{ns}/pods", {
                    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
                kube.create(f"/api/v1/namespaces/{ns}/configmaps", {
                    "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm{i}"},
                    "data": {"k": ns}})
                kube.create(f"/apis/{GROUP}/v1/namespaces/{ns}/gadgets", {
                    "apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": {"name": f"g{i}"},
                    "spec": {"size": i}})
            kube.create(f"/apis/apps/v1/namespaces/{ns}/deployments", {
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d1"},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d1"}},
                         "template": {"metadata": {"labels": {"app": "d1"}},
                                      "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
        every = [rule(r) for r in RESOURCES]
        cluster_role(kube, PREFIX + "read-all", every)
        cluster_role(kube, PREFIX + "read-pods", [rule("pods")])
        cluster_role(kube, PREFIX + "read-cm-gadgets", [rule("configmaps"), rule("gadgets")])
        cluster_role(kube, PREFIX + "get-pods", [rule("pods", ["get"])])
        # namespace-only: everything, in authz-a only
        bind(kube, "ns-reader", PREFIX + "read-all", [sa_subject("ns-reader")], "authz-a")
        # cluster-wide read of everything
        bind(kube, PREFIX + "cluster-reader", PREFIX + "read-all", [sa_subject("cluster-reader")])
        # one resource only, cluster-wide
        bind(kube, PREFIX + "pod-reader", PREFIX + "read-pods", [sa_subject("pod-reader")])
        # a group binding (alice is in "developers"): two resources in two namespaces,
        # and get-only pods in a third
        developers = [{"kind": "Group", "name": "developers",
                       "apiGroup": "rbac.authorization.k8s.io"}]
        for ns in ("authz-b", "authz-c"):
            bind(kube, "developers", PREFIX + "read-cm-gadgets", developers, ns)
        bind(kube, "developers-get-pods", PREFIX + "get-pods", developers, "authz-a")
        # the gateway itself: read what it serves, plus token and access reviews
        cluster_role(kube, PREFIX + "gateway", every + [
            {"apiGroups": [""], "resources": ["namespaces"], "verbs": READ}])
        bind(kube, PREFIX + "gateway", PREFIX + "gateway", [sa_subject("gateway")])
        bind(kube, PREFIX + "gateway-delegator", "system:auth-delegator", [sa_subject("gateway")])
        # as the chart binds it: the client CAs the API server trusts, to check certificates by
        bind(kube, PREFIX + "gateway-authentication-reader",
             "extension-apiserver-authentication-reader", [sa_subject("gateway")], "kube-system",
             role_kind="Role")
        # carol, known by a client certificate only: everything, in authz-a only
        bind(kube, "carol", PREFIX + "read-all",
             [{"kind": "User", "name": "carol", "apiGroup": "rbac.authorization.k8s.io"}], "authz-a")
        for name in ("ns-reader", "cluster-reader", "pod-reader", "nobody", "gateway",
                     "impersonator", "revokee"):
            self.tokens[name] = kube.service_account_token(IDS_NS, name)
        self.tokens["alice"] = self.cluster.user.token
        cluster_role(kube, PREFIX + "impersonate-alice", [
            {"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"],
             "resourceNames": ["alice"]},
            {"apiGroups": [""], "resources": ["groups"], "verbs": ["impersonate"],
             "resourceNames": ["developers"]}])
        bind(kube, PREFIX + "impersonator", PREFIX + "impersonate-alice", [sa_subject("impersonator")])
        return self

    def teardown(self) -> None:
        base = "/apis/rbac.authorization.k8s.io/v1"
        for kind in ("clusterrolebindings", "clusterroles"):
            for item in self.kube.get(f"{base}/{kind}")["items"]:
                if item["metadata"]["name"].startswith(PREFIX):
                    self.kube.delete(f"{base}/{kind}/{item['metadata']['name']}")

    def direct(self, token: str | None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.api, verify=self.tls, headers=headers, timeout=30)


@pytest.fixture(scope="module")
def world(local_cluster):
    built = World(local_cluster).build()
    yield built
    built.teardown()


@pytest.fixture(scope="module")
def gateway(local_cluster, world, tmp_path_factory):  # the module's own: authorizing, as its own account
    """Over HTTPS, as callers' tokens should travel (kubectl sends none over plain HTTP)."""
    gateway_user = User(f"system:serviceaccount:{IDS_NS}:gateway", world.tokens["gateway"])
    cert, key = self_signed_cert(tmp_path_factory.mktemp("tls"))
    with run_gateway(local_cluster, user=gateway_user, authz="kubernetes", authz_cache_ttl=2.0,
                     authz_deny_cache_ttl=1.0, access_log=True, tls_cert_file=str(cert),
                     tls_private_key_file=str(key)) as running:
        running.ca_file = str(cert)
        running.tls = ssl.create_default_context(cafile=str(cert))
        yield running


def gateway_client(gateway, token: str | None, headers: dict | None = None) -> httpx.Client:
    merged = dict(headers or {})
    if token:
        merged["Authorization"] = f"Bearer {token}"
    return httpx.Client(base_url=gateway.url, headers=merged, timeout=30, verify=gateway.tls)


# -- the matrix ----------------------------------------------------------------------------

IDENTITIES = ("ns-reader", "cluster-reader", "pod-reader", "alice", "nobody")


def collection(resource: str, namespace: str | None) -> str:
    prefix, plural, _ = RESOURCES[resource]
    return f"{prefix}/namespaces/{namespace}/{plural}" if namespace else f"{prefix}/{plural}"


def first_name(resource: str) -> str:
    return {"pods": "p1", "configmaps": "cm1", "deployments": "d1", "gadgets": "g1"}[resource]


def names(items: list[dict]) -> list[str]:
    return sorted(f"{o['metadata'].get('namespace')}/{o['metadata']['name']}" for o in items)


def read_watch(client: httpx.Client, path: str, expected: set[str], sse: bool = False):
    """(status, names of the initial objects) of a watch or event stream, then close it."""
    headers = {"Accept": "text/event-stream"} if sse else {}
    params = {} if sse else {"watch": "true", "timeoutSeconds": "5"}
    seen: set[str] = set()
    with client.stream("GET", path, params=params, headers=headers,
                       timeout=httpx.Timeout(30, read=8)) as response:
        if response.status_code != 200:
            response.read()
            return response.status_code, response.json()
        event = ""
        for line in response.iter_lines():
            if sse:
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "ADDED":
                    obj = json.loads(line[6:])
                    seen.add(f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}")
                elif line.startswith("data: ") and event in ("SYNCED", "ERROR"):
                    break
            elif line.strip():
                got = json.loads(line)
                if got["type"] == "ERROR":
                    return 200, got["object"]
                obj = got["object"]
                seen.add(f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}")
            if not sse and seen >= expected:
                break
    return 200, sorted(seen)


def cells():
    for who in IDENTITIES:
        for resource in RESOURCES:
            for ns in NAMESPACES:
                for op in ("list", "get", "watch", "sse"):
                    yield who, resource, ns, op
            for op in ("list", "watch"):
                yield who, resource, None, op


def answer(client: httpx.Client, who, resource, ns, op, expected_names, sse=False):
    """(status, what to compare) for one cell."""
    path = collection(resource, ns)
    if op == "get":
        response = client.get(f"{path}/{first_name(resource)}")
        body = response.json()
        if response.status_code == 200:
            return 200, body["metadata"]["uid"]
        return response.status_code, body.get("message")
    if op == "list":
        response = client.get(path)
        body = response.json()
        if response.status_code == 200:
            return 200, names(body["items"])
        return response.status_code, body.get("message")
    status, got = read_watch(client, path, expected_names, sse=sse)
    return status, (got if status == 200 and isinstance(got, list) else
                    got.get("message") if isinstance(got, dict) else got)


def test_every_cell_of_the_rbac_matrix_agrees_with_the_api_server(world, gateway):
    admin = world.direct(world.cluster.admin.token)
    expected_names = {}
    for resource in RESOURCES:
        for ns in (*NAMESPACES, None):
            expected_names[resource, ns] = set(names(admin.get(collection(resource, ns)).json()["items"]))
    admin.close()

    def check(cell):
        who, resource, ns, op = cell
        token = world.tokens[who]
        with world.direct(token) as direct, gateway_client(gateway, token) as through:
            want = answer(direct, who, resource, ns, "watch" if op == "sse" else op,
                          expected_names[resource, ns])
            got = answer(through, who, resource, ns, op, expected_names[resource, ns],
                         sse=op == "sse")
        return cell, want, got

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(check, list(cells())))
    mismatches = [(cell, want, got) for cell, want, got in results if want != got]
    allowed = sum(1 for _, want, _ in results if want[0] == 200)
    print(f"\nRBAC matrix: {len(results)} cells ({allowed} allowed, {len(results) - allowed} "
          f"denied), {len(mismatches)} mismatches")
    assert len(results) == len(IDENTITIES) * len(RESOURCES) * (len(NAMESPACES) * 4 + 2)
    assert 0 < allowed < len(results)
    assert not mismatches, "\n".join(f"{c}: API server {w!r}, gateway {g!r}"
                                     for c, w, g in mismatches[:20])


# -- authentication -------------------------------------------------------------------------

def expiring_token(world, expires_at: float) -> str:
    """A genuine token of cluster-reader (signed with the cluster's key) expiring at ``expires_at``."""
    sa = world.kube.get(f"/api/v1/namespaces/{IDS_NS}/serviceaccounts/cluster-reader")
    claims = world.cluster.service_account_claims(IDS_NS, "cluster-reader", sa["metadata"]["uid"],
                                                  expires_at)
    return world.cluster.sign_token(claims)


UNAUTHORIZED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


def test_a_request_without_a_token_is_a_401(gateway):
    """The API server would serve it as system:anonymous; the gateway serves no anonymous reads."""
    with gateway_client(gateway, None) as anonymous:
        got = anonymous.get(collection("pods", "authz-a"))
    assert got.status_code == 401 and got.json() == UNAUTHORIZED


@pytest.mark.parametrize("token", ["garbage", "a.b.c", "expired"])
def test_a_rejected_or_expired_token_is_a_401_as_from_the_api_server(world, gateway, token):
    if token == "expired":  # beyond the API server's minute of leeway
        token = expiring_token(world, time.time() - 300)
    path = collection("pods", "authz-a")
    with world.direct(token) as direct, gateway_client(gateway, token) as through:
        want = direct.get(path)
        got = through.get(path)
    assert want.status_code == got.status_code == 401
    assert got.json() == want.json() == UNAUTHORIZED


def test_a_cached_review_never_outlives_the_token(world, gateway):
    """Reviews are kept two minutes here, but a token's never past its ``exp``.

    (The API server itself accepts a token for a minute of clock leeway after
    ``exp``, so the proof is the new review, not a 401.)
    """
    tokens = gateway.gateway.authenticator.tokens
    expires_at = int(time.time()) + 4
    token = expiring_token(world, expires_at)  # valid now, for a few seconds
    with gateway_client(gateway, token) as through:
        misses = tokens.misses
        assert through.get(collection("pods", "authz-a")).status_code == 200
        assert through.get(collection("pods", "authz-b")).status_code == 200
        assert tokens.misses == misses + 1  # reviewed once, then cached
        time.sleep(max(0.0, expires_at + 0.2 - time.time()))
        assert through.get(collection("pods", "authz-a")).status_code == 200
        assert tokens.misses == misses + 2  # the expiry ended the cached review


def test_discovery_and_version_need_a_token_and_probes_do_not(world, gateway):
    nobody = world.tokens["nobody"]
    with gateway_client(gateway, None) as anonymous:
        for path in ("/api", "/apis", "/api/v1", f"/apis/{GROUP}/v1", "/version", "/metrics"):
            assert anonymous.get(path).status_code == 401, path
        for path in ("/healthz", "/livez", "/readyz"):
            assert anonymous.get(path).status_code == 200, path
    with world.direct(nobody) as direct, gateway_client(gateway, nobody) as through:
        for path in ("/api", "/apis", "/api/v1", f"/apis/{GROUP}/v1", "/version"):
            assert direct.get(path).status_code == through.get(path).status_code == 200, path
        # /metrics is the non-resource URL "get /metrics": nobody may not
        want, got = direct.get("/metrics"), through.get("/metrics")
        assert want.status_code == got.status_code == 403
        assert got.json()["message"] == want.json()["message"] == (
            f'forbidden: User "system:serviceaccount:{IDS_NS}:nobody" cannot get path "/metrics"')


# -- impersonation --------------------------------------------------------------------------

@pytest.mark.parametrize("headers", [
    {"Impersonate-User": "alice"},
    {"Impersonate-User": "alice", "Impersonate-Group": "developers"},
    {"Impersonate-User": "bob"},  # not allowed: only alice
    {"Impersonate-User": "alice", "Impersonate-Group": "system:masters"},  # group not allowed
    {"Impersonate-Group": "developers"},  # no user: 400
], ids=["user", "user+group", "other-user", "other-group", "group-only"])
def test_impersonation_is_allowed_and_refused_as_by_the_api_server(world, gateway, headers):
    token = world.tokens["impersonator"]
    for resource, ns in (("configmaps", "authz-b"), ("pods", "authz-a"), ("configmaps", "authz-a")):
        path = collection(resource, ns)
        with world.direct(token) as direct, gateway_client(gateway, token) as through:
            want = direct.get(path, headers=headers)
            got = through.get(path, headers=headers)
        if "Impersonate-User" not in headers:
            # a 400 from the gateway; the API server (1.20) answers a plain-text 500 with the
            # same words
            assert got.status_code == 400 and want.status_code >= 400
            assert "without impersonating a user" in want.text
            assert got.json()["message"] == ("requested Impersonate-Group without impersonating a "
                                             "user: give Impersonate-User too")
            continue
        assert got.status_code == want.status_code, (path, headers, want.json(), got.json())
        if want.status_code == 200:
            assert names(got.json()["items"]) == names(want.json()["items"])
        elif want.status_code == 403:
            assert got.json()["message"] == want.json()["message"]
        else:
            raise AssertionError(want.status_code)


def test_without_impersonation_the_impersonator_reads_nothing(world, gateway):
    with gateway_client(gateway, world.tokens["impersonator"]) as through:
        assert through.get(collection("configmaps", "authz-b")).status_code == 403


# -- streams and the cache's time to live --------------------------------------------------

def can_watch(client: httpx.Client, path: str) -> bool:
    with client.stream("GET", path, params={"watch": "true"}) as response:
        return response.status_code == 200


@pytest.mark.parametrize("kind", ["watch", "sse"])
def test_a_stream_ends_with_a_403_when_its_right_is_revoked(world, gateway, kind):
    binding = bind(world.kube, f"revokee-{kind}", PREFIX + "read-all", [sa_subject("revokee")],
                   "authz-c")
    token = world.tokens["revokee"]
    path = collection("configmaps", "authz-c")
    with gateway_client(gateway, token) as through:
        wait_until(lambda: can_watch(through, path), 10, message="the new binding to take effect")
        headers = {"Authorization": f"Bearer {token}"}
        if kind == "sse":
            headers["Accept"] = "text/event-stream"
        target = f"{path}?watch=true" if kind == "watch" else path
        reader = LineReader(gateway.url + target, headers=headers, verify=gateway.tls)
        try:
            reader.wait_for(lambda lines: any("cm2" in line for line in lines), timeout=10)
            assert reader.status == 200
            world.kube.delete(binding)
            started = time.monotonic()
            reader.wait_for(lambda lines: any('"code":403' in line for line in lines), timeout=15)
            took = time.monotonic() - started
            assert reader.ended(timeout=5), "the stream should end after the 403"
            last = [line for line in reader.lines if '"code":403' in line][-1]
            assert 'cannot watch resource "configmaps"' in last.replace('\\"', '"'), last
        finally:
            reader.close()
    # allowed decisions are kept 2 s here: the stream learns within that (plus a review)
    assert took < 2.0 + 3.0
    print(f"\n{kind} ended {took:.2f} s after the RoleBinding was deleted")


def test_a_new_binding_takes_effect_within_the_deny_ttl(world, gateway):
    token = world.tokens["revokee"]
    path = collection("gadgets", "authz-b")
    with gateway_client(gateway, token) as through:
        assert through.get(path).status_code == 403
        binding = bind(world.kube, "revokee-late", PREFIX + "read-all", [sa_subject("revokee")],
                       "authz-b")
        try:
            started = time.monotonic()
            wait_until(lambda: through.get(path).status_code == 200, 10,
                       message="the binding to take effect through the gateway")
            took = time.monotonic() - started
        finally:
            world.kube.delete(binding)
    assert took < 1.0 + 2.0  # the denial is kept 1 s here


def test_a_list_or_watch_narrowed_to_one_name_is_authorized_for_that_name(world, gateway):
    """As the API server's request info: ``fieldSelector=metadata.name=X`` on a list or watch
    asks for the name ``X``, so a rule with ``resourceNames`` allows it. Before, the gateway
    asked without the name and refused what the cluster allows."""
    cluster_role(world.kube, PREFIX + "read-p1", [rule("pods", READ, names=["p1"])])
    binding = bind(world.kube, "one-pod", PREFIX + "read-p1", [sa_subject("one-pod")], "authz-a")
    token = world.kube.service_account_token(IDS_NS, "one-pod")
    path = collection("pods", "authz-a")
    asked = {"one": {"fieldSelector": "metadata.name=p1"},
             "the same with ==": {"fieldSelector": "metadata.name==p1"},
             "and its namespace": {"fieldSelector": "metadata.name=p1,metadata.namespace=authz-a"},
             "another": {"fieldSelector": "metadata.name=p2"},
             "all": {},
             "all but it": {"fieldSelector": "metadata.name!=p2"},
             "a watch of one": {"fieldSelector": "metadata.name=p1", "watch": "true",
                                "timeoutSeconds": "1"}}
    try:
        with world.direct(token) as direct, gateway_client(gateway, token) as through:
            for what, params in asked.items():
                theirs, ours = direct.get(path, params=params), through.get(path, params=params)
                assert ours.status_code == theirs.status_code, (what, ours.text, theirs.text)
                if theirs.status_code == 403:
                    assert ours.json()["message"] == theirs.json()["message"], what
                elif "watch" not in params:
                    assert names(ours.json()["items"]) == names(theirs.json()["items"]), what
            statuses = {what: direct.get(path, params=params).status_code
                        for what, params in asked.items()}
        assert statuses == {"one": 200, "the same with ==": 200, "and its namespace": 200,
                            "another": 403, "all": 403, "all but it": 403,
                            "a watch of one": 200}
    finally:
        world.kube.delete(binding)
        world.kube.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{PREFIX}read-p1")


# -- the access log and real clients ---------------------------------------------------------

def test_each_request_writes_one_access_line(world, gateway):
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    logger = logging.getLogger("kube-cache-gateway.access")
    handler = Collect()
    logger.addHandler(handler)
    try:
        marker = uuid.uuid4().hex
        with gateway_client(gateway, world.tokens["ns-reader"]) as through:
            assert through.get(collection("pods", "authz-a"), params={"labelSelector": f"m!={marker}"}).status_code == 200
            assert through.get(collection("pods", "authz-b"), params={"labelSelector": f"m!={marker}"}).status_code == 403
    finally:
        logger.removeHandler(handler)
    mine = [json.loads(line) for line in lines if marker in line]
    assert len(mine) == 2
    allowed, denied = mine
    user = f"system:serviceaccount:{IDS_NS}:ns-reader"
    assert allowed["user"] == denied["user"] == user
    assert allowed["decision"] == "allowed" and allowed["status"] == 200
    assert allowed["verb"] == "list" and allowed["resource"] == "pods"
    assert allowed["namespace"] == "authz-a"
    assert denied["decision"] == "forbidden" and denied["status"] == 403
    assert "cannot list resource" in denied["reason"]


def test_kubectl_reads_through_the_gateway_with_its_own_token(world, gateway, tmp_path,
                                                              kubectl_version):
    from control_plane.client_tools import kubectl

    token = world.tokens["ns-reader"]
    base = [str(kubectl(kubectl_version)), f"--server={gateway.url}", f"--token={token}", "--request-timeout=20s",
            f"--certificate-authority={gateway.ca_file}", f"--cache-dir={tmp_path}"]
    ok = subprocess.run([*base, "get", "pods", "-n", "authz-a", "-o", "name"],
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.split() == ["pod/p1", "pod/p2"]
    refused = subprocess.run([*base, "get", "pods", "-A"], capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    assert 'cannot list resource "pods" in API group "" at the cluster scope' in refused.stderr


def test_kubectl_with_a_certificate_kubeconfig_prints_what_the_api_server_prints(
        local_cluster, world, gateway, tmp_path):
    """kind's and kubeadm's admin kubeconfigs hold a certificate, not a token: through the
    gateway they got 401 for everything. Now kubectl 1.35 with kubeadm's admin (CN
    kubernetes-admin, O system:masters) and with a user bound in one namespace prints what
    the API server prints, its refusals included; the CAs are the ones the API server's
    ConfigMap names (no --client-ca-file given). A certificate of another CA reads nothing:
    401 from both, which kubectl prints alike."""
    from control_plane.certs import certificate_authority
    from control_plane.client_tools import kubectl

    binary = str(kubectl("1.35"))
    other_ca = certificate_authority(tmp_path / "other", "other-ca")

    def both(user: str, groups: tuple[str, ...], *args: str, ca=None):
        direct = local_cluster.certificate_kubeconfig(tmp_path / f"{user}-direct.yaml", user,
                                                      groups, ca=ca)
        ours = local_cluster.certificate_kubeconfig(tmp_path / f"{user}-ours.yaml", user, groups,
                                                    server_url=gateway.url,
                                                    ca_file=Path(gateway.ca_file), ca=ca)
        return [subprocess.run([binary, "--kubeconfig", str(k), f"--cache-dir={tmp_path}/c",
                                "--request-timeout=20s", *args],
                               capture_output=True, text=True, timeout=60)
                for k in (direct, ours)]

    for args in (["get", "pods", "-A", "-o", "name"], ["get", "configmaps", "-n", "authz-b",
                                                       "-o", "name"],
                 ["get", "gadgets", "-n", "authz-c", "-o", "name"]):
        direct, ours = both("kubernetes-admin", ("system:masters",), *args)
        assert direct.returncode == ours.returncode == 0, (args, direct.stderr, ours.stderr)
        assert ours.stdout == direct.stdout and ours.stdout.strip(), args
    direct, ours = both("carol", (), "get", "pods", "-n", "authz-a", "-o", "name")
    assert direct.returncode == ours.returncode == 0, (direct.stderr, ours.stderr)
    assert ours.stdout.split() == direct.stdout.split() == ["pod/p1", "pod/p2"]
    direct, ours = both("carol", (), "get", "pods", "-A")
    assert direct.returncode != 0 and ours.returncode != 0
    said = 'User "carol" cannot list resource "pods" in API group "" at the cluster scope'
    assert said in direct.stderr and said in ours.stderr, (direct.stderr, ours.stderr)

    direct, ours = both("mallory", ("system:masters",), "get", "pods", "-A", "-o", "name",
                        ca=other_ca)
    assert direct.returncode != 0 and "Unauthorized" in direct.stderr, direct.stderr
    assert ours.returncode != 0 and ours.stdout == "", ours.stdout
    assert ours.stderr.strip().splitlines()[-1] == direct.stderr.strip().splitlines()[-1], (
        direct.stderr, ours.stderr)


# -- the gateway's own rights ------------------------------------------------------------------

@pytest.mark.parametrize("watch", [False, True])
def test_a_resource_the_gateway_may_not_list_is_a_403_naming_the_permission(world, gateway, watch):
    """Not a 503 after the sync timeout while its informer retries for ever."""
    path = "/api/v1/namespaces/authz-a/services"
    started = time.monotonic()
    with gateway_client(gateway, world.cluster.admin.token) as admin:
        got = admin.get(path, params={"watch": "true"} if watch else {})
    assert time.monotonic() - started < 5
    assert got.status_code == 403, got.text
    message = got.json()["message"]
    assert message.startswith("the gateway's own identity may not list and watch services")
    assert (f'User "system:serviceaccount:{IDS_NS}:gateway" cannot list resource "services"'
            in message)
    wait_until(lambda: not any(t.name.startswith("reflector-services") and t.is_alive()
                               for t in threading.enumerate()), 10,
               message="the refused informer to stop")


# -- cluster-wide lists for namespace-scoped users (--namespace-partitioned-lists) -----------

@pytest.fixture(scope="module")
def partitioned(local_cluster, world, gateway):
    gateway_user = User(f"system:serviceaccount:{IDS_NS}:gateway", world.tokens["gateway"])
    with run_gateway(local_cluster, user=gateway_user, authz="kubernetes", authz_cache_ttl=2.0,
                     authz_deny_cache_ttl=1.0, namespace_partitioned_lists=True,
                     tls_cert_file=gateway.settings.tls_cert_file,
                     tls_private_key_file=gateway.settings.tls_private_key_file) as running:
        running.ca_file, running.tls = gateway.ca_file, gateway.tls
        yield running


def partition_of(world, token: str, resource: str) -> tuple[int, list[str]]:
    """What a partitioned cluster-wide list should hold: the union of the namespaced lists the
    API server allows this token (403 when it allows none)."""
    every = [ns["metadata"]["name"] for ns in world.kube.get("/api/v1/namespaces")["items"]]
    found, allowed = [], 0
    with world.direct(token) as direct:
        for ns in every:
            got = direct.get(collection(resource, ns))
            if got.status_code == 200:
                allowed += 1
                found.extend(names(got.json()["items"]))
    return (200 if allowed else 403), sorted(found)


@pytest.mark.parametrize("who", ["ns-reader", "alice", "pod-reader", "nobody"])
@pytest.mark.parametrize("resource", ["pods", "configmaps", "gadgets"])
def test_a_cluster_wide_list_answers_with_the_callers_namespaces(world, gateway, partitioned,
                                                                 who, resource):
    token = world.tokens[who]
    want_status, want_names = partition_of(world, token, resource)
    path = collection(resource, None)
    with gateway_client(partitioned, token) as through:
        got = through.get(path)
        assert got.status_code == want_status, got.text
        if want_status == 200:
            assert names(got.json()["items"]) == want_names
        for sse in (False, True):
            status, seen = read_watch(through, path, set(want_names), sse=sse)
            assert status == want_status
            if status == 200:
                assert seen == want_names
    with gateway_client(gateway, token) as unpartitioned, world.direct(token) as direct:
        # without the flag, the gateway answers as the API server does
        assert unpartitioned.get(path).status_code == direct.get(path).status_code


def test_kubectl_get_all_namespaces_shows_the_partition(world, gateway, partitioned, tmp_path,
                                                        kubectl_version):
    from control_plane.client_tools import kubectl

    token = world.tokens["alice"]
    base = [str(kubectl(kubectl_version)), f"--server={partitioned.url}", f"--token={token}", "--request-timeout=20s",
            f"--certificate-authority={partitioned.ca_file}", f"--cache-dir={tmp_path}"]
    got = subprocess.run([*base, "get", "configmaps", "-A", "--no-headers",
                          "-o", "custom-columns=NS:.metadata.namespace,NAME:.metadata.name"],
                         capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    rows = sorted(tuple(line.split()) for line in got.stdout.splitlines())
    assert rows == [(ns, f"cm{i}") for ns in ("authz-b", "authz-c") for i in (1, 2)]


def test_a_partitioned_stream_ends_with_410_when_the_partition_changes(world, gateway, partitioned):
    token = world.tokens["revokee"]
    bind(world.kube, "revokee-part", PREFIX + "read-all", [sa_subject("revokee")], "authz-a")
    path = collection("deployments", None)
    reader = None
    try:
        with gateway_client(partitioned, token) as through:
            wait_until(lambda: through.get(path).status_code == 200, 10,
                       message="the partition to hold authz-a")
        reader = LineReader(f"{partitioned.url}{path}?watch=true",
                            headers={"Authorization": f"Bearer {token}"}, verify=partitioned.tls)
        reader.wait_for(lambda lines: any('"authz-a"' in line for line in lines), timeout=10)
        assert not any('"authz-b"' in line for line in reader.lines)
        bind(world.kube, "revokee-part", PREFIX + "read-all", [sa_subject("revokee")], "authz-b")
        reader.wait_for(lambda lines: any('"code":410' in line for line in lines), timeout=10)
        assert reader.ended(timeout=5)
    finally:
        if reader is not None:
            reader.close()
        for ns in ("authz-a", "authz-b"):
            world.kube.delete(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings/"
                              "revokee-part")


def test_a_new_namespace_joins_the_partition_when_it_appears(world, gateway, partitioned):
    token = world.tokens["ns-reader"]
    ns = f"authz-new-{uuid.uuid4().hex[:6]}"
    world.kube.ensure_namespace(ns)
    try:
        bind(world.kube, "ns-reader", PREFIX + "read-all", [sa_subject("ns-reader")], ns)
        world.kube.create(f"/api/v1/namespaces/{ns}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fresh"}})
        with gateway_client(partitioned, token) as through:
            wait_until(lambda: f"{ns}/fresh" in names(
                through.get(collection("configmaps", None)).json()["items"]), 10,
                message="the new namespace in the partition")
            assert names(through.get(collection("configmaps", None)).json()["items"]) == sorted(
                ["authz-a/cm1", "authz-a/cm2", f"{ns}/fresh"])
    finally:
        world.kube.delete(f"/api/v1/namespaces/{ns}")


def test_a_gateway_not_allowed_to_review_says_what_it_lacks(local_cluster, world, gateway):
    """Its own identity without system:auth-delegator: 503 naming the ClusterRole, not a 401."""
    lacking = User(f"system:serviceaccount:{IDS_NS}:nobody", world.tokens["nobody"])
    with run_gateway(local_cluster, user=lacking, authz="kubernetes") as running, \
            httpx.Client(base_url=running.url, timeout=30,
                         headers={"Authorization": f"Bearer {world.tokens['ns-reader']}"}) as client:
        got = client.get(collection("pods", "authz-a"))
    assert got.status_code == 503 and got.headers["Retry-After"] == "1"
    message = got.json()["message"]
    assert "TokenReview" in message and "system:auth-delegator" in message
