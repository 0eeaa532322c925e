"""The chart installed as an operator installs it, on a node that runs its pods: the kubelet
runs the image ``make image`` built (imported, no registry), probes it, mounts its
ServiceAccount token, and kube-proxy puts its replicas behind the Service — what
chart-testing (``ct install``) proves on kind for the charts operators trust
(``control_plane.node``: docs/local-node.md).

The node's bridge CNI enforces no NetworkPolicy: the chart's policy is rendered and
admitted here, never shown to hold.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
import subprocess
import threading
import time
import uuid

import httpx
import pytest

from control_plane.client_tools import helm as helm_binary
from control_plane.client_tools import kubectl as kubectl_binary
from control_plane.image import archive
from tests.deploy.conftest import CHART, OPERATOR_CRDS, VARIANTS
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster

READY_WITHIN = 120  # seconds from `helm install` to every pod Ready (measured: 8-15)


@pytest.fixture(scope="module")
def node(local_node, built_image, tmp_path_factory):
    """The session's node with the image of this checkout imported."""
    started = time.monotonic()
    local_node.import_image(archive(tmp_path_factory.mktemp("image") / "gateway.tar",
                                    built_image))
    print(f"image imported in {time.monotonic() - started:.1f} s")
    return local_node


def _helm(node, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([str(helm_binary()), "--kubeconfig", str(node.kubeconfig), *args],
                          capture_output=True, text=True, timeout=timeout)


def _kubectl(node, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(kubectl_binary("1.35")), "--kubeconfig", str(node.kubeconfig),
                           *args], capture_output=True, text=True, timeout=timeout)


def _api(node, path: str) -> dict:
    cluster = node.cluster
    context = ssl.create_default_context(cafile=str(cluster.primary.ca_file))
    answer = httpx.get(cluster.primary.url + path, verify=context, timeout=10,
                       headers={"Authorization": f"Bearer {cluster.admin.token}"})
    answer.raise_for_status()
    return answer.json()


class Release:
    """One installed release: its name, namespace and the seconds its install took."""

    def __init__(self, node, name: str, namespace: str, seconds: float) -> None:
        self.node, self.name, self.namespace, self.seconds = node, name, namespace, seconds

    @property
    def fullname(self) -> str:
        return f"{self.name}-kube-cache-gateway"

    def pods(self) -> list[dict]:
        return _api(self.node, f"/api/v1/namespaces/{self.namespace}/pods?labelSelector="
                               f"app.kubernetes.io/instance={self.name}")["items"]

    def pod_urls(self) -> dict[str, str]:
        """Each running replica's own address (its pod IP: this machine is the node), so a
        test can reach every replica, where the Service picks one at random per
        connection."""
        return {p["metadata"]["name"]: f"http://{p['status']['podIP']}:"
                f"{p['spec']['containers'][0]['ports'][0]['containerPort']}"
                for p in self.pods()
                if not p["metadata"].get("deletionTimestamp") and p["status"].get("podIP")}

    def service_url(self, within: float = 30.0) -> str:
        """The Service's address, once it takes connections. kube-proxy writes a new
        Service's rules on its own schedule, after its pods are Ready: until then it rejects
        connections to it ("connection refused"), so ``helm install --wait`` having returned
        is not enough (seen on a loaded machine)."""
        service = _api(self.node, f"/api/v1/namespaces/{self.namespace}/services/"
                                  f"{self.fullname}")
        host, port = service["spec"]["clusterIP"], service["spec"]["ports"][0]["port"]
        deadline = time.monotonic() + within
        while True:
            try:
                socket.create_connection((host, port), timeout=5).close()
                return f"http://{host}:{port}"
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


def install(node, *values: str, name: str = "", prepare=None) -> Release:
    """``helm install --wait`` of the chart with ``values`` (``--set``/``-f`` arguments) into a
    fresh namespace (``prepare(kube, namespace)`` first: what the values expect to find);
    the test fails when it is not Ready within ``READY_WITHIN``."""
    name = name or f"r{uuid.uuid4().hex[:6]}"
    namespace = f"chart-{name}"
    if prepare is not None:
        from control_plane.kubeapi import KubeAPI

        kube = KubeAPI.for_cluster(node.cluster)
        kube.ensure_namespace(namespace)
        prepare(kube, namespace)
    started = time.monotonic()
    done = _helm(node, "install", name, str(CHART), "--namespace", namespace,
                 "--create-namespace", "--wait", "--timeout", f"{READY_WITHIN}s",
                 "--set", "tests.enabled=true", *values)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        described = _kubectl(node, "describe", "pods", "-n", namespace).stdout[-3000:]
        pytest.fail(f"helm install failed after {seconds:.0f} s:\n{done.stderr}\n{described}")
    print(f"{name}: installed and Ready in {seconds:.1f} s")
    return Release(node, name, namespace, seconds)


def uninstall(release: Release) -> None:
    _helm(release.node, "uninstall", release.name, "--namespace", release.namespace, "--wait")
    _kubectl(release.node, "delete", "namespace", release.namespace, "--wait=false")


@pytest.fixture(scope="module")
def default(node):
    """The chart with its defaults (two replicas, ``--authz kubernetes``)."""
    release = install(node, name="default")
    yield release
    uninstall(release)


def test_with_its_defaults_every_pod_is_ready_and_helm_test_passes(default):
    pods = default.pods()
    assert len(pods) == 2, [p["metadata"]["name"] for p in pods]
    for pod in pods:
        ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert ready["Ready"] == "True", pod["status"]
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
    assert default.seconds < READY_WITHIN
    started = time.monotonic()
    tested = _helm(default.node, "test", default.name, "--namespace", default.namespace,
                   "--logs")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "Phase:          Succeeded" in tested.stdout
    assert "/readyz 200 ok" in tested.stdout  # the test pod's own words, found by DNS name
    print(f"helm test in {time.monotonic() - started:.1f} s")


def test_reads_through_the_services_cluster_ip_equal_the_api_servers(default):
    """From the host, through kube-proxy's rules to either replica: what the API server
    answers (the caller's token reviewed by the cluster the pods run in)."""
    token = default.node.cluster.admin.token
    for path in ("/api/v1/namespaces", f"/api/v1/namespaces/{default.namespace}/pods",
                 "/apis/apps/v1/deployments"):
        direct = sorted(i["metadata"]["name"] for i in _api(default.node, path)["items"])
        for _ in range(4):  # the Service spreads connections over both replicas
            answer = httpx.get(default.service_url() + path, timeout=10,
                               headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 200, answer.text
            assert sorted(i["metadata"]["name"] for i in answer.json()["items"]) == direct
    assert httpx.get(default.service_url() + "/api/v1/namespaces").status_code == 401


def test_its_logs_are_json_lines(default):
    for pod in default.pods():
        logs = _kubectl(default.node, "logs", "-n", default.namespace,
                        pod["metadata"]["name"])
        assert logs.returncode == 0, logs.stderr
        lines = logs.stdout.splitlines()
        assert lines, "the gateway says it started"
        for line in lines:
            record = json.loads(line)
            assert {"time", "level", "logger", "msg"} <= set(record), record


def test_it_runs_as_rendered_unprivileged_with_a_read_only_root(default):
    """As the pod runs, not only as the chart renders it: UID 65532, no privilege gain, and a
    root file system it cannot write."""
    pod = default.pods()[0]["metadata"]["name"]
    probe = ("import os\n"
             "status = dict(l.split(':\\t', 1) for l in open('/proc/1/status').read().splitlines()"
             " if ':\\t' in l)\n"
             "print(os.getuid(), os.getgid(), status['NoNewPrivs'].strip(),"
             " status['CapEff'].strip())\n"
             "try:\n    open('/written', 'w')\nexcept OSError as e:\n    print('refused', e.errno)\n")
    done = _kubectl(default.node, "exec", "-n", default.namespace, pod, "--", "python3", "-c",
                    probe)
    assert done.returncode == 0, done.stderr
    ids, refused = done.stdout.splitlines()
    uid, gid, no_new_privileges, capabilities = ids.split()
    assert (uid, no_new_privileges, capabilities) == ("65532", "1", "0000000000000000"), ids
    assert refused == "refused 30", refused  # EROFS


def _ready(pod: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in pod.get("status", {}).get("conditions", []))


def test_the_disruption_budget_keeps_the_last_replica_through_a_drain(default):
    """``kubectl drain``: one replica is evicted, the eviction API refuses the other (the
    chart's PodDisruptionBudget, maxUnavailable 1) while its replacement cannot be scheduled
    on the cordoned node; uncordoned, both are Ready again."""
    from control_plane.node import NODE_NAME

    node = default.node
    before = {p["metadata"]["name"] for p in default.pods()}
    drained = _kubectl(node, "drain", NODE_NAME, "--ignore-daemonsets",
                       "--delete-emptydir-data", "--pod-selector",
                       f"app.kubernetes.io/instance={default.name}", "--timeout=30s",
                       timeout=90)
    try:
        assert drained.returncode != 0, drained.stdout
        assert "violate the pod's disruption budget" in drained.stderr, drained.stderr
        pods = default.pods()
        running = [p for p in pods if p["metadata"]["name"] in before
                   and not p["metadata"].get("deletionTimestamp")]
        said = (drained.stdout + drained.stderr)[-1500:], before, [
            (p["metadata"]["name"], p["status"]["phase"], _ready(p),
             p["metadata"].get("deletionTimestamp")) for p in pods]
        assert len(running) == 1 and _ready(running[0]), said
        assert [p["status"]["phase"] for p in pods if p["metadata"]["name"] not in before] == \
            ["Pending"]  # the replacement, on a node that takes none
    finally:
        assert _kubectl(node, "uncordon", NODE_NAME).returncode == 0
    deadline = time.monotonic() + READY_WITHIN
    while time.monotonic() < deadline:
        pods = [p for p in default.pods() if not p["metadata"].get("deletionTimestamp")]
        if len(pods) == 2 and all(_ready(p) for p in pods):
            break
        time.sleep(1)
    else:
        pytest.fail(f"two replicas not Ready again: {[p['status'] for p in default.pods()]}")


def test_while_the_api_server_is_away_the_replicas_stay_ready_and_serve(default):
    """The moment the API server is away is when the caches are all there is: the probes keep
    both replicas Ready (the kubelet's own view: it cannot report to anyone), and reads
    through the Service answer from the caches, with a Warning."""
    node, token = default.node, default.node.cluster.admin.token
    path = f"/api/v1/namespaces/{default.namespace}/pods"
    headers = {"Authorization": f"Bearer {token}"}
    replicas = default.pod_urls()  # one drained may be ending: not among them
    assert len(replicas) == 2, replicas
    for replica in replicas.values():  # each has reviewed the token and cached the pods
        assert httpx.get(replica + path, headers=headers).status_code == 200
    url = default.service_url()
    names = sorted(replicas)
    node.kubelet_pods()  # the kubelet authorizes its reader by the API server: kept 5 minutes
    node.cluster.stop_apiserver()
    try:
        time.sleep(12)  # two readiness periods and more
        ours = [p for p in node.kubelet_pods() if p["metadata"]["name"] in names]
        assert len(ours) == 2 and all(_ready(p) for p in ours), [p["status"] for p in ours]
        for _ in range(4):
            answer = httpx.get(url + path, headers=headers, timeout=10)
            assert answer.status_code == 200, answer.text
            assert set(names) <= {i["metadata"]["name"] for i in answer.json()["items"]}
            assert "warning" in answer.headers, answer.headers
    finally:
        node.cluster.start_apiserver()
    endpoints = _api(node, f"/api/v1/namespaces/{default.namespace}/endpoints/"
                           f"{default.fullname}")
    assert len(endpoints["subsets"][0]["addresses"]) == 2, endpoints


def test_a_replica_whose_cache_never_synced_stays_out_of_its_service(node):
    """Pre-warming a resource the chart's ClusterRole does not grant (leases): the cache
    never syncs, so the replicas run but are never Ready, and the Service sends them
    nothing."""
    name = f"r{uuid.uuid4().hex[:6]}"
    namespace = f"chart-{name}"
    done = _helm(node, "install", name, str(CHART), "--namespace", namespace,
                 "--create-namespace", "--set", "prewarm={leases.coordination.k8s.io}",
                 "--set", "replicas=1")
    assert done.returncode == 0, done.stderr
    release = Release(node, name, namespace, 0.0)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # running, and probed for a while
            pods = release.pods()
            if pods and pods[0]["status"].get("containerStatuses", [{}])[0].get("started"):
                break
            time.sleep(1)
        time.sleep(12)  # two readiness periods and more
        [pod] = release.pods()
        assert pod["status"]["phase"] == "Running" and not _ready(pod), pod["status"]
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
        endpoints = _api(node, f"/api/v1/namespaces/{namespace}/endpoints/{release.fullname}")
        [subset] = endpoints["subsets"]
        assert "addresses" not in subset and len(subset["notReadyAddresses"]) == 1, endpoints
    finally:
        uninstall(release)



# -- each ci/ values file, as chart-testing installs them ------------------------------------

def _tls_secret(kube, namespace: str, name: str) -> None:
    """The Secret a Certificate names, as cert-manager would issue it (it has no image here)."""
    import base64
    import tempfile
    from pathlib import Path

    from control_plane.certs import self_signed_cert

    cert, key = self_signed_cert(Path(tempfile.mkdtemp()))
    kube.create(f"/api/v1/namespaces/{namespace}/secrets", {
        "metadata": {"name": name}, "type": "kubernetes.io/tls",
        "data": {"tls.crt": base64.b64encode(cert.read_bytes()).decode(),
                 "tls.key": base64.b64encode(key.read_bytes()).decode()}})


def _operator_crds(kube) -> None:
    for definition in OPERATOR_CRDS:
        if kube.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                    + definition["metadata"]["name"], ok_missing=True) is None:
            kube.create_crd(definition)


def _platform_reader(kube, namespace: str) -> None:
    """The ServiceAccount an operator brings (rbac.create false), with the rights it needs:
    ``view`` (no Secrets) and the delegated reviews."""
    kube.create(f"/api/v1/namespaces/{namespace}/serviceaccounts",
                {"metadata": {"name": "platform-reader"}})
    for role in ("view", "system:auth-delegator"):
        kube.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "metadata": {"name": f"{namespace}-{role.replace(':', '-')}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "platform-reader",
                          "namespace": namespace}]})


def _clusters_kubeconfig(node):
    """The kubeconfig Secret the clusters values name: ``staging`` is the node's own API
    server through its Service; ``prod`` an address in the reserved range that nothing
    answers (its route is unreachable): a cluster away, which must not keep the replicas
    from being Ready."""
    import base64

    def prepare(kube, namespace: str) -> None:
        ca = base64.b64encode(node.cluster.primary.ca_file.read_bytes()).decode()
        config = {"apiVersion": "v1", "kind": "Config", "clusters": [
            {"name": "staging", "cluster": {"server": "https://198.19.0.1:443",
                                            "certificate-authority-data": ca}},
            {"name": "prod", "cluster": {"server": "https://198.18.255.1:443",
                                         "certificate-authority-data": ca}}],
            "users": [{"name": "reader", "user": {"token": node.cluster.admin.token}}],
            "contexts": [{"name": "staging", "context": {"cluster": "staging", "user": "reader"}},
                         {"name": "arn:aws:eks:eu-west-1:123456789012:cluster/prod",
                          "context": {"cluster": "prod", "user": "reader"}}]}
        kube.create(f"/api/v1/namespaces/{namespace}/secrets", {
            "metadata": {"name": "kube-cache-gateway-kubeconfig"},
            "data": {"kubeconfig": base64.b64encode(json.dumps(config).encode()).decode()}})
    return prepare


def _variant(node, variant: str):
    """What installing ``variant`` needs besides the chart: (a preparation, helm arguments)."""
    name = variant.removesuffix("-values.yaml")
    if name == "cert-manager":
        return (lambda kube, ns: (_operator_crds(kube),
                                  _tls_secret(kube, ns, f"ci-{name}-kube-cache-gateway-tls"))), []
    if name == "existing-serviceaccount":
        return _platform_reader, []
    if name == "clusters":
        return _clusters_kubeconfig(node), []
    if name == "full":
        from control_plane.node import NODE_NAME

        # its topology spread needs a zone; its digest is a placeholder, so the tag is run
        assert _kubectl(node, "label", "--overwrite", "node", NODE_NAME,
                        "topology.kubernetes.io/zone=local").returncode == 0
        return (lambda kube, ns: (_operator_crds(kube),
                                  _tls_secret(kube, ns, "kube-cache-gateway-tls"),
                                  _history_password(kube, ns))), \
            ["--set", "image.digest="]
    if name == "history":
        return _history_volume, []
    return None, []


def _history_password(kube, namespace: str) -> None:
    """The Secret the full variant's PostgreSQL password is read from (its store is a name
    that resolves nowhere: the gateway serves, its history said to be behind)."""
    kube.create(f"/api/v1/namespaces/{namespace}/secrets", {
        "metadata": {"name": "history-db"}, "stringData": {"password": "not-used"}})


def _history_volume(kube, namespace: str) -> None:
    """A PersistentVolume the history variant's claim binds to: the node has no provisioner;
    a directory of this machine's, writable by the gateway's user."""
    import tempfile
    from pathlib import Path

    where = Path(tempfile.mkdtemp(prefix="kcg-history-pv-"))
    where.chmod(0o777)
    name = f"history-{namespace}"
    kube.delete(f"/api/v1/persistentvolumes/{name}")
    kube.create("/api/v1/persistentvolumes", {
        "metadata": {"name": name}, "spec": {
            "capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
            "hostPath": {"path": str(where), "type": "Directory"},
            "claimRef": {"namespace": namespace,
                         "name": "ci-history-kube-cache-gateway-history"}}})


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_values_file_installs_ready_and_passes_helm_test(node, variant, slow_outcomes):
    prepare, arguments = _variant(node, variant)
    name = variant.removesuffix("-values.yaml")
    release = install(node, "-f", str(CHART / "ci" / variant), *arguments, name=f"ci-{name}",
                      prepare=prepare)
    try:
        pods = release.pods()
        assert pods and all(_ready(p) for p in pods), [p["status"] for p in pods]
        tested = _helm(node, "test", release.name, "--namespace", release.namespace, "--logs")
        assert tested.returncode == 0, tested.stdout + tested.stderr
        assert "Phase:          Succeeded" in tested.stdout, tested.stdout
    finally:
        uninstall(release)


# -- a rolling upgrade under subscribers ----------------------------------------------------

class _Follower(threading.Thread):
    """An EventSource user on the Service's address: reconnects with ``Last-Event-ID`` after
    each end (a replica going away says its last words, then closes), until told to stop."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        from tests.deploy.test_scale_out import EventSourceView

        self.view = EventSourceView(url)
        self.stopping = threading.Event()
        self.failures: list[str] = []  # connections that did not become a stream, and why

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.view.connect(seconds=20.0)  # until its replica goes away, mostly
            except (httpx.HTTPError, AssertionError) as exc:
                if not self.stopping.is_set():  # not the quiet stream's read timeout at the end
                    self.failures.append(f"{type(exc).__name__}: {exc}"[:120])
                time.sleep(0.2)


def test_an_upgrade_rolls_one_replica_at_a_time_and_event_sources_lose_nothing(node):
    """``helm upgrade`` changing the pod template, while three EventSource users follow a
    collection through the Service and it changes five times a second: the replicas are
    replaced one at a time (two always Ready, at most one more), each user resumes with
    ``Last-Event-ID`` wherever the Service sends it and ends holding exactly what the API
    server holds — no duplicate, no fresh state (``RESET``) needed."""
    from control_plane.kubeapi import KubeAPI

    # pre-warmed, as streamed resources should be: a new replica follows them before it is
    # Ready, so its ring holds the changes a user resuming on it last saw
    release = install(node, "--set", "authz.mode=none", "--set", "authz.allowAnonymous=true",
                      "--set", "prewarm={configmaps}", name="rolling")
    kube = KubeAPI.for_cluster(node.cluster)
    data = "rolling-data"
    kube.ensure_namespace(data)
    path = f"/api/v1/namespaces/{data}/configmaps"
    followers = [_Follower(release.service_url() + path) for _ in range(3)]
    stop_writing = threading.Event()
    written = []

    def write() -> None:
        n = 0
        while not stop_writing.is_set():
            name = f"cm-{n % 40}"
            try:
                if n % 3 == 2:
                    kube.delete(f"{path}/{name}", ok_missing=True)
                else:
                    existing = kube.get(f"{path}/{name}", ok_missing=True)
                    body = {"metadata": {"name": name}, "data": {"n": str(n)}}
                    if existing is None:
                        kube.create(path, body)
                    else:
                        kube.put(f"{path}/{name}", {**existing, "data": body["data"]})
                written.append(n)
            except Exception:  # noqa: BLE001 - a conflict: the next write goes on
                pass
            n += 1
            time.sleep(0.2)

    writer = threading.Thread(target=write, daemon=True)
    samples: list[tuple[int, int, frozenset]] = []
    watching = threading.Event()

    def watch_pods() -> None:
        while not watching.is_set():
            pods = release.pods()
            live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            samples.append((sum(_ready(p) for p in live), len(live),
                            frozenset(p["metadata"]["name"] for p in pods
                                      if p["metadata"].get("deletionTimestamp"))))
            time.sleep(0.3)

    observer = threading.Thread(target=watch_pods, daemon=True)
    try:
        writer.start()
        for follower in followers:
            follower.start()
        time.sleep(3)
        old = {p["metadata"]["name"] for p in release.pods()}
        observer.start()
        started = time.monotonic()
        upgraded = _helm(node, "upgrade", release.name, str(CHART), "--namespace",
                         release.namespace, "--reuse-values", "--set",
                         "podAnnotations.rolled=once", "--wait", "--timeout",
                         f"{READY_WITHIN}s")
        assert upgraded.returncode == 0, upgraded.stderr
        rolled = time.monotonic() - started
        time.sleep(3)
        stop_writing.set()
        writer.join(5)
        time.sleep(3)  # the last changes reach everyone
    finally:
        stop_writing.set()
        watching.set()
        for follower in followers:
            follower.stopping.set()
        for follower in followers:
            follower.join(25)
        uninstall(release)
    print(f"rolled in {rolled:.1f} s; {len(written)} writes; reconnects "
          f"{[len(f.view.connections) - 1 for f in followers]}, failed connects "
          f"{[f.failures for f in followers]}")
    assert min(ready for ready, _, _ in samples) >= 2, samples
    assert max(live for _, live, _ in samples) <= 3, samples
    deleting = [names & old for _, _, names in samples if names & old]
    assert deleting and all(len(names) == 1 for names in deleting[:1]), deleting
    assert len({n for names in deleting for n in names}) == 2  # both old replicas, one by one
    expected = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                for o in kube.get(path)["items"]}
    for follower in followers:
        view = follower.view
        assert len(view.connections) >= 2, "each user's replica went away at least once"
        assert view.objects == expected
        assert view.duplicates == []
        assert all("RESET" not in kinds for kinds in view.connections[1:]), view.connections
        assert any(resumed for resumed in view.resumed_from[1:])
        assert follower.failures == []  # every reconnection became a stream at once


def _metric(url: str, name: str, resource: str) -> float:
    """One of a replica's per-resource figures (``/metrics`` on its pod's address)."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    found = re.search(rf'^{name}\{{cluster="default",resource="{re.escape(resource)}"\}} (\S+)$',
                      text, re.M)
    return float(found.group(1)) if found else -1.0


def test_a_rolling_upgrade_on_a_shared_history_store_lists_nothing(node, tmp_path):
    """Replicas sharing a PostgreSQL history store (``history.url``): ``helm upgrade`` rolls
    them, and each new replica begins its pre-warmed cache from the store and watches on from
    the stored version — no LIST of its own (its reflector's count, ``kcg_informer_lists``),
    its answers the API server's."""
    from control_plane.kubeapi import KubeAPI
    from control_plane.node_network import GATEWAY, POD_RANGE
    from control_plane.postgres import LocalPostgres

    store = LocalPostgres(listen=("127.0.0.1", GATEWAY)).start()
    kube = KubeAPI.for_cluster(node.cluster)
    data = "history-rolling-data"
    kube.ensure_namespace(data)
    path = f"/api/v1/namespaces/{data}/configmaps"
    for i in range(20):
        kube.create(path, {"metadata": {"name": f"cm-{i}"}, "data": {"n": "0"}})
    password = uuid.uuid4().hex
    url = store.password_role("kcghistory", password, network=POD_RANGE).replace(
        "127.0.0.1", GATEWAY)

    def secret(kube, namespace):
        kube.create(f"/api/v1/namespaces/{namespace}/secrets", {
            "metadata": {"name": "history-db"}, "stringData": {"password": password}})

    release = install(node, "--set", "authz.mode=none", "--set", "authz.allowAnonymous=true",
                      "--set", "prewarm={configmaps}", "--set", "history.enabled=true",
                      "--set", f"history.url={url}", "--set", "history.passwordSecret.name=history-db",
                      name="histroll", prepare=secret)
    stop = threading.Event()

    def write() -> None:
        n = 0
        while not stop.wait(0.2):
            n += 1
            kube.patch(f"{path}/cm-{n % 20}", {"data": {"n": str(n)}})

    writer = threading.Thread(target=write, daemon=True)
    try:
        writer.start()
        first = release.pod_urls()
        # The first replicas start together on an empty store: one lists; the other lists too,
        # or — started a moment later — already begins from what the first one stored.
        began = {n: (_metric(u, "kcg_informer_lists_total", "configmaps.v1"),
                     _metric(u, "kcg_informer_seeded", "configmaps.v1")) for n, u in first.items()}
        assert first and all(lists >= 1 or seeded == 1.0 for lists, seeded in began.values()), began
        assert any(lists >= 1 for lists, _ in began.values()), began
        time.sleep(3)
        upgraded = _helm(node, "upgrade", release.name, str(CHART), "--namespace",
                         release.namespace, "--reuse-values", "--set",
                         "podAnnotations.rolled=once", "--wait", "--timeout", f"{READY_WITHIN}s")
        assert upgraded.returncode == 0, upgraded.stderr
        time.sleep(2)
        stop.set()
        writer.join(10)
        new = {n: u for n, u in release.pod_urls().items() if n not in first}
        assert len(new) >= 2, (first, release.pod_urls())
        for name, replica in new.items():
            assert _metric(replica, "kcg_informer_seeded", "configmaps.v1") == 1.0, name
            assert _metric(replica, "kcg_informer_lists_total", "configmaps.v1") == 0.0, name
            expected = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                        for o in kube.get(path)["items"]}

            def same() -> bool:
                got = httpx.get(f"{replica}{path}", timeout=10).json()["items"]
                return {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                        for o in got} == expected

            wait_until(same, 10, message=f"{name}'s answer the API server's")
    finally:
        stop.set()
        uninstall(release)
        store.stop()


# -- liveness ---------------------------------------------------------------------------------

def _host_pid(pod: dict) -> int:
    """The host's PID of the gateway in ``pod`` (its main process: found by the pod's cgroup
    and its command line)."""
    from pathlib import Path

    uid = pod["metadata"]["uid"]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cgroups = (entry / "cgroup").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if f"pod{uid}" in cgroups and b"kube-cache-gateway" in command and \
                b"multiprocessing" not in command:
            return int(entry.name)
    raise AssertionError(f"no gateway process of pod {uid}")


# Stops one thread of another process and holds it stopped until this helper is killed (or the
# process dies): PTRACE_SEIZE then PTRACE_INTERRUPT stop that thread alone, where a signal
# would stop them all. What it waits for after (a signal to the thread, its death) leaves the
# thread stopped: it is never let go on.
_HOLD_THREAD = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
tid = int(sys.argv[1])
for request, name in ((0x4206, "PTRACE_SEIZE"), (0x4207, "PTRACE_INTERRUPT")):
    if libc.ptrace(request, tid, None, None) != 0:
        sys.exit(f"{name} {tid}: {os.strerror(ctypes.get_errno())}")
os.waitpid(tid, 0x40000000)  # __WALL: the thread's stop
print("held", flush=True)
while True:
    _, status = os.waitpid(tid, 0x40000000)
    if os.WIFEXITED(status) or os.WIFSIGNALED(status):
        break
"""


def _block_a_loop(node) -> tuple[Release, dict, subprocess.Popen, float]:
    """A one-replica release whose gateway's event loop is then blocked from outside: its main
    thread, where the loop runs, stopped and held by a tracer, while its other threads and its
    port live on.

    Before, gdb ran a sleep in that thread (as pyrasite does); on some processors' register
    state gdb 13 cannot return from a call it makes ("Couldn't write extended state status"),
    and the loop went on (seen on an Intel Xeon with kernel 6.18)."""
    import sys

    release = install(node, "--set", "replicas=1", "--set", "podDisruptionBudget.enabled=false",
                      "--set", "terminationGracePeriodSeconds=12", "--set",
                      "preStopDelaySeconds=0", name="stuck")
    [pod] = release.pods()
    blocker = subprocess.Popen([sys.executable, "-c", _HOLD_THREAD, str(_host_pid(pod))],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert blocker.stdout is not None
    said = blocker.stdout.readline()
    if said.strip() != "held":
        blocker.wait(10)
        raise AssertionError(f"the loop's thread was not stopped: {blocker.stderr.read()}")
    return release, pod, blocker, time.monotonic()


def test_a_gateway_whose_event_loop_is_blocked_is_restarted_by_its_liveness_probe(
        node, slow_outcomes):
    """Its event loop blocked, the gateway still holds its port and its threads run, but
    ``/livez`` goes unanswered: the kubelet restarts it, the restart count shows it, and it is
    Ready again."""
    release, pod, _, started = slow_outcomes["stuck"]
    while True:  # asked at least once: the wait may have passed during the tests before
        [now] = release.pods()
        if now["status"]["containerStatuses"][0]["restartCount"] >= 1 and _ready(now):
            break
        if time.monotonic() > started + 120:
            pytest.fail(f"not restarted within 120 s: {now['status']}")
        time.sleep(1)
    import datetime

    ended = now["status"]["containerStatuses"][0]["lastState"]["terminated"]["finishedAt"]
    blocked_at = time.time() - (time.monotonic() - started)
    took = datetime.datetime.fromisoformat(ended.replace("Z", "+00:00")).timestamp() - blocked_at
    print(f"killed by the kubelet {took:.0f} s after its loop was blocked")
    assert now["metadata"]["uid"] == pod["metadata"]["uid"], "the same pod, restarted"
    events = _api(node, f"/api/v1/namespaces/{release.namespace}/events")["items"]
    said = [e["message"] for e in events if e["reason"] == "Unhealthy"]
    assert any(m.startswith("Liveness probe failed") for m in said), said


# -- the ServiceAccount token, rotated ------------------------------------------------------

def _rotate_token(node, pod: dict, token: str) -> None:
    """Write ``token`` into ``pod``'s projected ServiceAccount volume the way the kubelet
    rotates it (its AtomicWriter): the files in a new timestamped directory, then a symlink
    to it renamed over ``..data`` — one atomic step — and the old directory removed."""
    import os
    import shutil
    from pathlib import Path

    volumes = node.workdir / "kubelet" / "pods" / pod["metadata"]["uid"] / "volumes"
    [volume] = (volumes / "kubernetes.io~projected").glob("kube-api-access-*")
    old = volume / os.readlink(volume / "..data")
    new = volume / f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{uuid.uuid4().int % 10**10}"
    new.mkdir()
    for name in ("ca.crt", "namespace"):
        shutil.copy2(old / name, new / name)
    (new / "token").write_text(token)
    link = volume / "..data_tmp"
    link.symlink_to(new.name)
    os.rename(link, volume / "..data")
    shutil.rmtree(old)
    assert Path(volume / "token").read_text() == token


# resources the chart's ClusterRole grants, each listed once: a first list starts an informer
# with the token the gateway holds at that moment
_FRESH = ("limitranges", "resourcequotas", "persistentvolumeclaims", "persistentvolumes",
          "replicationcontrollers", "serviceaccounts", "endpoints", "services", "events",
          "nodes", "namespaces", "pods", "apis/apps/v1/deployments", "apis/apps/v1/replicasets",
          "apis/apps/v1/statefulsets", "apis/apps/v1/daemonsets",
          "apis/apps/v1/controllerrevisions", "apis/batch/v1/jobs",
          "apis/policy/v1beta1/poddisruptionbudgets",
          "apis/networking.k8s.io/v1/ingresses", "apis/networking.k8s.io/v1/networkpolicies",
          "apis/storage.k8s.io/v1/storageclasses")


class _TokenUse(threading.Thread):
    """Lists a resource never listed before every 4 s through ``url`` until one is refused,
    and keeps the answer and when it came."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.started = time.monotonic()
        self.refused: httpx.Response | None = None
        self.seconds = 0.0
        self.unexpected: list[str] = []

    def run(self) -> None:
        for path in [p if p.startswith("apis/") else f"api/v1/{p}" for p in _FRESH[1:]]:
            try:
                answer = httpx.get(f"{self.url}/{path}", timeout=30)
            except httpx.HTTPError as exc:
                self.unexpected.append(f"{path}: {exc}")
                continue
            if answer.status_code == 403:
                self.refused, self.seconds = answer, time.monotonic() - self.started
                return
            if answer.status_code != 200:
                self.unexpected.append(f"{path}: {answer.status_code} {answer.text[:200]}")
            time.sleep(4)


def _rotate_a_token(node) -> tuple[Release, _TokenUse]:
    """A one-replica release whose token file is then rotated to another ServiceAccount's, one
    with no rights, and a thread that lists fresh resources until one is refused."""
    from control_plane.kubeapi import KubeAPI

    release = install(node, "--set", "authz.mode=none", "--set", "authz.allowAnonymous=true",
                      "--set", "replicas=1", "--set", "podDisruptionBudget.enabled=false",
                      name="rotated")
    kube = KubeAPI.for_cluster(node.cluster)
    accounts = f"/api/v1/namespaces/{release.namespace}/serviceaccounts"
    kube.create(accounts, {"metadata": {"name": "stand-in"}})
    token = kube.create(f"{accounts}/stand-in/token",
                        {"spec": {"expirationSeconds": 3600}})["status"]["token"]
    url = release.service_url()
    assert httpx.get(f"{url}/api/v1/{_FRESH[0]}", timeout=30).status_code == 200
    [pod] = release.pods()
    _rotate_token(node, pod, token)
    use = _TokenUse(url)
    use.start()
    return release, use


@pytest.fixture(scope="module")
def slow_outcomes(node):
    """The two scenarios whose outcome takes about a minute — a blocked event loop, a rotated
    token — set going together when the values files are installed, so that their waits
    overlap those installs and the rolling upgrade (the node's share of the suite: 5.2
    minutes as they ran one after the other)."""
    stuck = _block_a_loop(node)
    try:
        rotated = _rotate_a_token(node)
    except BaseException:
        stuck[2].kill()
        stuck[2].communicate()  # its pipes closed
        uninstall(stuck[0])
        raise
    try:
        yield {"stuck": stuck, "rotated": rotated}
    finally:
        stuck[2].kill()
        stuck[2].communicate()  # its pipes closed
        rotated[1].join(10)
        for release in (stuck[0], rotated[0]):
            uninstall(release)


def test_a_rotated_token_is_read_again_and_used(node, slow_outcomes):
    """The kubelet rotates the projected token (at 80 % of its life); the gateway must read the
    file again, not keep the one it started with. Here the new token is another
    ServiceAccount's, one with no rights, so its use shows: the next resource first listed
    is refused in that account's name (the gateway's 403 names its own identity). The
    official client re-reads the token once a minute: used 57 s after the swap alone, later
    while the rest of the suite loads the node and the API server, so the wait is generous
    (it ends as soon as the refusal comes)."""
    release, use = slow_outcomes["rotated"]
    use.join(max(0.0, use.started + 180 - time.monotonic()))
    assert use.refused is not None, f"the rotated token was not used: {use.unexpected}"
    who = f"system:serviceaccount:{release.namespace}:stand-in"
    assert who in use.refused.json()["message"], use.refused.text
    assert use.unexpected == []
    print(f"the rotated token used {use.seconds:.0f} s after the swap")
    [still] = release.pods()
    assert still["status"]["containerStatuses"][0]["restartCount"] == 0
