"""Request shapes already checked: read straight away the next time, yet every request is
authorized, each caller reads its own namespaces, a failed check is never kept, and a
new discovery view or hostile variety remakes or drops what is kept."""

from __future__ import annotations

import httpx
import pytest

from app.kube.shapes import KEPT, RequestShapes, request_headers
from control_plane.fake import FakeCluster
from tests.app.conftest import run_gateway
from tests.app.fake_reviewer import TableReviewer

NS, OTHER = "shaped", "elsewhere"


@pytest.fixture
def cluster():
    cluster = FakeCluster()
    for namespace in (NS, OTHER):
        cluster.ensure_namespace(namespace)
        for n in range(4):
            cluster.create(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {
                "name": f"cm-{n}", "labels": {"app": "web" if n % 2 else "db"}}})
    return cluster


def _names(answer: httpx.Response) -> list[tuple[str, str]]:
    return [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in answer.json()["items"]]


def test_a_shape_checked_once_is_read_straight_away_with_the_same_answer(cluster):
    with run_gateway(cluster) as gw:
        shapes = gw.gateway.default.shapes
        for path in (f"/api/v1/namespaces/{NS}/configmaps?labelSelector=app%3Dweb",
                     f"/api/v1/namespaces/{NS}/configmaps/cm-1", "/api/v1/configmaps?limit=3"):
            first = httpx.get(gw.url + path)
            assert first.status_code == 200, first.text
            hits = shapes.hits
            again = httpx.get(gw.url + path)
            assert shapes.hits == hits + 1, path
            assert again.status_code == 200 and again.json() == first.json(), path
        # another Accept is another shape: the metadata form, checked on its own
        meta = {"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"}
        partial = httpx.get(gw.url + f"/api/v1/namespaces/{NS}/configmaps", headers=meta)
        assert partial.json()["kind"] == "PartialObjectMetadataList"
        assert httpx.get(gw.url + f"/api/v1/namespaces/{NS}/configmaps",
                         headers=meta).json()["kind"] == "PartialObjectMetadataList"
        assert httpx.get(gw.url + f"/api/v1/namespaces/{NS}/configmaps").json()["kind"] == \
            "ConfigMapList"


def test_a_kept_shape_is_authorized_on_every_request(cluster):
    """The shape is kept after alice's answer; with it kept, no token, a token nobody knows
    and a caller allowed elsewhere still get 401, 401 and 403, and no object."""
    reviewer = TableReviewer({"t-alice": {"username": "alice", "groups": []},
                              "t-carol": {"username": "carol", "groups": []}},
                             {("alice", "*", "configmaps", NS), ("carol", "*", "configmaps", OTHER)})
    path = f"/api/v1/namespaces/{NS}/configmaps/cm-1"
    with run_gateway(cluster, reviewer=reviewer, authz="kubernetes") as gw:
        alice = {"Authorization": "Bearer t-alice"}
        assert httpx.get(gw.url + path, headers=alice).status_code == 200
        assert len(gw.gateway.default.shapes) == 1
        for headers, code in (({}, 401), ({"Authorization": "Bearer t-mallory"}, 401),
                              ({"Authorization": "Bearer t-carol"}, 403)):
            for _ in range(2):
                answer = httpx.get(gw.url + path, headers=headers)
                assert answer.status_code == code, (headers, answer.text[:200])
                assert answer.json()["kind"] == "Status"  # the object's never
        assert httpx.get(gw.url + path, headers=alice).json()["metadata"]["name"] == "cm-1"


def test_callers_of_one_shape_each_read_their_own_namespaces(cluster):
    """A cluster-wide list partitioned by each caller's namespaces: alice and carol asking
    the same path in turn each get their namespace's objects, however often they alternate."""
    reviewer = TableReviewer({"t-alice": {"username": "alice", "groups": []},
                              "t-carol": {"username": "carol", "groups": []}},
                             {("alice", "*", "configmaps", NS), ("carol", "*", "configmaps", OTHER)})
    with run_gateway(cluster, reviewer=reviewer, authz="kubernetes",
                     namespace_partitioned_lists=True) as gw:
        for _ in range(3):
            for token, namespace in (("t-alice", NS), ("t-carol", OTHER)):
                answer = httpx.get(gw.url + "/api/v1/configmaps?labelSelector=app%3Dweb",
                                   headers={"Authorization": f"Bearer {token}"})
                assert answer.status_code == 200, answer.text
                assert {ns for ns, _ in _names(answer)} == {namespace}, token
                assert len(_names(answer)) == 2


@pytest.mark.parametrize("path, headers, code", [
    (f"/api/v1/namespaces/{NS}/configmaps?labelSelector=app%3D%3D%3Dweb", {}, 400),
    (f"/api/v1/namespaces/{NS}/configmaps?limit=-1", {}, 400),
    ("/api/v1/namespaces/Not_A_Name/configmaps", {}, 400),
    (f"/api/v1/namespaces/{NS}/configmaps", {"Accept": "application/yaml"}, 406),
    (f"/api/v1/namespaces/{NS}/configmaps/cm-1",
     {"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"}, 406),
    ("/api/v1/nothings", {}, 404),
    (f"/api/v1/namespaces/{NS}/configmaps/absent", {}, 404),
])
def test_a_request_that_failed_a_check_answers_its_error_each_time(cluster, path, headers, code):
    with run_gateway(cluster) as gw:
        for _ in range(3):
            answer = httpx.get(gw.url + path, headers=headers)
            assert answer.status_code == code, answer.text[:300]
            assert answer.json()["kind"] == "Status"
        if code != 404 or path.endswith("nothings"):  # the absent object's shape was sound
            assert len(gw.gateway.default.shapes) == 0


def test_a_stream_is_not_kept(cluster):
    with run_gateway(cluster) as gw:
        with httpx.stream("GET", gw.url + f"/api/v1/namespaces/{NS}/configmaps?watch=true"
                          "&timeoutSeconds=1") as answer:
            assert answer.status_code == 200
            answer.read()
        assert len(gw.gateway.default.shapes) == 0


def test_a_new_discovery_view_remakes_the_shape(cluster):
    with run_gateway(cluster) as gw:
        path = f"/api/v1/namespaces/{NS}/configmaps"
        assert httpx.get(gw.url + path).status_code == 200
        shapes = gw.gateway.default.shapes
        (key,) = shapes._kept
        kept = shapes._kept[key]
        gw.gateway.default.caches.factory.discovery.refresh()
        hits = shapes.hits
        assert httpx.get(gw.url + path).status_code == 200
        assert shapes.hits == hits, "a shape of another view is not used"
        assert shapes._kept[key] is not kept and shapes._kept[key].view is \
            gw.gateway.default.caches.factory.discovery.view


def test_kept_shapes_are_bounded():
    shapes = RequestShapes()
    view = object()
    for n in range(KEPT):
        shapes.keep((f"/api/v1/namespaces/ns-{n}/pods", b"", None), _Stub(view))
    assert len(shapes) == KEPT
    shapes.keep(("/api/v1/pods", b"", None), _Stub(view))
    assert len(shapes) == 1, "one more than the bound drops them all"
    shapes.keep(("/api/v1/pods", b"labelSelector=" + b"a" * 5000, None), _Stub(view))
    shapes.keep(("/api/v1/pods", b"", "application/json;" + "x" * 5000), _Stub(view))
    assert len(shapes) == 1, "a shape of a very long query or Accept header is never kept"
    assert shapes.get(("/api/v1/pods", b"", None), object()) is None
    assert len(shapes) == 0, "a shape of an older view is dropped"


class _Stub:
    def __init__(self, view: object) -> None:
        self.view = view


def test_the_headers_a_read_needs_are_read_in_one_pass():
    headers = [(b"host", b"gw"), (b"accept", b"application/json"), (b"accept", b"text/html"),
               (b"accept-encoding", b"br"), (b"accept-encoding", b"gzip, deflate"),
               (b"if-none-match", b'"a"'), (b"if-none-match", b'"b"')]
    assert request_headers(headers) == ("application/json", '"a"', True)
    assert request_headers([(b"accept-encoding", b"identity")]) == (None, None, False)
