"""The gateway as it runs in a pod, for real: built and installed as the image is, started by the
image's entry point with the image's environment and no kubeconfig, under the chart's own
ServiceAccount and RBAC on the real API server, with a token minted for that ServiceAccount
and laid out as the kubelet lays it out. It serves pods, a CRD and SSE; the chart's RBAC is
enough (it works) and no more (what it may not do, the API server refuses)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from app.launch.demo import seed_workload
from control_plane.cluster import free_port
from control_plane.kubeapi import KubeAPI
from tests.app.readers import LineReader
from tests.deploy.conftest import ROOT, by_kind, kubectl, objects_of
from tests.deploy.test_dockerfile import first, pairs, stages

pytestmark = pytest.mark.cluster

RELEASE = NAMESPACE = "kcg-in-cluster"
WORKLOAD = "kcg-in-cluster-shop"
VALUES = {"rbac": {"resources": [
    {"apiGroups": [""], "resources": ["pods", "configmaps", "namespaces", "services"]},
    {"apiGroups": ["apps"], "resources": ["deployments"]},
    {"apiGroups": ["example.com"], "resources": ["widgets"]},  # the demo's CRD
]}}


def _build_and_install(workdir: Path) -> Path:
    """The image's two stages without a container engine; returns the runtime's bin folder.

    Build: the context the build stage COPYs, then its ``pip wheel`` command as written
    (the pip cache allowed, to spare downloads). Runtime: a fresh venv, then its
    ``pip install`` command as written, from those wheels only (``--no-index``).
    """
    build, runtime = stages()
    context = workdir / "context"
    context.mkdir()
    for command in build:
        if command.cmd == "COPY":
            for source in command.value[:-1]:
                src = ROOT / source
                if src.is_dir():
                    shutil.copytree(src, context / source,
                                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
                else:
                    shutil.copy2(src, context / source)
    wheels = workdir / "wheels"
    (wheel_run,) = [c for c in build if c.cmd == "RUN" and c.value[0].startswith("pip wheel ")]
    args = [a.replace("/wheels", str(wheels)) for a in shlex.split(wheel_run.value[0])[1:]
            if a != "--no-cache-dir"]
    subprocess.run([sys.executable, "-m", "pip", "--quiet", *args], cwd=context, check=True,
                   timeout=900)
    venv = workdir / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    install = first(runtime, "RUN").value[0].split("&&")[0]
    args = [a.replace("/wheels", str(wheels)) for a in shlex.split(install)[1:]]
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "--quiet", *args], check=True,
                   timeout=600)
    return venv / "bin"


def image_environment() -> dict[str, str]:
    env: dict[str, str] = {}
    for command in stages()[-1]:
        if command.cmd == "ENV":
            env.update(pairs(command))
    return env


def files_under(root: Path, but: Path) -> dict[str, float]:
    """Every file under ``root`` (save those under ``but``) with its modification time."""
    return {str(p): p.stat().st_mtime for p in root.rglob("*")
            if p.is_file() and but not in p.parents}


class InCluster:
    def __init__(self, url: str, admin: httpx.Client, kube: KubeAPI, log: Path,
                 account: str, written: Callable[[], dict[str, float]],
                 before: dict[str, float]) -> None:
        self.url, self.admin, self.kube, self.log = url, admin, kube, log
        self.account = account  # the chart's ServiceAccount, the gateway's identity
        self.written, self.before = written, before  # what it could write: see the last test


@pytest.fixture(scope="module")
def in_cluster(local_cluster, server_version, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("in-cluster")
    bin_dir = _build_and_install(workdir)
    kube = KubeAPI.for_cluster(local_cluster)
    seed_workload(kube, WORKLOAD)
    kube.ensure_namespace(NAMESPACE)
    objs = objects_of(VALUES, name=RELEASE, namespace=NAMESPACE, kube_version=server_version)
    manifest = "".join("---\n" + json.dumps(o) + "\n" for o in objs)
    base = [f"--kubeconfig={local_cluster.kubeconfig}"]
    kubectl(*base, "apply", "-f", "-", input_text=manifest)
    (account,) = by_kind(objs, "ServiceAccount")
    # what the kubelet mounts in a pod: the token, the cluster's CA, the namespace
    mounted = workdir / "serviceaccount"
    mounted.mkdir()
    (mounted / "token").write_text(
        kube.service_account_token(NAMESPACE, account["metadata"]["name"]))
    shutil.copy(local_cluster.primary.ca_file, mounted / "ca.crt")
    (mounted / "namespace").write_text(NAMESPACE)
    api = urllib.parse.urlsplit(local_cluster.primary.url)
    port = free_port()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(workdir),
           **image_environment(),
           "KUBERNETES_SERVICE_HOST": api.hostname, "KUBERNETES_SERVICE_PORT": str(api.port),
           "KCG_SERVICEACCOUNT_DIR": str(mounted), "KCG_PORT": str(port)}
    (deployment,) = by_kind(objs, "Deployment")
    for item in deployment["spec"]["template"]["spec"]["containers"][0]["env"]:
        if item["name"] not in ("KCG_PORT",):
            env[item["name"]] = item["value"]  # the chart's settings, as the pod gets them
    log = workdir / "logs" / "gateway.log"
    log.parent.mkdir()
    # its code, the account, its working folder and HOME: what an image's read-only root holds
    before = files_under(workdir, but=log.parent)
    with open(log, "wb") as out:
        process = subprocess.Popen(["kube-cache-gateway", "serve"], env=env, stdout=out,
                                   stderr=subprocess.STDOUT, cwd=workdir)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, f"the gateway exited: {log.read_text()[-3000:]}"
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"not ready in 60 s: {log.read_text()[-3000:]}"
            time.sleep(0.2)
        with httpx.Client(base_url=url, timeout=30, headers={
                "Authorization": f"Bearer {local_cluster.admin.token}"}) as admin:
            yield InCluster(url, admin, kube, log, account["metadata"]["name"],
                            lambda: files_under(workdir, but=log.parent), before)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        kubectl(*base, "delete", "--ignore-not-found", "--wait=false", "-f", "-",
                input_text=manifest)


def test_it_came_up_in_cluster_mode_with_no_kubeconfig(in_cluster):
    text = in_cluster.log.read_text()
    assert "Traceback" not in text
    assert in_cluster.admin.get("/version").json()["gitVersion"].startswith("v1.")


def test_it_serves_pods_as_the_api_server_lists_them(in_cluster):
    path = f"/api/v1/namespaces/{WORKLOAD}/pods"
    got = in_cluster.admin.get(path)
    assert got.status_code == 200, got.text
    want = sorted(p["metadata"]["name"] for p in in_cluster.kube.get(path)["items"])
    assert sorted(p["metadata"]["name"] for p in got.json()["items"]) == want and want


def test_it_serves_a_custom_resource(in_cluster):
    path = f"/apis/example.com/v1/namespaces/{WORKLOAD}/widgets"
    got = in_cluster.admin.get(path)
    assert got.status_code == 200, got.text
    want = sorted(w["metadata"]["name"] for w in in_cluster.kube.get(path)["items"])
    assert sorted(w["metadata"]["name"] for w in got.json()["items"]) == want and want


def test_it_streams_changes_as_server_sent_events(in_cluster, local_cluster):
    path = f"/api/v1/namespaces/{WORKLOAD}/configmaps"
    reader = LineReader(in_cluster.url + path, headers={
        "Accept": "text/event-stream", "Authorization": f"Bearer {local_cluster.admin.token}"})
    try:
        reader.wait_for(lambda lines: any(line.startswith("event:") for line in lines), 20)
        in_cluster.kube.create(f"/api/v1/namespaces/{WORKLOAD}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "sse-in-cluster"}})
        reader.wait_for(lambda lines: any("sse-in-cluster" in line for line in lines), 20)
        assert reader.status == 200
    finally:
        reader.close()
        in_cluster.kube.delete(f"/api/v1/namespaces/{WORKLOAD}/configmaps/sse-in-cluster")


def test_callers_are_authorized_by_the_clusters_rbac(in_cluster):
    token = in_cluster.kube.service_account_token(WORKLOAD, "no-rights")
    with httpx.Client(base_url=in_cluster.url, timeout=30,
                      headers={"Authorization": f"Bearer {token}"}) as nobody:
        got = nobody.get(f"/api/v1/namespaces/{WORKLOAD}/pods")
    assert got.status_code == 403
    assert got.json()["message"] == (
        f'pods is forbidden: User "system:serviceaccount:{WORKLOAD}:no-rights" cannot list '
        f'resource "pods" in API group "" in the namespace "{WORKLOAD}"')
    assert httpx.get(f"{in_cluster.url}/api/v1/namespaces/{WORKLOAD}/pods").status_code == 401


def _may(kube: KubeAPI, account: str, verb: str, resource: str, group: str = "",
         namespace: str = "") -> bool:
    spec = {"user": f"system:serviceaccount:{NAMESPACE}:{account}",
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}",
                       "system:authenticated"],
            "resourceAttributes": {"verb": verb, "resource": resource, "group": group,
                                   "namespace": namespace}}
    answer = kube.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
    return bool(answer["status"].get("allowed"))


@pytest.mark.parametrize("verb, resource, group, allowed", [
    ("list", "pods", "", True), ("watch", "widgets", "example.com", True),
    ("get", "deployments", "apps", True),
    ("create", "tokenreviews", "authentication.k8s.io", True),
    ("create", "subjectaccessreviews", "authorization.k8s.io", True),
    ("list", "secrets", "", False), ("get", "secrets", "", False),
    ("create", "pods", "", False), ("delete", "pods", "", False), ("patch", "deployments", "apps", False),
    ("update", "configmaps", "", False),
    # RBAC read, to decide callers' accesses as the API server does (authz.localRBAC); never written
    ("list", "roles", "rbac.authorization.k8s.io", True),
    ("watch", "clusterrolebindings", "rbac.authorization.k8s.io", True),
    ("create", "rolebindings", "rbac.authorization.k8s.io", False),
    ("escalate", "clusterroles", "rbac.authorization.k8s.io", False),
    ("create", "serviceaccounts/token", "", False), ("impersonate", "users", "", False),
    # what tokens are bound to, to verify callers' tokens as the API server does (authz.localTokens)
    ("watch", "serviceaccounts", "", True), ("list", "nodes", "", True),
    ("delete", "serviceaccounts", "", False),
])
def test_the_charts_rbac_is_enough_and_no_more(in_cluster, verb, resource, group, allowed):
    assert _may(in_cluster.kube, in_cluster.account, verb, resource, group, WORKLOAD) is allowed


def test_a_resource_outside_the_charts_rbac_is_refused_naming_the_permission(in_cluster):
    got = in_cluster.admin.get("/apis/coordination.k8s.io/v1/leases")
    assert got.status_code == 403
    assert "grant its ServiceAccount get, list and" in got.json()["message"]
    secrets = in_cluster.admin.get(f"/api/v1/namespaces/{WORKLOAD}/secrets")
    assert secrets.status_code == 403  # the gateway's policy, before any RBAC


def test_it_writes_nothing_beside_its_code(in_cluster):
    """The image's root filesystem is read-only: after serving all of the above, the
    installed code, its folders and the mounted account are as they were."""
    assert in_cluster.written() == in_cluster.before
