"""--metadata-only: which resources it names, and what their reads answer (over in-memory
clusters; the informer asking the API server for metadata alone is proven in
``test_metadata_only_live``)."""

from __future__ import annotations

import json

import httpx
import pytest

from app.cache.metadata_only import check_read, covering
from app.kube.request import negotiate, parse_query
from app.kube.status import StatusError
from control_plane.fake import FakeCluster
from informer_core.discovery import APIResource
from tests.app.conftest import run_fake_clusters, run_gateway

LIST_FORM = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
ONE_FORM = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1"


def _resource(resource: str, group: str = "", version: str = "v1", kind: str = "",
              short: tuple[str, ...] = ()) -> APIResource:
    return APIResource(group=group, version=version, resource=resource, kind=kind,
                       namespaced=True, verbs=frozenset({"list", "watch"}),
                       singular=resource.rstrip("s"), short_names=short)


PODS = _resource("pods", kind="Pod", short=("po",))
DEPLOYMENTS = _resource("deployments", "apps", kind="Deployment", short=("deploy",))


@pytest.mark.parametrize("names, resource, covered", [
    (["pods"], PODS, True),
    (["po"], PODS, True),
    (["Pod"], PODS, True),
    (["pods.v1."], PODS, False),  # no such group
    (["deployments.apps"], DEPLOYMENTS, True),
    (["deployments.v1.apps"], DEPLOYMENTS, True),
    (["deployments.v2.apps"], DEPLOYMENTS, False),
    (["deployments.extensions"], DEPLOYMENTS, False),
    (["deployments"], PODS, False),
    (["configmaps", "deploy"], DEPLOYMENTS, True),
])
def test_names_are_read_as_kubectl_writes_them(names, resource, covered):
    assert covering(names)(resource) is covered


def test_no_names_no_predicate():
    assert covering([]) is None and covering(["", " "]) is None


def test_each_resource_is_named_once_not_on_every_read(monkeypatch):
    """Asked on every read: the names are matched once per resource, then the answer kept."""
    from app.cache import metadata_only

    asked = []
    real = metadata_only.names_resource
    monkeypatch.setattr(metadata_only, "names_resource",
                        lambda name, resource: asked.append(name) or real(name, resource))
    covers = covering(["configmaps", "po"])
    assert [covers(PODS) for _ in range(3)] == [True] * 3
    assert [covers(DEPLOYMENTS) for _ in range(3)] == [False] * 3
    assert asked == ["configmaps", "po", "configmaps", "po"]


def _check(query: str, accept: str | None) -> StatusError | None:
    try:
        check_read(PODS, negotiate(accept, allow_sse=True), parse_query(query.encode(), 8192))
    except StatusError as error:
        return error
    return None


@pytest.mark.parametrize("query, accept, code", [
    ("", LIST_FORM, None),
    ("labelSelector=app%3Dweb&fieldSelector=metadata.name%3Dx", LIST_FORM, None),
    ("summary=metadata.namespace", None, None),  # counts, no objects: a dashboard's badges
    ("filter=metadata.name~web&sortBy=metadata.name", LIST_FORM, None),
    ("", None, 406),
    ("", "application/json", 406),
    ("", TABLE, 406),
    ("", "text/event-stream", 406),
    ("fields=metadata.name", None, 406),  # items are objects cut down: their kind is not kept
    ("summary=status.phase", None, 400),
    ("fieldSelector=spec.nodeName%3Dn1", LIST_FORM, 400),
    ("filter=status.phase%3DRunning", LIST_FORM, 400),
    ("sortBy=spec.nodeName", LIST_FORM, 400),
])
def test_only_what_metadata_answers_is_answered(query, accept, code):
    error = _check(query, accept)
    assert (error.code if error else None) == code
    if error is not None:
        assert "--metadata-only" in error.message and "pods" in error.message
        assert error.reason == ("NotAcceptable" if code == 406 else "BadRequest")


@pytest.fixture
def metadata_gateway():
    fake = FakeCluster()
    fake.ensure_namespace("apps")
    for name in ("a", "b"):
        fake.create("/api/v1/namespaces/apps/configmaps",
                    {"metadata": {"name": name, "labels": {"n": name}}, "data": {"big": "x" * 100}})
    with run_gateway(fake, metadata_only=("configmaps",)) as running:
        yield running


def test_full_reads_of_a_metadata_only_resource_are_406_naming_the_flag(metadata_gateway):
    base = metadata_gateway.url + "/api/v1/namespaces/apps/configmaps"
    with httpx.Client(timeout=10) as http:
        for url, accept in ((base, None), (base + "/a", None), (base, TABLE),
                            (base + "?watch=1", None), (base, "text/event-stream")):
            answer = http.get(url, headers={"Accept": accept} if accept else {})
            assert answer.status_code == 406, (url, accept, answer.text)
            status = answer.json()
            assert (status["kind"], status["reason"]) == ("Status", "NotAcceptable")
            assert "configmaps are cached as metadata only (--metadata-only)" in status["message"]
        listed = http.get(base, headers={"Accept": LIST_FORM}).json()
        assert [(i["kind"], i["metadata"]["name"]) for i in listed["items"]] == [
            ("PartialObjectMetadata", "a"), ("PartialObjectMetadata", "b")]
        one = http.get(base + "/b", headers={"Accept": ONE_FORM}).json()
        assert set(one) == {"kind", "apiVersion", "metadata"} and one["metadata"]["name"] == "b"
        counted = http.get(base, params={"summary": "metadata.labels.n"}).json()
        assert counted["total"] == 2
        # other resources are whole
        assert http.get(metadata_gateway.url + "/api/v1/namespaces").status_code == 200


def test_the_refusal_comes_after_authorization_and_a_malformed_query(metadata_gateway):
    base = metadata_gateway.url + "/api/v1/namespaces/apps/configmaps"
    answer = httpx.get(base, params={"labelSelector": "a in (b"})
    assert answer.status_code == 400, answer.text


def test_merged_reads_refuse_and_answer_alike(tmp_path):
    fakes = {}
    for name in ("a", "b"):
        fake = fakes[name] = FakeCluster()
        fake.ensure_namespace("apps")
        fake.create("/api/v1/namespaces/apps/configmaps",
                    {"metadata": {"name": f"{name}1"}, "data": {"big": "x"}})
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml", metadata_only=("configmaps",)) as gw:
        url = gw.url + "/clusters/*/api/v1/namespaces/apps/configmaps"
        for accept in (None, TABLE, "text/event-stream"):
            answer = httpx.get(url, headers={"Accept": accept} if accept else {})
            assert answer.status_code == 406, (accept, answer.text)
            assert "--metadata-only" in answer.json()["message"]
        assert httpx.get(url + "?watch=1").status_code == 406
        listed = httpx.get(url, headers={"Accept": LIST_FORM}).json()
        assert [i["metadata"]["name"] for i in listed["items"]] == ["a1", "b1"]
        with httpx.stream("GET", url + "?watch=1", headers={"Accept": ONE_FORM}) as stream:
            first = json.loads(next(stream.iter_lines()))
        assert first["object"]["kind"] == "PartialObjectMetadata"
