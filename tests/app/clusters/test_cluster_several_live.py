"""Three real clusters behind one gateway: each answered as its own API server answers,
each caller authorized by the RBAC of the cluster that holds the data.

Three control planes, each its own etcd and kube-apiserver (the session's, and two of
this module's), with different objects and RBAC that differs per cluster for the same
user: alice (group ``developers``) may list pods in one namespace of a, read everything
in b and nothing in c but the configmaps of one namespace, through a binding of her group
in c alone. Every expected answer is the cluster's own API server's, asked as the same
user (the admin impersonating alice and her groups): the gateway must agree cell by cell.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
import time

import httpx
import pytest
import yaml

from control_plane.cluster import LocalCluster
from control_plane.kubeapi import KubeAPI
from tests.app.conftest import RunningGateway
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster

NAMESPACES = ("team", "other")
OBJECTS = {"a": ["a-1", "a-2"], "b": ["b-1"], "c": ["c-1", "c-2", "c-3"]}
RBAC = "rbac.authorization.k8s.io"
PREFIXES = {"userPrefix": "c:", "groupPrefix": "c:"}  # how cluster c knows the callers


def _pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}}


def _bind(kube: KubeAPI, name: str, role: str, subject: dict, namespace: str | None = None) -> None:
    base = f"/apis/{RBAC}/v1"
    path = f"{base}/namespaces/{namespace}/rolebindings" if namespace else f"{base}/clusterrolebindings"
    kube.delete(f"{path}/{name}")
    kube.create(path, {"apiVersion": f"{RBAC}/v1",
                       "kind": "RoleBinding" if namespace else "ClusterRoleBinding",
                       "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
                       "subjects": [{"apiGroup": RBAC, **subject}],
                       "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role}})


def _seed(name: str, cluster: LocalCluster) -> None:
    kube = KubeAPI.for_cluster(cluster)
    for ns in NAMESPACES:
        kube.ensure_namespace(ns)
        for obj in OBJECTS[name]:
            kube.delete(f"/api/v1/namespaces/{ns}/configmaps/{obj}")
            kube.create(f"/api/v1/namespaces/{ns}/configmaps",
                        {"metadata": {"name": obj}, "data": {"cluster": name}})
            kube.delete(f"/api/v1/namespaces/{ns}/pods/{obj}")
            kube.create(f"/api/v1/namespaces/{ns}/pods", _pod(obj))
    # explicit roles: a bare API server has no controller-manager to aggregate "view"
    roles = f"/apis/{RBAC}/v1/clusterroles"
    for role, rule in (("kcg-several-read-all", {"apiGroups": ["*"], "resources": ["*"]}),
                       ("kcg-several-pods", {"apiGroups": [""], "resources": ["pods"]}),
                       ("kcg-several-configmaps", {"apiGroups": [""], "resources": ["configmaps"]})):
        kube.delete(f"{roles}/{role}")
        kube.create(roles, {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole",
                            "metadata": {"name": role},
                            "rules": [{**rule, "verbs": ["get", "list", "watch"]}]})
    alice = {"kind": "User", "name": "alice"}
    if name == "a":  # pods, in one namespace
        _bind(kube, "kcg-several-pods", "kcg-several-pods", alice, namespace="team")
    elif name == "b":  # everything
        _bind(kube, "kcg-several-all", "kcg-several-read-all", alice)
    else:  # nothing for her; her group, configmaps of one namespace — c knows her groups
        # by prefixed names (groupPrefix "c:" in the clusters file)
        _bind(kube, "kcg-several-group", "kcg-several-configmaps",
              {"kind": "Group", "name": "c:developers"}, namespace="team")
        # the admin of a is "c:admin" in c (its group system:masters, too, is prefixed)
        _bind(kube, "kcg-several-admin", "kcg-several-read-all", {"kind": "User", "name": "c:admin"})


@pytest.fixture(scope="module")
def three(local_cluster):
    """a: the session's cluster; b and c: this module's own."""
    started: list[LocalCluster] = []
    try:
        for _ in range(2):
            started.append(LocalCluster().start())
        clusters = {"a": local_cluster, "b": started[0], "c": started[1]}
        for name, cluster in clusters.items():
            _seed(name, cluster)
        yield clusters
    finally:
        for cluster in started:
            cluster.stop()


def _write_clusters(path, three, tmp, names=("a", "b", "c"), **extra) -> str:
    entries = []
    for name in names:
        kubeconfig = three[name].write_kubeconfig(tmp / f"{name}.kubeconfig", three[name].admin)
        entries.append({"name": name, "kubeconfig": str(kubeconfig), **extra.get(name, {})})
    path.write_text(yaml.safe_dump({"clusters": entries}))
    return str(path)


@pytest.fixture(scope="module")
def gateway(three, tmp_path_factory):
    """The module's gateway over a, b and c, authorizing its callers (identity: a); over
    HTTPS, as callers' tokens should travel (kubectl sends none over plain HTTP)."""
    from app.settings import Settings
    from control_plane.certs import self_signed_cert
    from control_plane.cluster import free_port

    tmp = tmp_path_factory.mktemp("several")
    path = _write_clusters(tmp / "clusters.yaml", three, tmp, c=PREFIXES)
    cert, key = self_signed_cert(tmp / "tls")
    settings = Settings(port=free_port(), clusters=path, authz="kubernetes", sync_timeout=30.0,
                        authz_deny_cache_ttl=1.0, tls_cert_file=str(cert),
                        tls_private_key_file=str(key))
    running = RunningGateway(settings).start()
    running.ca_file = str(cert)
    running.tls = ssl.create_default_context(cafile=str(cert))
    try:
        yield running
    finally:
        running.stop()


def _client(gateway, token: str) -> httpx.Client:
    return httpx.Client(base_url=gateway.url, headers={"Authorization": f"Bearer {token}"},
                        timeout=30, verify=gateway.tls)


def _as_alice(cluster: LocalCluster, path: str, prefix: str = "") -> int:
    """What ``cluster``'s own API server answers alice (and her groups) for ``path``, her
    names as that cluster knows them (``prefix``)."""
    server = cluster.primary
    headers = {"Authorization": f"Bearer {cluster.admin.token}",
               "Impersonate-User": f"{prefix}alice", "Impersonate-Group": f"{prefix}developers"}
    with httpx.Client(verify=ssl.create_default_context(cafile=str(server.ca_file)),
                      timeout=30) as http:
        # two groups: httpx sends a list of tuples as repeated headers
        answer = http.get(server.url + path, headers=[*headers.items(),
                                                     ("Impersonate-Group", "system:authenticated")])
    return answer.status_code


def _names(answer: httpx.Response) -> list[str]:
    assert answer.status_code == 200, answer.text
    return [i["metadata"]["name"] for i in answer.json()["items"]]


def test_every_cluster_answers_as_its_own_api_server(three, gateway):
    with _client(gateway, three["a"].admin.token) as http:  # identity: cluster a
        for name, cluster in three.items():
            direct = KubeAPI.for_cluster(cluster)
            for ns in NAMESPACES:
                path = f"/api/v1/namespaces/{ns}/configmaps"
                want = [o["metadata"]["name"] for o in direct.get(path)["items"]]
                assert _names(http.get(f"/clusters/{name}{path}")) == want == OBJECTS[name]
            got = http.get(f"/clusters/{name}/api/v1/namespaces/team/configmaps/{OBJECTS[name][0]}")
            assert got.json()["data"] == {"cluster": name}
            version = http.get(f"/clusters/{name}/version").json()
            assert version["gitVersion"] == direct.get("/version")["gitVersion"]
        assert _names(http.get("/api/v1/namespaces/team/configmaps")) == OBJECTS["a"], \
            "the plain paths: the first cluster, the default"
        listed = http.get("/clusters").json()["items"]
        assert [c["name"] for c in listed] == ["a", "b", "c"]
        for item in listed:
            assert "server" not in json.dumps(item) and "127.0.0.1" not in json.dumps(item)


def test_the_rbac_matrix_of_each_cluster_is_its_own(three, gateway):
    """Every cell (list, get, watch): alice through the gateway (her token reviewed by a)
    against the same request to that cluster's API server as alice — as that cluster knows
    her: c by the prefixed names of the clusters file. 0 mismatches."""
    token = three["a"].user.token  # alice, of the identity cluster
    cells, mismatches = 0, []
    with _client(gateway, token) as http:
        for name, cluster in three.items():
            for resource in ("pods", "configmaps"):
                collections = [f"/api/v1/{resource}",
                               *(f"/api/v1/namespaces/{ns}/{resource}" for ns in NAMESPACES)]
                paths = [*collections, f"/api/v1/namespaces/team/{resource}/{OBJECTS[name][0]}",
                         *(f"{c}?watch=1&timeoutSeconds=1" for c in collections)]
                for path in paths:
                    want = _as_alice(cluster, path, "c:" if name == "c" else "")
                    got = http.get(f"/clusters/{name}{path}")
                    cells += 1
                    if got.status_code != want:
                        mismatches.append((name, path, want, got.status_code, got.text[:200]))
                    elif want == 403:
                        body = got.json()
                        user = "c:alice" if name == "c" else "alice"
                        assert body["reason"] == "Forbidden" and f'User "{user}"' in body["message"]
    print(f"RBAC matrix: {cells} cells, {len(mismatches)} mismatches")
    assert cells == 3 * 2 * 7 and not mismatches, mismatches
    # the matrix is not trivial: each cluster allows and refuses something
    assert _as_alice(three["a"], "/api/v1/namespaces/team/pods") == 200
    assert _as_alice(three["a"], "/api/v1/namespaces/other/pods") == 403
    assert _as_alice(three["b"], "/api/v1/pods") == 200
    assert _as_alice(three["c"], "/api/v1/namespaces/team/configmaps", "c:") == 200
    assert _as_alice(three["c"], "/api/v1/namespaces/team/configmaps") == 403, \
        "c binds the prefixed group only: without the prefix, nothing"
    assert _as_alice(three["c"], "/api/v1/namespaces/team/pods", "c:") == 403


def test_a_stranger_is_401_before_any_cluster_is_named(gateway):
    for path in ("/clusters", "/clusters/b/api/v1/pods", "/clusters/zz/api/v1/pods"):
        with _client(gateway, "nope") as http:
            answer = http.get(path)
        assert answer.status_code == 401, path


def test_kubectl_against_a_cluster_path_prints_what_it_prints_against_that_cluster(
        three, gateway, tmp_path, kubectl_version):
    from control_plane.client_tools import kubectl
    from tests.app.http.test_resources_clients import normalise

    binary = str(kubectl(kubectl_version))

    b = three["b"]
    direct_config = b.write_kubeconfig(tmp_path / "b", b.admin)
    through = tmp_path / "through"
    through.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "gw",
        "clusters": [{"name": "gw", "cluster": {"server": f"{gateway.url}/clusters/b",
                                                "certificate-authority": gateway.ca_file}}],
        # the caller's token is reviewed by the identity cluster, a
        "users": [{"name": "u", "user": {"token": three["a"].admin.token}}],
        "contexts": [{"name": "gw", "context": {"cluster": "gw", "user": "u"}}]}))
    for args in (["get", "configmaps", "-A"], ["get", "pods", "-n", "team", "-o", "wide"],
                 ["get", "configmap", "b-1", "-n", "other", "-o", "json"],
                 ["explain", "pods.spec.containers.image"], ["api-resources"]):
        direct = subprocess.run([binary, "--kubeconfig", str(direct_config), *args],
                                capture_output=True, text=True, timeout=60)
        ours = subprocess.run([binary, "--kubeconfig", str(through), *args],
                              capture_output=True, text=True, timeout=60)
        assert direct.returncode == 0 and ours.returncode == 0, (direct.stderr, ours.stderr)
        if "json" in args:  # managedFields: dropped by the gateway, printed by kubectl 1.20
            mine, theirs = json.loads(ours.stdout), json.loads(direct.stdout)
            theirs["metadata"].pop("managedFields", None)
            assert mine == theirs
        else:
            assert normalise(ours.stdout) == normalise(direct.stdout)


def test_the_official_client_with_a_cluster_server_url(three, gateway):
    from kubernetes import client as k8s

    config = k8s.Configuration()
    config.host = f"{gateway.url}/clusters/c"
    config.api_key = {"authorization": f"Bearer {three['a'].admin.token}"}
    config.ssl_ca_cert = gateway.ca_file
    with k8s.ApiClient(config) as api:
        names = [m.metadata.name for m in
                 k8s.CoreV1Api(api).list_namespaced_config_map("other").items]
    assert names == OBJECTS["c"]


def test_a_cluster_added_and_removed_live_and_sighup(three, tmp_path):
    """Through ``serve`` itself: a file of a alone, then a and b (b's objects served), then
    a alone again (b's open watch ends with a 404 naming it), and SIGHUP reads it again."""
    import os
    import signal
    import sys

    from control_plane.cluster import free_port

    path = tmp_path / "clusters.yaml"
    _write_clusters(path, three, tmp_path, names=("a",))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--clusters", str(path),
                             "--port", str(port)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _get(url, "/readyz") == 200, 30, message="serving")
        assert _get(url, "/clusters/b/api/v1/namespaces/team/configmaps") == 404
        _write_clusters(path, three, tmp_path, names=("a", "b"))
        wait_until(lambda: _get(url, "/clusters/b/api/v1/namespaces/team/configmaps") == 200, 30,
                   message="b served once added")
        lines: list[dict] = []
        with httpx.stream("GET", url + "/clusters/b/api/v1/namespaces/team/configmaps?watch=1",
                          timeout=60) as watch:
            reader = threading.Thread(target=lambda: lines.extend(
                json.loads(line) for line in watch.iter_lines() if line), daemon=True)
            reader.start()
            wait_until(lambda: len(lines) >= len(OBJECTS["b"]), 10, message="b's objects")
            _write_clusters(path, three, tmp_path, names=("a",))
            reader.join(30)
        assert lines[-1]["type"] == "ERROR" and lines[-1]["object"]["code"] == 404
        assert "'b'" in lines[-1]["object"]["message"]
        # the same file again, said by SIGHUP: applied, nothing changes
        os.kill(proc.pid, signal.SIGHUP)
        time.sleep(1.5)
        assert proc.poll() is None, "SIGHUP reloads; it does not end the process"
        assert _get(url, "/clusters/a/api/v1/namespaces/team/configmaps") == 200
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert "applying the clusters file (SIGHUP)" in out, out[-2000:]


def test_a_malformed_file_at_start_is_exit_2_naming_the_line(tmp_path):
    import sys

    path = tmp_path / "clusters.yaml"
    path.write_text("clusters:\n  - name: ok\n  - name: arn:aws:eks:x\n")
    out = subprocess.run([sys.executable, "-m", "app", "serve", "--clusters", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.startswith(f"error: {path}:3: cluster name 'arn:aws:eks:x' is not a DNS label")


def _get_as(url: str, headers: dict) -> int:
    try:
        return httpx.get(url, headers=headers, timeout=5).status_code
    except httpx.HTTPError:
        return 0


def _get(url: str, path: str) -> int:
    try:
        return httpx.get(url + path, timeout=5).status_code
    except httpx.HTTPError:
        return 0


def test_clusters_come_and_go_with_their_secrets_and_the_secrets_are_never_served(three, tmp_path):
    """Argo CD-shaped Secrets in the gateway's namespace of cluster a, pointing at b and c."""
    import base64

    from app.settings import Settings
    from control_plane.cluster import free_port

    a = KubeAPI.for_cluster(three["a"])
    ns = "kcg-cluster-secrets"
    a.ensure_namespace(ns)
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "namespace").write_text(ns)  # as in a pod: the gateway's own namespace

    def secret(name: str, cluster: str, labelled: bool = True) -> dict:
        target = three[cluster]
        config = {"bearerToken": target.admin.token, "tlsClientConfig": {
            "caData": base64.b64encode(target.primary.ca_file.read_bytes()).decode()}}
        data = {"name": name, "server": target.primary.url, "config": json.dumps(config)}
        return {"metadata": {"name": f"cluster-{name}", "labels": {
                    "kube-cache-gateway.io/cluster": "true" if labelled else "false"}},
                "type": "Opaque",
                "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}

    path = f"/api/v1/namespaces/{ns}/secrets"
    for name in ("lab", "edge", "ignored", "evil"):
        a.delete(f"{path}/cluster-{name}")
    a.create(path, secret("lab", "b"))
    a.create(path, secret("ignored", "c", labelled=False))
    settings = Settings(port=free_port(), kubeconfig=str(three["a"].kubeconfig),
                        serviceaccount_dir=str(account), cluster_secrets=True)
    # the gateway's own client, as serve loads it: once the first Secret's cluster (the
    # default) was connected with it, and /clusters/lab/ served a's objects
    own = three["a"].api_client()
    gw = RunningGateway(settings, api_client=own).start()
    try:
        url = gw.url
        cms = "/api/v1/namespaces/team/configmaps"
        # applied before the port served: no moment in which lab's paths answer 404
        assert _names(httpx.get(url + f"/clusters/lab{cms}")) == OBJECTS["b"]
        assert _names(httpx.get(url + cms)) == OBJECTS["b"], "the only cluster: the default"
        assert _get(url, "/clusters/ignored/api/v1") == 404, "not labelled: not a cluster"
        a.create(path, secret("edge", "c"))
        wait_until(lambda: _get(url, f"/clusters/edge{cms}") == 200, 30, message="edge added")
        assert _names(httpx.get(url + f"/clusters/edge{cms}")) == OBJECTS["c"]
        assert [c["name"] for c in httpx.get(url + "/clusters").json()["items"]] == ["edge", "lab"]
        # the Secrets themselves, through any path: refused (the policy denies secrets)
        for cluster in ("lab", "edge"):
            assert _get(url, f"/clusters/{cluster}{path}") == 403
        listing = httpx.get(url + "/clusters").text
        assert three["b"].admin.token not in listing and "127.0.0.1" not in listing
        a.delete(f"{path}/cluster-lab")
        wait_until(lambda: _get(url, f"/clusters/lab{cms}") == 404, 30, message="lab removed")
        assert _get(url, f"/clusters/edge{cms}") == 200
        # whoever may write a Secret there once made the gateway run any command
        marker = tmp_path / "ran"
        evil = secret("evil", "c")
        config = {"execProviderConfig": {"command": "sh", "args": ["-c", f"touch {marker}"],
                                         "apiVersion": "client.authentication.k8s.io/v1beta1"}}
        evil["data"]["config"] = base64.b64encode(json.dumps(config).encode()).decode()
        a.create(path, evil)
        wait_until(lambda: "evil" in {c["name"] for c in httpx.get(url + "/clusters").json()
                                      ["items"]}, 30, message="the Secret seen")
        listed = {c["name"]: c for c in httpx.get(url + "/clusters").json()["items"]}
        assert listed["evil"]["ready"] is False
        assert listed["evil"]["message"].startswith("its Secret asks for what this gateway does "
                                                    "not allow")
        assert _get(url, f"/clusters/evil{cms}") == 503
        assert not marker.exists(), "the command of a Secret never runs unless allowed"
        ready = httpx.get(url + "/readyz?verbose").text
        assert "[+]cluster-evil-connected excluded\n" in ready and "exec" not in ready, \
            "an open probe names the check, never the cause"
    finally:
        gw.stop()
        own.close()
        for name in ("lab", "edge", "ignored", "evil"):
            a.delete(f"{path}/cluster-{name}")


def test_every_worker_serves_every_cluster(three, tmp_path):
    import sys

    from control_plane.cluster import free_port

    import os
    import signal

    path = _write_clusters(tmp_path / "clusters.yaml", three, tmp_path)
    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--clusters", path,
                                 "--port", str(port), "--workers", "2"],
                                stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _get(url, "/readyz") == 200, 60, message="serving")
        seen: dict[str, set[str]] = {}
        deadline = time.monotonic() + 30
        while len(seen) < 3 or not all(len(workers) == 2 for workers in seen.values()):
            assert time.monotonic() < deadline, f"workers seen per cluster: {seen}"
            for name in ("a", "b", "c"):
                # a new connection each time: the kernel hands it to either worker
                answer = httpx.get(f"{url}/clusters/{name}/api/v1/namespaces/other/configmaps",
                                   timeout=30)
                assert answer.status_code == 200 and _names(answer) == OBJECTS[name]
                seen.setdefault(name, set()).add(answer.headers["kcg-worker"])
        metrics = httpx.get(url + "/metrics", timeout=30).text
        for name in ("a", "b", "c"):
            assert f'kcg_cluster_up{{cluster="{name}"' in metrics
        # SIGHUP to the supervisor: every worker reads the file again, none ends
        os.kill(proc.pid, signal.SIGHUP)
        wait_until(lambda: log.read_text().count("applying the clusters file (SIGHUP)") == 2, 15,
                   message="both workers told")
        assert proc.poll() is None and "restarting it" not in log.read_text()
    finally:
        proc.terminate()
        proc.wait(30)


def test_a_cluster_whose_api_server_stops_is_served_from_its_cache_and_slows_no_other(three,
                                                                                      gateway):
    """b's API server stopped: b answers from its cache with Warning and Age, a answers as
    fast as before, the gateway stays ready; b's API server back: b follows again."""
    import statistics

    b = three["b"]
    cms = "/api/v1/namespaces/team/configmaps"
    with _client(gateway, three["a"].admin.token) as http:
        assert _names(http.get(f"/clusters/b{cms}")) == OBJECTS["b"]  # loaded, and allowed

        def took(path: str) -> float:
            began = time.perf_counter()
            assert http.get(path).status_code == 200
            return time.perf_counter() - began

        before = statistics.median(took(f"/clusters/a{cms}") for _ in range(30))
        b.stop_apiserver()
        try:
            wait_until(lambda: "warning" in http.get(f"/clusters/b{cms}").headers, 30,
                       message="b's answers say they come from a cache not following")
            answer = http.get(f"/clusters/b{cms}")
            assert _names(answer) == OBJECTS["b"]
            assert answer.headers["warning"].startswith('299 - "cluster b: the cache of configmaps')
            assert int(answer.headers["age"]) >= 0
            # the merged list names b as its own path does, in the same moment (it once went
            # 20 s without a word while serving b's cached objects)
            merged = http.get(f"/clusters/*{cms}")
            assert merged.status_code == 200 and "b-1" in _names(merged)
            assert '"cluster b: the cache of configmaps has not followed' in merged.headers["warning"]
            assert int(merged.headers["age"]) >= 0
            during = statistics.median(took(f"/clusters/a{cms}") for _ in range(30))
            assert during < max(3 * before, 0.05), (before, during)
            assert "warning" not in http.get(f"/clusters/a{cms}").headers
            assert http.get("/readyz").status_code == 200, "one cluster away holds no replica"
            listed = {c["name"]: c for c in http.get("/clusters").json()["items"]}
            assert listed["b"]["ready"] is False and listed["a"]["ready"] is True
        finally:
            b.start_apiserver()
        KubeAPI.for_cluster(b).create("/api/v1/namespaces/team/configmaps",
                                      {"metadata": {"name": "b-after"}})
        try:
            wait_until(lambda: "b-after" in _names(http.get(f"/clusters/b{cms}")), 60,
                       message="b followed again once its API server was back")
            # and says so once its API server has answered a heartbeat again (every 5 s)
            wait_until(lambda: "warning" not in http.get(f"/clusters/b{cms}").headers, 15,
                       message="no Warning once b answers again")
        finally:
            KubeAPI.for_cluster(b).delete("/api/v1/namespaces/team/configmaps/b-after")


def test_merged_lists_are_the_union_of_what_the_caller_may_read_in_each_cluster(three, gateway):
    """alice, merged: exactly the clusters where her own request is allowed, in order, each
    item tagged; a cluster she may not read is left out without an error."""
    token = three["a"].user.token
    with _client(gateway, token) as http:
        for path in ("/api/v1/pods", "/api/v1/namespaces/team/pods",
                     "/api/v1/namespaces/team/configmaps", "/api/v1/namespaces/other/pods"):
            want = []
            for name in ("a", "b", "c"):
                if _as_alice(three[name], path, "c:" if name == "c" else "") == 200:
                    items = KubeAPI.for_cluster(three[name]).get(path)["items"]
                    want += [(name, i["metadata"]["namespace"], i["metadata"]["name"])
                             for i in items]
            merged = http.get(f"/clusters/*{path}")
            if not want:
                assert merged.status_code == 403, (path, merged.text)
                continue
            assert merged.status_code == 200, merged.text
            got = [(i["metadata"]["annotations"]["kube-cache-gateway.io/cluster"],
                    i["metadata"]["namespace"], i["metadata"]["name"])
                   for i in merged.json()["items"]]
            assert got == sorted(want), path


def _fresh_configmaps(three, ns: str, suffixes: list[str]) -> tuple[dict[str, KubeAPI], str]:
    """ConfigMaps ``CLUSTER-SUFFIX`` made afresh in namespace ``ns`` of each cluster; the
    clusters' clients and the namespace's ConfigMaps path."""
    kubes = {name: KubeAPI.for_cluster(c) for name, c in three.items()}
    path = f"/api/v1/namespaces/{ns}/configmaps"
    for name, kube in kubes.items():
        kube.ensure_namespace(ns)
        for suffix in suffixes:
            kube.delete(f"{path}/{name}-{suffix}")
            kube.create(path, {"metadata": {"name": f"{name}-{suffix}"}})
    return kubes, path


def test_merged_pages_of_seven_under_churn_in_all_three_return_every_lasting_object_once(
        three, gateway):
    ns = "paging"
    kubes, path = _fresh_configmaps(three, ns, [f"{i:02d}" for i in range(10)])
    lasting = {(name, ns, f"{name}-{i:02d}") for name in kubes for i in range(10) if i % 3}
    with _client(gateway, three["a"].admin.token) as http:
        wait_until(lambda: len(http.get(f"/clusters/*{path}").json()["items"]) == 30, 30,
                   message="every cluster's objects cached")
        seen: list[tuple] = []
        page = http.get(f"/clusters/*{path}", params={"limit": 7})
        round_ = 0
        while True:
            assert page.status_code == 200, page.text
            seen += [(i["metadata"]["annotations"]["kube-cache-gateway.io/cluster"], ns,
                      i["metadata"]["name"]) for i in page.json()["items"]]
            token = page.json()["metadata"].get("continue")
            if not token:
                break
            for name, kube in kubes.items():  # churn everywhere between pages
                kube.delete(f"{path}/{name}-{round_ * 3:02d}")
                kube.create(path, {"metadata": {"name": f"{name}-new-{round_}"}})
                kube.patch(f"{path}/{name}-01", {"data": {"round": str(round_)}})
            round_ += 1
            time.sleep(0.3)
            page = http.get(f"/clusters/*{path}", params={"limit": 7, "continue": token})
    assert round_ >= 4, "several pages"
    assert lasting <= set(seen), sorted(lasting - set(seen))
    assert len(seen) == len(set(seen)), "no object twice"


def _merged_state(events: list[dict]) -> dict[tuple[str, str], str]:
    """What a client holds after a merged event stream's events: (cluster, name) -> version."""
    state: dict[tuple[str, str], str] = {}
    for event in events:
        if event.get("event") == "RESET":
            state.clear()
        if event.get("event") not in ("ADDED", "MODIFIED", "DELETED"):
            continue
        meta = json.loads(event["data"])["metadata"]
        key = (meta["annotations"]["kube-cache-gateway.io/cluster"], meta["name"])
        if event["event"] == "DELETED":
            state.pop(key, None)
        else:
            state[key] = meta["resourceVersion"]
    return state


def test_merged_streams_follow_all_three_through_a_stopped_api_server_and_resume_exactly(
        three, gateway):
    """A merged event stream and a merged watch, open while b's API server is stopped and
    started again: a and c keep coming at once, b's changes after it is back come too, and
    the client's state ends equal to the merged list. Then, closed, changes in all three:
    resumed from the last id (SSE) and the last object's version (watch), exactly the
    missed events come, none twice."""
    from tests.app.readers import LineReader, sse_events

    ns = "merged-streams"
    kubes, path = _fresh_configmaps(three, ns, ["0", "1", "2"])
    auth = {"Authorization": f"Bearer {three['a'].admin.token}"}
    url = f"{gateway.url}/clusters/*{path}"
    sse = LineReader(url, {**auth, "Accept": "text/event-stream"}, verify=gateway.tls)
    watch = LineReader(url + "?watch=true", auth, verify=gateway.tls)
    try:
        sse.wait_for(lambda l: any(e.get("event") == "SYNCED" for e in sse_events(l)), 30)
        watch.wait_for(lambda l: len(l) >= 9, 30)
        three["b"].stop_apiserver()
        try:
            for name in ("a", "c"):
                kubes[name].create(path, {"metadata": {"name": f"{name}-during"}})
            began = time.monotonic()
            sse.wait_for(lambda l: {("a", "a-during"), ("c", "c-during")}
                         <= set(_merged_state(sse_events(l))), 10)
            assert time.monotonic() - began < 5, "a and c are not held back by b"
        finally:
            three["b"].start_apiserver()
        kubes["b"].create(path, {"metadata": {"name": "b-after"}})
        kubes["b"].delete(f"{path}/b-0")
        sse.wait_for(lambda l: ("b", "b-after") in _merged_state(sse_events(l))
                     and ("b", "b-0") not in _merged_state(sse_events(l)), 60)
        watch.wait_for(lambda l: any('"b-after"' in line for line in l), 30)
        listed = httpx.get(url, headers=auth, verify=gateway.tls).json()["items"]
        assert _merged_state(sse_events(sse.lines)) == {
            (i["metadata"]["annotations"]["kube-cache-gateway.io/cluster"], i["metadata"]["name"]):
                i["metadata"]["resourceVersion"] for i in listed}, "no gap, nothing extra"
        last_id = [e for e in sse_events(sse.lines) if "id" in e][-1]["id"]
        last_rv = json.loads([l for l in watch.lines if l.strip()][-1])["object"]["metadata"][
            "resourceVersion"]
    finally:
        sse.close()
        watch.close()
    for name, kube in kubes.items():
        kube.create(path, {"metadata": {"name": f"{name}-missed"}})
        kube.patch(f"{path}/{name}-1", {"data": {"missed": "yes"}})
        kube.delete(f"{path}/{name}-2")
    missed = sorted((kind, name, obj) for name in kubes for kind, obj in (
        ("ADDED", f"{name}-missed"), ("MODIFIED", f"{name}-1"), ("DELETED", f"{name}-2")))
    resumed = LineReader(url, {**auth, "Accept": "text/event-stream", "Last-Event-ID": last_id},
                         verify=gateway.tls)
    rewatch = LineReader(url + f"?watch=true&resourceVersion={last_rv}", auth, verify=gateway.tls)
    try:
        resumed.wait_for(lambda l: len([e for e in sse_events(l) if e.get("event") in (
            "ADDED", "MODIFIED", "DELETED")]) >= 9, 30)
        rewatch.wait_for(lambda l: len([x for x in l if x.strip()]) >= 9, 30)
        time.sleep(0.5)  # room for anything that should not come
        got = sorted((e["event"], *reversed(_tag_name(json.loads(e["data"]))))
                     for e in sse_events(resumed.lines)
                     if e.get("event") in ("ADDED", "MODIFIED", "DELETED"))
        assert got == missed
        assert not any(e.get("event") in ("RESET", "SYNCED") for e in sse_events(resumed.lines))
        watched = sorted((d["type"], *reversed(_tag_name(d["object"])))
                         for d in (json.loads(x) for x in rewatch.lines if x.strip()))
        assert watched == missed
    finally:
        resumed.close()
        rewatch.close()


def _tag_name(obj: dict) -> tuple[str, str]:
    """(name, cluster) of a merged object."""
    meta = obj["metadata"]
    return meta["name"], meta["annotations"]["kube-cache-gateway.io/cluster"]


def test_a_merged_stream_takes_in_a_cluster_back_or_added_and_lets_go_of_one_removed(three,
                                                                                     tmp_path):
    """b's API server is stopped as the gateway starts: the merged stream opens with a alone
    (a Warning names b) and takes b in once it is back; c is taken in when added to the
    file, b let go (DELETED) when removed from it."""
    from tests.app.readers import LineReader, sse_events

    from app.settings import Settings
    from control_plane.cluster import free_port

    path = tmp_path / "clusters.yaml"
    _write_clusters(path, three, tmp_path, names=("a", "b"))
    cms = "/api/v1/namespaces/team/configmaps"
    three["b"].stop_apiserver()
    running = reader = None
    try:
        try:
            running = RunningGateway(Settings(port=free_port(), clusters=str(path),
                                              sync_timeout=30.0)).start()
            reader = LineReader(f"{running.url}/clusters/*{cms}", {"Accept": "text/event-stream"})
            reader.wait_for(lambda l: any(e.get("event") == "SYNCED" for e in sse_events(l)), 30)
            assert set(_merged_state(sse_events(reader.lines))) == {("a", o) for o in OBJECTS["a"]}
            assert "cluster b:" in reader.headers["warning"]
        finally:
            three["b"].start_apiserver()
        reader.wait_for(lambda l: set(_merged_state(sse_events(l))) == {
            (n, o) for n in ("a", "b") for o in OBJECTS[n]}, 60)
        named = [json.loads(e["data"]).get("cluster") for e in sse_events(reader.lines)
                 if e.get("event") == "SYNCED"]
        assert named == [None, "b"]
        _write_clusters(path, three, tmp_path, names=("a", "b", "c"))
        reader.wait_for(lambda l: {("c", o) for o in OBJECTS["c"]}
                        <= set(_merged_state(sse_events(l))), 30)
        _write_clusters(path, three, tmp_path, names=("a", "c"))
        reader.wait_for(lambda l: not any(k[0] == "b" for k in _merged_state(sse_events(l))), 30)
        assert set(_merged_state(sse_events(reader.lines))) == {
            (n, o) for n in ("a", "c") for o in OBJECTS[n]}
        assert not reader.ended(0.2), "the merged stream goes on"
    finally:
        if reader is not None:
            reader.close()
        if running is not None:
            running.stop()


def test_impersonation_is_decided_by_the_cluster_that_holds_the_data(three, gateway):
    """alice may impersonate in a (the identity cluster) and nowhere else. Checked in a alone,
    `Impersonate-Group: system:masters` once read every cluster; now each cluster decides
    with its own RBAC and names (c asks about c:alice and c:system:masters), and answers as
    its own API server answers alice impersonating there."""
    a = KubeAPI.for_cluster(three["a"])
    role = f"/apis/{RBAC}/v1/clusterroles/kcg-several-impersonate"
    a.delete(role)
    a.create(f"/apis/{RBAC}/v1/clusterroles", {
        "apiVersion": f"{RBAC}/v1", "kind": "ClusterRole",
        "metadata": {"name": "kcg-several-impersonate"},
        "rules": [{"apiGroups": [""], "resources": ["users", "groups"], "verbs": ["impersonate"]}]})
    _bind(a, "kcg-several-impersonate", "kcg-several-impersonate", {"kind": "User", "name": "alice"})
    masters = {"Impersonate-User": "bob", "Impersonate-Group": "system:masters"}
    path = "/api/v1/namespaces/other/configmaps"
    try:
        with _client(gateway, three["a"].user.token) as http:
            for name, cluster in three.items():
                server = cluster.primary
                with httpx.Client(verify=ssl.create_default_context(cafile=str(server.ca_file)),
                                  timeout=30) as direct:
                    token = cluster.user.token  # alice, as that cluster's API server knows her
                    want = direct.get(server.url + path, headers={
                        "Authorization": f"Bearer {token}", **masters}).status_code
                got = http.get(f"/clusters/{name}{path}", headers=masters)
                assert got.status_code == want == (200 if name == "a" else 403), (name, got.text)
            merged = http.get(f"/clusters/*{path}", headers=masters)
            assert merged.status_code == 200, merged.text
            assert {i["metadata"]["annotations"]["kube-cache-gateway.io/cluster"]
                    for i in merged.json()["items"]} == {"a"}, "b and c refuse: left out"
            assert http.get("/clusters/c/version", headers=masters).status_code == 403
    finally:
        a.delete(f"/apis/{RBAC}/v1/clusterrolebindings/kcg-several-impersonate")
        a.delete(role)


def test_the_gateways_own_paths_are_reviewed_and_exist_at_the_top_only(three, gateway):
    """/clusters/<unknown>/metrics and /clusters/*/metrics skipped the get /metrics review: now
    every cluster prefix is 404 for the gateway's own paths, after authentication, and
    /metrics is reviewed (alice may not get it, the admin may)."""
    with _client(gateway, three["a"].user.token) as alice, \
            _client(gateway, three["a"].admin.token) as admin:
        assert alice.get("/metrics").status_code == 403
        assert admin.get("/metrics").status_code == 200
        for prefix in ("/clusters/b", "/clusters/zz", "/clusters/*"):
            for path in ("/metrics", "/readyz", "/healthz", "/livez", "/clusters"):
                assert alice.get(prefix + path).status_code == 404, prefix + path
        with _client(gateway, "nope") as stranger:
            assert stranger.get("/clusters/zz/metrics").status_code == 401, "401 first"


def test_an_identity_cluster_removed_or_misnamed_answers_nobody(three, tmp_path):
    """With the identity cluster a gone from the file, no caller is answered — no token, a's
    alice, b's own admin — and b's reviewer is never made the identity (the default moves to
    b); serve refuses a misspelt --authn-cluster at start."""
    import sys

    from app.settings import Settings
    from control_plane.cluster import free_port

    path = tmp_path / "clusters.yaml"
    _write_clusters(path, three, tmp_path, names=("a", "b"))
    out = subprocess.run([sys.executable, "-m", "app", "serve", "--clusters", str(path),
                          "--authz", "kubernetes", "--authn-cluster", "typo"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--authn-cluster typo: no cluster of that name" in out.stderr
    gw = RunningGateway(Settings(port=free_port(), clusters=str(path), authz="kubernetes",
                                 sync_timeout=30.0)).start()
    cms = "/clusters/b/api/v1/namespaces/team/configmaps"
    alice = {"Authorization": f"Bearer {three['a'].user.token}"}
    try:
        wait_until(lambda: _get_as(gw.url + cms, alice) == 200, 30,
                   message="alice known by a, reading b (b lets her read everything)")
        _write_clusters(path, three, tmp_path, names=("b",))
        wait_until(lambda: set(gw.gateway.clusters) == {"b"}, 30, message="a removed")
        for headers in ({}, alice, {"Authorization": f"Bearer {three['b'].admin.token}"}):
            for where in (cms, "/api/v1/namespaces/team/configmaps", "/clusters", "/metrics"):
                answer = httpx.get(gw.url + where, headers=headers, timeout=10)
                assert answer.status_code == 503, (headers, where, answer.text)
                assert "the identity cluster 'a' is not served" in answer.json()["message"]
    finally:
        gw.stop()


def test_one_cluster_that_does_not_answer_never_stops_a_prewarming_serve(three, tmp_path):
    """serve --clusters with a cluster whose API server does not answer and --prewarm exited 1
    ('Application startup failed': pre-warm -> discovery -> ConnectionError): now that cluster
    is not ready, the others serve, and the gateway is ready."""
    import sys

    from control_plane.cluster import free_port

    path = tmp_path / "clusters.yaml"
    _write_clusters(path, three, tmp_path, names=("a", "b"))
    config = yaml.safe_load(path.read_text())
    gone = yaml.safe_load(three["b"].write_kubeconfig(tmp_path / "gone.kubeconfig",
                                                      three["b"].admin).read_text())
    gone["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"  # no one
    (tmp_path / "gone.kubeconfig").write_text(yaml.safe_dump(gone))
    config["clusters"].append({"name": "gone", "kubeconfig": str(tmp_path / "gone.kubeconfig")})
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--clusters", str(path),
                             "--port", str(port), "--prewarm", "pods,configmaps"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _get(url, "/readyz") == 200 or proc.poll() is not None, 60,
                   message="serving, or ended")
        assert proc.poll() is None, "one cluster that does not answer stops nothing"
        assert _names(httpx.get(url + "/clusters/b/api/v1/namespaces/team/configmaps")) == \
            OBJECTS["b"]
        listed = {c["name"]: c for c in httpx.get(url + "/clusters").json()["items"]}
        assert listed["gone"]["ready"] is False and listed["a"]["ready"] is True
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert "Application startup failed" not in out, out[-2000:]


def test_the_past_of_every_cluster_merged_as_each_caller_may_read_it(three, tmp_path,
                                                                    history_url):
    """One store keeping a, b and c: an Exact list at a merged token (a version per cluster)
    is each cluster's state then, paged too; ``/clusters/*/history/`` is every cluster's
    changes, newest first, each as its API server made it; alice reads the past of the
    clusters whose RBAC lets her read the present (b, and c through her group), and no more."""
    from app.settings import Settings
    from control_plane.cluster import free_port

    path = _write_clusters(tmp_path / "clusters.yaml", three, tmp_path, c=PREFIXES)
    settings = Settings(port=free_port(), clusters=path, authz="kubernetes", sync_timeout=30.0,
                        history=history_url)
    base = "/api/v1/namespaces/team/configmaps"
    kubes = {name: KubeAPI.for_cluster(cluster) for name, cluster in three.items()}
    then = {name: [(o["metadata"]["name"], o["metadata"]["resourceVersion"])
                   for o in kube.get(base)["items"]] for name, kube in kubes.items()}
    running = RunningGateway(settings).start()
    made: dict[str, dict] = {}
    try:
        with httpx.Client(base_url=running.url, timeout=30, headers={
                "Authorization": f"Bearer {three['a'].admin.token}"}) as admin, \
                httpx.Client(base_url=running.url, timeout=30, headers={
                    "Authorization": f"Bearer {three['a'].user.token}"}) as alice:
            merged = admin.get(f"/clusters/*{base}").json()
            token = merged["metadata"]["resourceVersion"]
            assert [o["data"]["cluster"] for o in merged["items"]] == \
                [n for n in ("a", "b", "c") for _ in OBJECTS[n]]
            for name, kube in kubes.items():  # one change and one new object in each
                kube.patch(f"{base}/{OBJECTS[name][0]}", {"data": {"v": "1"}})
                made[name] = kube.create(base, {"metadata": {"name": f"{name}-new"},
                                                "data": {"cluster": name}})
            for name, object_ in made.items():
                history = running.gateway.clusters[name].history
                version = int(object_["metadata"]["resourceVersion"])
                wait_until(lambda h=history, n=name, v=version: any(
                    lo <= v <= hi for lo, hi in h.store.spans(n, "core/v1/configmaps")), 15,
                    message=f"{name}'s change kept")

            def past(client: httpx.Client, limit: int = 0) -> list[tuple[str, str, str]]:
                found, cont = [], None
                while True:
                    params = ({"continue": cont} if cont else {
                        "resourceVersion": token, "resourceVersionMatch": "Exact"})
                    page = client.get(f"/clusters/*{base}",
                                      params=params | ({"limit": str(limit)} if limit else {}))
                    assert page.status_code == 200, page.text
                    found += [(o["data"]["cluster"], o["metadata"]["name"],
                               o["metadata"]["resourceVersion"]) for o in page.json()["items"]]
                    cont = page.json()["metadata"].get("continue")
                    if not cont:
                        return found

            every = [(n, name, rv) for n in ("a", "b", "c") for name, rv in then[n]]
            assert past(admin) == every == past(admin, limit=2)  # each API server's, then
            assert past(alice) == [t for t in every if t[0] in ("b", "c")]  # hers to read

            changes = admin.get(f"/clusters/*/history{base}", params={"limit": "6"})
            assert changes.status_code == 200, changes.text
            items = changes.json()["items"]
            times = [c["time"] for c in items]
            assert times == sorted(times, reverse=True), items  # newest first, across clusters
            now = {(n, o["metadata"]["name"]): o["metadata"]["resourceVersion"]
                   for n, kube in kubes.items() for o in kube.get(base)["items"]}
            assert sorted((c["cluster"], c["type"], c["object"]["metadata"]["name"],
                           c["resourceVersion"]) for c in items) == sorted(
                (n, kind, name, now[(n, name)]) for n in ("a", "b", "c")
                for kind, name in (("MODIFIED", OBJECTS[n][0]), ("ADDED", f"{n}-new")))
            modified = next(c for c in items if c["type"] == "MODIFIED")
            assert {"op": "add", "path": "/data/v", "value": "1"} in modified["patch"]
            hers = alice.get(f"/clusters/*/history{base}")
            assert hers.status_code == 200, hers.text
            assert {c["cluster"] for c in hers.json()["items"]} == {"b", "c"}
            assert "cluster a" not in hers.headers.get("Warning", "")  # not hers: not said
            assert alice.get(f"/clusters/a/history{base}").status_code == 403
    finally:
        running.stop()
        for name, kube in kubes.items():
            kube.delete(f"{base}/{name}-new")
            kube.patch(f"{base}/{OBJECTS[name][0]}", {"data": {"v": None}})
