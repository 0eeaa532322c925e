"""Several clusters behind one gateway, from a clusters file followed while it serves
(in-memory clusters; the same against real API servers: ``test_cluster_several_live``)."""

from __future__ import annotations

import json
import threading

import httpx

from control_plane.fake import FakeCluster
from tests.app.conftest import clusters_file, run_fake_clusters
from tests.helpers import wait_until

CM = "/api/v1/namespaces/{ns}/configmaps"


def _fake(*names: str, ns: str = "apps") -> FakeCluster:
    fake = FakeCluster()
    fake.ensure_namespace(ns)
    for name in names:
        fake.create(CM.format(ns=ns), {"metadata": {"name": name}})
    return fake


def _names(answer: httpx.Response) -> list[str]:
    assert answer.status_code == 200, answer.text
    return [item["metadata"]["name"] for item in answer.json()["items"]]


def test_each_cluster_is_served_under_its_name_and_the_default_at_the_plain_paths(tmp_path):
    fakes = {"a": _fake("in-a"), "b": _fake("in-b1", "in-b2")}
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml", default="b") as gw, \
            httpx.Client(base_url=gw.url, timeout=30) as http:
        path = CM.format(ns="apps")
        assert _names(http.get(f"/clusters/a{path}")) == ["in-a"]
        assert _names(http.get(f"/clusters/b{path}")) == ["in-b1", "in-b2"]
        assert _names(http.get(path)) == ["in-b1", "in-b2"], "the default at the plain paths"
        assert _names(http.get("/clusters/a/core/v1/namespaces/apps/configmaps")) == ["in-a"]
        one = http.get(f"/clusters/a{path}/in-a")
        assert one.status_code == 200 and one.json()["metadata"]["name"] == "in-a"
        assert http.get(f"/clusters/b{path}/in-a").status_code == 404
        # discovery and /version are each cluster's own
        assert http.get("/clusters/a/api/v1").json()["kind"] == "APIResourceList"
        assert http.get("/clusters/a/version").status_code == 200
        assert http.get("/clusters/a/apis").json()["kind"] == "APIGroupList"
        # the page, under its cluster: its relative links stay there
        moved = http.get("/clusters/a/ui", follow_redirects=False)
        assert moved.status_code == 301 and moved.headers["location"] == "/clusters/a/ui/"
        assert http.get("/clusters/a/ui/").status_code == 200


def test_an_unknown_cluster_is_a_404_status_naming_it(tmp_path):
    with run_fake_clusters({"a": _fake()}, tmp_path / "clusters.yaml") as gw:
        for path in ("/clusters/zz/api/v1/pods", "/clusters/zz/apis", "/clusters/zz/version",
                     "/clusters/zz", "/clusters/zz/ui/"):
            answer = httpx.get(gw.url + path)
            assert answer.status_code == 404, path
            body = answer.json()
            assert body["kind"] == "Status" and body["reason"] == "NotFound"
            assert "'zz'" in body["message"] and body["details"]["kind"] == "clusters"
        assert httpx.get(gw.url + "/clusters//api/v1/pods").status_code == 404
        assert httpx.get(gw.url + "/clusters/").json()["kind"] == "ClusterList"
        # the gateway's own paths exist at the top only: no cluster prefix stands for them
        for path in ("/healthz", "/livez", "/readyz", "/metrics", "/clusters"):
            assert httpx.get(gw.url + path).status_code == 200, path
            for prefix in ("/clusters/a", "/clusters/zz", "/clusters/*"):
                answer = httpx.get(gw.url + prefix + path)
                assert answer.status_code == 404, prefix + path
                assert "exists only at the top" in answer.json()["message"]


def test_get_clusters_lists_every_cluster_in_name_order_without_addresses(tmp_path):
    fakes = {"zeta": _fake(), "alpha": _fake(), "mid": _fake()}
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml", default="mid") as gw:
        wait_until(lambda: all(c["ready"] for c in httpx.get(gw.url + "/clusters").json()["items"]),
                   20, message="every cluster ready")
        listed = httpx.get(gw.url + "/clusters").json()
        assert listed["kind"] == "ClusterList"
        assert [c["name"] for c in listed["items"]] == ["alpha", "mid", "zeta"]
        assert [c["default"] for c in listed["items"]] == [False, True, False]
        for item in listed["items"]:
            assert set(item) == {"name", "default", "ready", "lastSyncedAt", "resourcesCached"}
            assert item["lastSyncedAt"].endswith("Z")
        httpx.get(gw.url + "/clusters/zeta" + CM.format(ns="apps"))
        counts = {c["name"]: c["resourcesCached"] for c in httpx.get(gw.url + "/clusters").json()["items"]}
        assert counts["zeta"] == 1 and counts["alpha"] == 0


class _Connecting(dict):
    """Fakes by name, where taking one named in ``held`` waits (its connection is slow)."""

    def __init__(self, fakes: dict) -> None:
        super().__init__(fakes)
        self.held: dict[str, threading.Event] = {}
        self.asked = threading.Event()

    def __getitem__(self, name: str) -> FakeCluster:
        if name in self.held:
            self.asked.set()
            self.held[name].wait(15)
        return super().__getitem__(name)


def test_a_cluster_added_to_the_file_is_served_and_one_removed_ends_its_streams_with_404(tmp_path):
    """b removed: 404. c added as the new default: while it is being connected its paths
    and the plain ones answer 503 with Retry-After (never a 404 saying it is not served),
    and /clusters lists it not ready; then it is served. a, unchanged, keeps its stream
    until it is removed."""
    fakes = _Connecting({"a": _fake("in-a"), "b": _fake("in-b")})
    path = tmp_path / "clusters.yaml"
    with run_fake_clusters(fakes, path) as gw:
        gw.gateway  # started
        clusters_file(path, ["a"])
        wait_until(lambda: httpx.get(gw.url + "/clusters/b/api/v1").status_code == 404, 10,
                   message="b gone")
        fakes["c"] = _fake("in-c")
        fakes.held["c"] = threading.Event()
        lines: list[dict] = []
        with httpx.stream("GET", gw.url + "/clusters/a" + CM.format(ns="apps") + "?watch=true",
                          timeout=30) as watch:
            reader = threading.Thread(target=lambda: lines.extend(
                json.loads(l) for l in watch.iter_lines() if l), daemon=True)
            reader.start()
            wait_until(lambda: lines, 10, message="the watch's first event")
            clusters_file(path, ["a", "c"], default="c")
            assert fakes.asked.wait(10), "c is being connected"
            for url in (CM.format(ns="apps"), "/clusters/c" + CM.format(ns="apps")):
                answer = httpx.get(gw.url + url)
                assert answer.status_code == 503, answer.text
                assert answer.json()["message"] == "cluster 'c' is being connected"
                assert answer.headers["retry-after"] == "1"
            listed = {c["name"]: c for c in httpx.get(gw.url + "/clusters").json()["items"]}
            assert listed["c"]["ready"] is False and listed["c"]["default"] is True
            assert listed["c"]["message"] == "being connected"
            fakes.held.pop("c").set()
            wait_until(lambda: httpx.get(gw.url + CM.format(ns="apps")).status_code == 200, 10,
                       message="c served, and the default")
            assert _names(httpx.get(gw.url + CM.format(ns="apps"))) == ["in-c"]
            assert lines[-1]["type"] == "ADDED", "a's stream goes on: a is unchanged"
            clusters_file(path, ["c"])
            reader.join(10)
        assert not reader.is_alive(), "a's stream ended when a was removed"
        assert lines[-1]["type"] == "ERROR"
        assert lines[-1]["object"]["code"] == 404 and "'a'" in lines[-1]["object"]["message"]


def test_a_malformed_change_keeps_the_clusters_served(tmp_path):
    path = tmp_path / "clusters.yaml"
    with run_fake_clusters({"a": _fake("in-a")}, path) as gw:
        path.write_text("clusters:\n  - name: Not_A_Label\n")
        wait_until(lambda: gw.gateway is not None and _source(gw).refused == 1, 10,
                   message="the change refused")
        assert _names(httpx.get(gw.url + "/clusters/a" + CM.format(ns="apps"))) == ["in-a"]


def _source(gw):
    return gw.app.state.clusters_source


def test_without_a_file_the_default_stays_while_its_secret_lasts():
    from app.clusters.config import ClusterSpec
    from app.clusters.sources import ClusterSet

    class Gateway:
        default_name = ""

    clusters = ClusterSet(Gateway(), connect=None)
    clusters._said[ClusterSet.SECRETS] = [ClusterSpec("lab", server="https://l")]
    assert [s.default for s in clusters.merged()] == [True]
    Gateway.default_name = "lab"
    clusters._said[ClusterSet.SECRETS] = [ClusterSpec("edge", server="https://e"),
                                          ClusterSpec("lab", server="https://l")]
    assert {s.name: s.default for s in clusters.merged()} == {"edge": False, "lab": True}
    clusters._said[ClusterSet.SECRETS] = [ClusterSpec("edge", server="https://e")]
    assert [s.default for s in clusters.merged()] == [True], "lab gone: the first"
    clusters._said[ClusterSet.FILE] = [ClusterSpec("a"), ClusterSpec("b", default=True)]
    assert [(s.name, s.default) for s in clusters.merged()] == [
        ("a", False), ("b", True), ("edge", False)], "the file's default, as the file says"


def test_a_cluster_that_cannot_be_connected_is_listed_not_ready_and_holds_no_replica_hostage(tmp_path):
    from app.clusters.connect import connect
    from app.process.kubeconfig import CredentialsError
    from app.query.budget import QueryMemory
    from app.settings import Settings
    from control_plane.cluster import free_port
    from tests.app.conftest import RunningGateway

    good = _fake("in-good")
    path = clusters_file(tmp_path / "clusters.yaml", ["good", "broken"])
    settings = Settings(port=free_port(), clusters=path)

    def connector(spec, is_default):
        if spec.name == "broken":
            raise CredentialsError("the credentials of context 'broken' could not be loaded: "
                                   "exec plugin failed talking to https://10.1.2.3:6443")
        return connect(spec, settings, QueryMemory(), is_default,
                       lister_watcher_func=good.lister_watcher, discovery=good.discovery())

    gw = RunningGateway(settings, connector=connector).start()
    try:
        listed = {c["name"]: c for c in httpx.get(gw.url + "/clusters").json()["items"]}
        assert listed["broken"]["ready"] is False and listed["broken"]["resourcesCached"] == 0
        assert listed["broken"]["message"] == ("its credentials could not be loaded (the "
                                               "gateway's log says why)")
        refused = httpx.get(gw.url + "/clusters/broken/api/v1/namespaces/apps/configmaps")
        for said in (listed["broken"]["message"], refused.text, refused.headers.get("warning", "")):
            assert "10.1.2.3" not in said and "exec plugin" not in said, "no address, no output"
        refused = httpx.get(gw.url + "/clusters/broken/api/v1/namespaces/apps/configmaps")
        assert refused.status_code == 503 and refused.headers["retry-after"]
        assert refused.json()["reason"] == "ServiceUnavailable"
        assert _names(httpx.get(gw.url + "/clusters/good" + CM.format(ns="apps"))) == ["in-good"]
        ready = httpx.get(gw.url + "/readyz?verbose")
        assert ready.status_code == 200, ready.text
        assert "[+]cluster-broken-connected excluded\n" in ready.text
        assert "exec plugin" not in ready.text and "10.1.2.3" not in ready.text, \
            "an open probe names its checks, never a cause"
    finally:
        gw.stop()


def test_when_the_default_cluster_cannot_be_connected_the_plain_paths_say_so(tmp_path):
    from app.settings import Settings
    from control_plane.cluster import free_port
    from tests.app.conftest import RunningGateway

    path = clusters_file(tmp_path / "clusters.yaml", ["only"])

    def connector(spec, is_default):
        raise RuntimeError("no route to the API server")

    gw = RunningGateway(Settings(port=free_port(), clusters=path), connector=connector).start()
    try:
        answer = httpx.get(gw.url + "/api/v1/pods")
        assert answer.status_code == 503 and "'only'" in answer.json()["message"]
        assert httpx.get(gw.url + "/readyz").status_code == 503
    finally:
        gw.stop()


def test_a_cluster_that_could_not_be_connected_is_tried_again_until_it_is(tmp_path, monkeypatch):
    """No change to the file needed: an exec plugin that failed at first, a kubeconfig
    mounted late — the cluster is served once a later try connects it."""
    import app.gateway
    from app.clusters.connect import connect
    from app.query.budget import QueryMemory
    from app.settings import Settings
    from control_plane.cluster import free_port
    from tests.app.conftest import RunningGateway

    monkeypatch.setattr(app.gateway, "RETRY_UNAVAILABLE_EVERY", 0.3)
    late = _fake("in-late")
    path = clusters_file(tmp_path / "clusters.yaml", ["good", "late"], default="good")
    settings = Settings(port=free_port(), clusters=path)
    tries = []

    def connector(spec, is_default):
        if spec.name == "late":
            tries.append(1)
            if len(tries) < 3:
                raise RuntimeError("exec plugin failed")
        fake = late if spec.name == "late" else _fake("in-good")
        return connect(spec, settings, QueryMemory(), is_default,
                       lister_watcher_func=fake.lister_watcher, discovery=fake.discovery())

    gw = RunningGateway(settings, connector=connector).start()
    try:
        wait_until(lambda: httpx.get(gw.url + "/clusters/late" + CM.format(ns="apps")).status_code
                   == 200, 10, message="late served once it could be connected")
        assert len(tries) == 3, "tried until it connected, then no more"
        listed = {c["name"]: c for c in httpx.get(gw.url + "/clusters").json()["items"]}
        assert "message" not in listed["late"]
        assert _names(httpx.get(gw.url + "/clusters/late" + CM.format(ns="apps"))) == ["in-late"]
    finally:
        gw.stop()
