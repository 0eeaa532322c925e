"""kubectl (at 1.20 and at 1.35) and the official Python client, unmodified, print and get the
same through the gateway as against the API server; a current kubectl discovers every
resource in two requests and explains fields from the API server's OpenAPI."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import uuid

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from control_plane.client_tools import kubectl as kubectl_at

pytestmark = pytest.mark.cluster

_AGE = re.compile(r"(?<=\s)\d+[smhdy](\d+[smh])?(?=\s|$)")


@pytest.fixture
def version(kubectl_version) -> str:
    """Each kubectl test runs at the API server's version and at a current one."""
    return kubectl_version


def kubectl(*args: str, version: str = "1.35", timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(kubectl_at(version)), *args], capture_output=True, text=True,
                          timeout=timeout)


def normalise(text: str) -> str:
    return _AGE.sub("AGE", text)


def both(kubeconfig, url, args: list[str], version: str) -> tuple[str, str]:
    direct = kubectl("--kubeconfig", str(kubeconfig), *args, version=version)
    ours = kubectl("--server", url, *args, version=version)
    assert direct.returncode == 0, direct.stderr
    assert ours.returncode == 0, ours.stderr
    return direct.stdout, ours.stdout


TABLE_COMMANDS = [
    ["get", "pods", "-n", "demo-shop"],
    ["get", "pods", "-n", "demo-shop", "-o", "wide"],
    ["get", "pods", "-A", "-l", "app=web"],
    ["get", "pods", "-n", "demo-shop", "-l", "app in (api,migrate)"],
    ["get", "pods", "-n", "demo-shop", "--field-selector", "status.phase=Running"],
    ["get", "pods", "-n", "demo-shop", "--show-labels"],
    ["get", "pod", "api-1", "-n", "demo-shop"],
    ["get", "deployments", "-A", "-o", "wide"],
    ["get", "deploy", "web", "-n", "demo-shop"],
    ["get", "configmaps", "-n", "demo-shop", "-l", "demo=yes"],
    ["get", "widgets", "-A", "-o", "wide"],
    ["get", "widgets.example.com", "gizmo", "-n", "demo-shop"],
    ["get", "nodes", "-o", "wide"],
    ["get", "namespace", "demo-shop"],
    ["get", "all", "-n", "demo-shop"],
    ["describe", "pod", "web-1", "-n", "demo-shop"],
    ["describe", "deployment", "web", "-n", "demo-shop"],
    ["rollout", "status", "deployment/web", "-n", "demo-shop", "--timeout=20s"],
]


@pytest.mark.parametrize("args", TABLE_COMMANDS, ids=lambda a: " ".join(a))
def test_kubectl_prints_the_same_rows(kubeconfig, gateway, demo, args, version):
    for attempt in range(3):  # the cache may trail the apiserver by milliseconds
        direct, ours = both(kubeconfig, gateway.url, args, version)
        if normalise(direct) == normalise(ours):
            break
        time.sleep(0.3)
    assert normalise(ours) == normalise(direct)
    assert ours.strip(), "nothing printed"


@pytest.mark.parametrize("args", [
    ["get", "pods", "-n", "demo-shop", "-o", "json"],
    ["get", "pod", "web-1", "-n", "demo-shop", "-o", "json"],
    ["get", "deployments", "-A", "-o", "yaml"],
    ["get", "widgets", "-n", "demo-shop", "-o", "yaml"],
    ["get", "configmap", "settings", "-n", "demo-shop", "-o", "yaml"],
], ids=lambda a: " ".join(a))
def test_kubectl_json_and_yaml_show_the_same_objects(kubeconfig, gateway, demo, args, version):
    parse = yaml.safe_load if "yaml" in args else json.loads

    def load(text: str) -> dict:
        """The objects without managedFields: the gateway drops them (--keep-managed-fields
        keeps them), and kubectl before 1.21 prints them where later ones do not."""
        doc = parse(text)
        for obj in doc.get("items", [doc]):
            obj.get("metadata", {}).pop("managedFields", None)
        return doc

    for attempt in range(3):
        direct, ours = both(kubeconfig, gateway.url, args, version)
        if load(direct) == load(ours):
            break
        time.sleep(0.3)
    assert load(ours) == load(direct)


def test_kubectl_get_watch_prints_changes(kubeconfig, gateway, kube, namespace, version):
    kube.create(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "w0"}})
    proc = subprocess.Popen([str(kubectl_at(version)), "--server", gateway.url, "get", "configmaps", "-n",
                             namespace, "-w"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")))
    reader.start()
    try:
        deadline = time.monotonic() + 15
        while not any(line.startswith("w0") for line in lines) and time.monotonic() < deadline:
            time.sleep(0.05)
        kube.create(f"/api/v1/namespaces/{namespace}/configmaps",
                    {"metadata": {"name": "w1"}, "data": {"a": "1"}})
        kube.patch(f"/api/v1/namespaces/{namespace}/configmaps/w1", {"data": {"b": "2"}})
        while sum(line.startswith("w1") for line in lines) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(10)
        reader.join(5)
        proc.stdout.close()
        proc.stderr.close()
    assert lines[0].split()[:2] == ["NAME", "DATA"]
    w1 = [line.split()[:2] for line in lines if line.startswith("w1")]
    assert w1[:2] == [["w1", "1"], ["w1", "2"]]


def python_client(url: str) -> k8s.ApiClient:
    config = k8s.Configuration()
    config.host = url
    return k8s.ApiClient(config)


def test_official_python_client_lists_and_reads(gateway, kube):
    api = python_client(gateway.url)
    try:
        core, apps = k8s.CoreV1Api(api), k8s.AppsV1Api(api)
        pods = core.list_namespaced_pod("demo-shop", label_selector="app=web")
        assert sorted(p.metadata.name for p in pods.items) == ["old-web", "web-1", "web-2"]
        assert pods.metadata.resource_version
        everywhere = core.list_pod_for_all_namespaces(field_selector="metadata.namespace=demo-shop")
        assert len(everywhere.items) == len(kube.get("/api/v1/namespaces/demo-shop/pods")["items"])
        pod = core.read_namespaced_pod("api-1", "demo-shop")
        assert pod.status.container_statuses[0].state.waiting.reason == "CrashLoopBackOff"
        deployments = apps.list_deployment_for_all_namespaces()
        assert {d.metadata.name for d in deployments.items} >= {"web", "api"}
        widgets = k8s.CustomObjectsApi(api).list_namespaced_custom_object(
            "example.com", "v1", "demo-shop", "widgets")
        assert {w["metadata"]["name"] for w in widgets["items"]} == {"gizmo", "sprocket", "doohickey"}
        with pytest.raises(ApiException) as info:
            core.read_namespaced_config_map("nope", "demo-shop")
        assert info.value.status == 404
        with pytest.raises(ApiException) as denied:
            core.list_secret_for_all_namespaces()
        assert denied.value.status == 403
    finally:
        api.close()


def test_official_python_client_watch_streams_changes_and_resumes(gateway, kube, namespace):
    api = python_client(gateway.url)
    try:
        core = k8s.CoreV1Api(api)
        base = f"/api/v1/namespaces/{namespace}/configmaps"
        # Listed only once the gateway's hub has it: its list version must cover "before".
        gateway.wait_seen(kube.create(base, {"metadata": {"name": "before"}}))
        listed = core.list_namespaced_config_map(namespace)
        while not listed.items:
            time.sleep(0.05)
            listed = core.list_namespaced_config_map(namespace)
        rv = listed.metadata.resource_version
        seen: list[tuple[str, str]] = []

        def mutate():
            time.sleep(0.3)
            kube.create(base, {"metadata": {"name": "during"}})
            kube.patch(f"{base}/during", {"data": {"x": "1"}})
            kube.delete(f"{base}/during")

        thread = threading.Thread(target=mutate)
        thread.start()
        w = k8s_watch.Watch()
        for event in w.stream(core.list_namespaced_config_map, namespace, resource_version=rv,
                              timeout_seconds=10):
            seen.append((event["type"], event["object"].metadata.name))
            if event["type"] == "DELETED":
                w.stop()
        thread.join()
        assert seen == [("ADDED", "during"), ("MODIFIED", "during"), ("DELETED", "during")]
    finally:
        api.close()


def test_official_python_client_gets_410_for_a_too_old_version(gateway):
    api = python_client(gateway.url)
    try:
        core = k8s.CoreV1Api(api)
        w = k8s_watch.Watch()
        with pytest.raises(ApiException) as info:
            for _ in w.stream(core.list_namespaced_config_map, "demo-shop", resource_version="1",
                              timeout_seconds=5):
                pass
        assert info.value.status == 410
    finally:
        api.close()


def test_kubectl_reads_discovery_and_short_names(kubeconfig, gateway, demo, version):
    got = kubectl("--server", gateway.url, "api-resources", "--api-group=apps", "-o", "name",
                  version=version)
    assert got.returncode == 0, got.stderr
    assert "deployments.apps" in got.stdout.split()
    po = kubectl("--server", gateway.url, "get", "po", "-n", "demo-shop", "-o", "name",
                 version=version)
    assert "pod/web-1" in po.stdout.split()
    direct, ours = both(kubeconfig, gateway.url, ["api-resources"], version)
    assert ours == direct, "every resource, short name, group and kind, as the API server lists"


def test_kubectl_errors_are_kubectl_shaped(gateway, version):
    missing = kubectl("--server", gateway.url, "get", "pod", "nope-" + uuid.uuid4().hex[:6],
                      "-n", "demo-shop", version=version)
    assert missing.returncode != 0 and "NotFound" in missing.stderr
    denied = kubectl("--server", gateway.url, "get", "secrets", "-A", version=version)
    assert denied.returncode != 0 and "Forbidden" in denied.stderr
    write = kubectl("--server", gateway.url, "delete", "pod", "web-1", "-n", "demo-shop",
                    version=version)
    assert write.returncode != 0 and "MethodNotAllowed" in write.stderr


@pytest.mark.parametrize("field", ["pods", "pods.spec.containers.image", "deployments.spec.strategy",
                                   "widgets.spec"])
def test_kubectl_explain_says_what_the_api_server_says(kubeconfig, gateway, demo, version, field):
    """From the API server's OpenAPI, kept by the gateway (v3 where the API server has it,
    else v2: JSON for kubectl 1.35, protobuf for 1.20)."""
    direct, ours = both(kubeconfig, gateway.url, ["explain", field], version)
    assert ours == direct and ("FIELD" in ours or "DESCRIPTION" in ours)


def _requests(stderr: str) -> list[str]:
    """The requests kubectl's ``-v=6`` log says it made: method and URL (kubectl 1.20 logs
    ``GET https://...``, later ones ``"Response" verb="GET" url="https://..."``)."""
    return (re.findall(r'"Response" verb="(\w+)" url="([^"]+)"', stderr)
            or re.findall(r"\b(GET|HEAD|POST) (https?://\S+)", stderr))


def test_a_current_kubectl_discovers_everything_in_two_requests(kubeconfig, gateway, demo,
                                                                tmp_path):
    """With an empty cache: against the 1.20 API server one request per group version;
    through the gateway, aggregated discovery: /api, /apis, then the list."""
    counts = {}
    for name, target in (("direct", ["--kubeconfig", str(kubeconfig)]),
                         ("ours", ["--server", gateway.url])):
        cache = tmp_path / name
        done = kubectl(*target, "--cache-dir", str(cache), "-v=6", "get", "deployments", "-A",
                       version="1.35")
        assert done.returncode == 0, done.stderr[-2000:]
        counts[name] = _requests(done.stderr)
        assert "web" in done.stdout
    paths = [url.split(gateway.url, 1)[-1].split("?")[0] for _, url in counts["ours"]]
    assert paths == ["/api", "/apis", "/apis/apps/v1/deployments"], paths
    assert len(counts["direct"]) > 10 * len(counts["ours"]), (len(counts["direct"]), paths)


def test_kubectl_events_prints_the_same(kubeconfig, gateway, demo):
    """``kubectl events`` (1.26 and later: kubectl 1.35 only)."""
    for attempt in range(3):
        direct, ours = both(kubeconfig, gateway.url, ["events", "-n", "demo-shop"], "1.35")
        if normalise(direct) == normalise(ours):
            break
        time.sleep(0.3)
    assert normalise(ours) == normalise(direct)


def test_kubectl_wait_for_delete_sees_the_deletion_through_the_gateway(gateway, kube, namespace,
                                                                       version):
    """``kubectl wait`` watches through the gateway until the object is gone."""
    code, out, err = _wait_for_delete(str(kubectl_at(version)), gateway, kube, namespace)
    assert code == 0, err
    assert "configmap/doomed" in out  # "deleted" (kubectl 1.35), "condition met" (1.20)


def _wait_for_delete(binary: str, gateway, kube, namespace: str,
                     *flags: str) -> tuple[int, str, str]:
    """``kubectl wait --for=delete`` of a ConfigMap deleted while it waits: (exit code,
    stdout, stderr)."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    kube.create(path, {"metadata": {"name": "doomed"}})
    waiting = subprocess.Popen([binary, "--server", gateway.url, *flags, "wait",
                                "--for=delete", "configmap/doomed", "-n", namespace,
                                "--timeout=30s"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        time.sleep(1.0)  # kubectl has found the object and watches it
        kube.delete(f"{path}/doomed")
        out, err = waiting.communicate(timeout=40)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.communicate()
    return waiting.returncode, out, err


def _statuses(stderr: str) -> list[tuple[str, int]]:
    """(URL, status) of each response kubectl -v=6 logged, in either of its log formats."""
    found = [(u, int(c)) for u, c in re.findall(r'url="([^"]+)" status="(\d{3})', stderr)]
    found += [(u, int(c)) for u, c in re.findall(r"GET (\S+) (\d{3}) ", stderr)]
    return found


def test_kubectl_135_waits_and_follows_rollouts_without_a_refused_request(gateway, kube,
                                                                         namespace, demo):
    """kubectl 1.35's wait and rollout status watch as client-go 1.35 does, watch-list first:
    the gateway once answered that 422 (as the 1.20 API server it copied), so each command
    began with a refused request and a fallback LIST. Counted with -v=6: none refused."""
    binary = str(kubectl_at("1.35"))
    code, _, err = _wait_for_delete(binary, gateway, kube, namespace, "-v=6")
    assert code == 0, err[-3000:]
    rollout = subprocess.run([binary, "--server", gateway.url, "-v=6", "rollout", "status",
                              "deployment/web", "-n", "demo-shop", "--timeout=20s"],
                             capture_output=True, text=True, timeout=40)
    assert rollout.returncode == 0, rollout.stderr[-3000:]
    for said in (err, rollout.stderr):
        answered = _statuses(said)
        assert answered, said[-2000:]
        assert [a for a in answered if a[1] >= 400] == [], answered
        assert any("sendInitialEvents=true" in u for u, _ in answered), \
            "kubectl 1.35 asked for a watch-list and was answered"



def test_kubectl_135_delete_is_refused_as_a_write_and_nothing_before_it(gateway, kube, namespace):
    """``kubectl delete`` through a read-only gateway: what it reads first (the object, and
    discovery) is answered; its DELETE is the one refusal, the API server's 405 in a
    ``Status`` kubectl prints as such — not a failed watch-list or a fallback; the object is
    still there. With ``--dry-run=client`` nothing at all is refused."""
    binary = str(kubectl_at("1.35"))
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    kube.create(path, {"metadata": {"name": "kept"}})
    base = [binary, "--server", gateway.url, "-v=6", "delete", "configmap/kept", "-n", namespace,
            "--timeout=20s"]
    refused = subprocess.run(base, capture_output=True, text=True, timeout=40)
    assert refused.returncode != 0
    assert "Error from server (MethodNotAllowed): the gateway is read-only" in refused.stderr
    answered = re.findall(r'verb="(\w+)" url="([^"]+)" status="(\d{3})', refused.stderr)
    assert answered, refused.stderr[-2000:]
    assert [(verb, int(code)) for verb, _, code in answered if int(code) >= 400] == \
        [("DELETE", 405)], answered
    assert kube.get(f"{path}/kept")["metadata"]["name"] == "kept"
    dry = subprocess.run([*base, "--dry-run=client"], capture_output=True, text=True, timeout=40)
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert dry.stdout.startswith('configmap "kept" deleted') and "(dry run)" in dry.stdout
    assert [a for a in _statuses(dry.stderr) if a[1] >= 400] == []


# client-go 1.35 metadata/metadata.go: the Accept of its List, and of its Get and Watch
METADATA_LIST = ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;"
                 "v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
                 "application/json")
METADATA_ONE = ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json")


def _json_form(accept: str) -> str:
    """The JSON form of a metadata Accept: what the API server, which speaks protobuf and
    answers the first form, is asked for the comparison (the gateway chooses it itself)."""
    return accept.split(",")[1]


def test_client_gos_metadata_client_gets_what_the_api_server_answers(local_cluster, gateway, kube,
                                                                      namespace):
    """Lists, gets and watches asked as the metadata client asks them: the gateway answered
    whole objects (its JSON fallback), every byte the client asked not to receive, and on a
    watch a shape metadata informers break on. Each answer now equals the API server's own
    (managedFields aside: the gateway drops them), and the wrong form is its 406."""
    import ssl

    import httpx

    from tests.helpers import wait_until

    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for i in range(3):
        kube.create(path, {"metadata": {"name": f"m{i}", "labels": {"k": str(i)},
                                        "annotations": {"a": "b"}}, "data": {"big": "x" * 5000}})
    server = local_cluster.primary
    direct = httpx.Client(base_url=server.url, timeout=30,
                          verify=ssl.create_default_context(cafile=str(server.ca_file)),
                          headers={"Authorization": f"Bearer {local_cluster.admin.token}"})
    ours = httpx.Client(base_url=gateway.url, timeout=30)

    def same(got: httpx.Response, want: httpx.Response) -> dict:
        assert got.status_code == want.status_code == 200, (got.text[:300], want.text[:300])
        mine, theirs = got.json(), want.json()
        for doc in (mine, theirs):
            for item in doc.get("items", [doc]):
                item.get("metadata", {}).pop("managedFields", None)
            doc.get("metadata", {}).pop("resourceVersion", None) if "items" in doc else None
        assert mine == theirs
        return mine

    try:
        wait_until(lambda: len(ours.get(path).json()["items"]) == 3, 10, message="cached")
        listed = same(ours.get(path, headers={"Accept": METADATA_LIST}),
                      direct.get(path, headers={"Accept": _json_form(METADATA_LIST)}))
        assert listed["kind"] == "PartialObjectMetadataList"
        assert listed["apiVersion"] == "meta.k8s.io/v1"
        assert {i["kind"] for i in listed["items"]} == {"PartialObjectMetadata"}
        assert all(set(i) == {"kind", "apiVersion", "metadata"} for i in listed["items"])
        one = same(ours.get(f"{path}/m1", headers={"Accept": METADATA_ONE}),
                   direct.get(f"{path}/m1", headers={"Accept": _json_form(METADATA_ONE)}))
        assert one["metadata"]["labels"] == {"k": "1"} and "data" not in one
        for url, accept in ((path, METADATA_ONE), (f"{path}/m1", METADATA_LIST)):
            mine = ours.get(url, headers={"Accept": accept})
            theirs = direct.get(url, headers={"Accept": _json_form(accept)})
            assert mine.status_code == theirs.status_code == 406, (url, mine.text, theirs.text)
            assert mine.json()["reason"] == theirs.json()["reason"] == "NotAcceptable"
        rv = ours.get(path).json()["metadata"]["resourceVersion"]
        with ours.stream("GET", path, params={"watch": "1", "resourceVersion": rv},
                         headers={"Accept": METADATA_ONE}) as stream:
            kube.patch(f"{path}/m2", {"metadata": {"labels": {"k": "changed"}}})
            event = json.loads(next(stream.iter_lines()))
        assert event["type"] == "MODIFIED"
        assert set(event["object"]) == {"kind", "apiVersion", "metadata"}
        assert (event["object"]["kind"], event["object"]["metadata"]["labels"]) == (
            "PartialObjectMetadata", {"k": "changed"})
    finally:
        direct.close()
        ours.close()
