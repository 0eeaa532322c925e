"""The local control plane is real: objects round-trip, restarts and compaction work."""

from __future__ import annotations

import os
import ssl
import subprocess
import urllib.error
import urllib.request

import orjson
import pytest
from kubernetes import client

from control_plane.cluster import LocalCluster

pytestmark = pytest.mark.cluster


def _raw_get(cluster: LocalCluster, path: str, token: str | None = None) -> tuple[int, dict]:
    context = ssl.create_default_context(cafile=str(cluster.primary.ca_file))
    context.check_hostname = False
    req = urllib.request.Request(cluster.primary.url + path, headers={
        "Authorization": f"Bearer {token or cluster.admin.token}"})
    try:
        with urllib.request.urlopen(req, context=context, timeout=10) as resp:
            return resp.status, orjson.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, orjson.loads(exc.read())


def test_configmap_created_through_the_api_lists_back_raw(local_cluster, api_client, namespace):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(namespace, {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "smoke", "labels": {"app": "smoke"}},
        "data": {"greeting": "hello"},
    })
    status, body = _raw_get(local_cluster, f"/api/v1/namespaces/{namespace}/configmaps"
                                           "?labelSelector=app%3Dsmoke")
    assert status == 200
    assert body["kind"] == "ConfigMapList"
    assert [(i["metadata"]["name"], i["data"]) for i in body["items"]] == [
        ("smoke", {"greeting": "hello"})]
    assert body["metadata"]["resourceVersion"]


def test_non_admin_user_is_denied_by_rbac(local_cluster):
    status, body = _raw_get(local_cluster, "/api/v1/namespaces", token=local_cluster.user.token)
    assert status == 403
    assert body["kind"] == "Status" and body["reason"] == "Forbidden"
    assert local_cluster.user.name in body["message"]


def test_kubectl_talks_to_the_cluster(kubeconfig, namespace, kubectl_version):
    from control_plane.client_tools import kubectl

    out = subprocess.run([str(kubectl(kubectl_version)), "--kubeconfig", str(kubeconfig), "get", "namespace",
                          namespace, "-o", "name"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"namespace/{namespace}"


def test_restart_keeps_data_and_port(local_cluster, api_client, namespace):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "survivor"}})
    port = local_cluster.primary.port
    local_cluster.restart_apiserver()
    assert local_cluster.primary.port == port
    assert core.read_namespaced_config_map("survivor", namespace).metadata.name == "survivor"


def test_compaction_makes_old_resource_versions_gone(local_cluster, api_client, namespace):
    core = client.CoreV1Api(api_client)
    first = core.create_namespaced_config_map(namespace, {"metadata": {"name": "c0"}})
    for i in range(1, 4):
        core.create_namespaced_config_map(namespace, {"metadata": {"name": f"c{i}"}})
    local_cluster.compact_etcd()
    old = first.metadata.resource_version
    # A list from etcd (no watch cache: resourceVersionMatch=Exact) at a compacted version is 410.
    status, body = _raw_get(
        local_cluster,
        f"/api/v1/namespaces/{namespace}/configmaps?resourceVersion={old}"
        "&resourceVersionMatch=Exact&limit=1")
    assert status == 410, body
    assert body["reason"] == "Expired"


def test_second_apiserver_with_other_flags_shares_etcd(local_cluster, api_client, namespace):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "shared"}})
    second = local_cluster.add_apiserver(["--watch-cache-sizes=configmaps#0"])
    try:
        assert second.port != local_cluster.primary.port
        other = client.CoreV1Api(local_cluster.api_client(server=second))
        names = [c.metadata.name for c in other.list_namespaced_config_map(namespace).items]
        assert names == ["shared"]
        assert "--watch-cache-sizes=configmaps#0" in second.process.args
    finally:
        local_cluster.remove_apiserver(second)


def test_stop_leaves_no_process_behind(local_cluster):
    cluster = LocalCluster().start()
    pids = [cluster.primary.process.pid, cluster._etcd.pid]
    cluster.stop()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


_HOLDER = """
import signal, sys, time
# Ctrl-C's default, even when this suite runs as a background job (which ignores SIGINT)
signal.signal(signal.SIGINT, signal.default_int_handler)
from control_plane.cluster import LocalCluster
c = LocalCluster().start()
print(c.primary.process.pid, c._etcd.pid, c.workdir, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("sig", ["SIGINT", "SIGKILL"])
def test_an_interrupted_or_killed_owner_leaves_no_process_behind(local_cluster, sig):
    import signal
    import sys
    import time

    owner = subprocess.Popen([sys.executable, "-c", _HOLDER], stdout=subprocess.PIPE, text=True)
    try:
        *pid_texts, workdir = owner.stdout.readline().split()
        pids = [int(p) for p in pid_texts]
        assert len(pids) == 2
        owner.send_signal(getattr(signal, sig))
        owner.wait(30)
        deadline = time.monotonic() + 15
        alive = pids
        while alive and time.monotonic() < deadline:
            alive = [p for p in pids if _running(p)]
            time.sleep(0.1)
        assert not alive, f"processes left running after {sig}: {alive}"
        from pathlib import Path

        from control_plane.cluster import _remove_stale_workdirs

        _remove_stale_workdirs(Path(workdir).parent)  # what the next start does
        assert not Path(workdir).exists()
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        owner.stdout.close()


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_the_binaries_command_runs_without_runpy_warning():
    """``python -m control_plane.binaries`` (make's setup step) is run once, as ``__main__``:
    the package does not import it first."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m",
                          "control_plane.binaries"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "RuntimeWarning" not in out.stderr
