"""FakeCluster keeps the parts of the API server's behaviour the gateway relies on."""

from __future__ import annotations

import threading

import pytest

from control_plane.fake import FakeCluster, merge_patch
from control_plane.kubeapi import widget_crd
from informer_core.discovery import Discovery
from informer_core.errors import APIStatusError, NotFoundError, ResourceExpiredError
from informer_core.listwatch import ListOptions

CMS = "/api/v1/namespaces/ns/configmaps"


@pytest.fixture
def fake() -> FakeCluster:
    cluster = FakeCluster()
    cluster.ensure_namespace("ns")
    return cluster


def rv(obj: dict) -> int:
    return int(obj["metadata"]["resourceVersion"])


def test_every_write_gets_the_next_resource_version_and_a_no_op_gets_none(fake):
    a = fake.create(CMS, {"metadata": {"name": "a"}})
    b = fake.create("/api/v1/nodes", {"metadata": {"name": "n1"}})
    assert rv(b) == rv(a) + 1
    changed = fake.patch(f"{CMS}/a", {"data": {"k": "v"}})
    assert rv(changed) == rv(b) + 1
    same = fake.patch(f"{CMS}/a", {"data": {"k": "v"}})
    assert rv(same) == rv(changed), "a write that changes nothing makes no new version"
    assert fake.get(f"{CMS}/a")["metadata"]["uid"] == a["metadata"]["uid"]


def test_status_changes_only_through_the_status_subresource(fake):
    pods = "/api/v1/namespaces/ns/pods"
    fake.create(pods, {"metadata": {"name": "p"}, "spec": {"containers": []}})
    fake.patch(f"{pods}/p", {"status": {"phase": "Running"}, "metadata": {"labels": {"a": "b"}}})
    got = fake.get(f"{pods}/p")
    assert "status" not in got and got["metadata"]["labels"] == {"a": "b"}
    fake.patch(f"{pods}/p/status", {"status": {"phase": "Running"}})
    assert fake.get(f"{pods}/p")["status"] == {"phase": "Running"}


def test_finalizers_hold_a_deletion(fake):
    held = fake.create(CMS, {"metadata": {"name": "held", "finalizers": ["x/y"]}})
    fake.delete(f"{CMS}/held")
    got = fake.get(f"{CMS}/held")
    assert got["metadata"]["deletionTimestamp"] and rv(got) > rv(held)
    fake.patch(f"{CMS}/held", {"metadata": {"finalizers": None}})
    fake.delete(f"{CMS}/held")
    assert fake.get(f"{CMS}/held", ok_missing=True) is None


def test_errors_are_the_api_servers(fake):
    fake.create(CMS, {"metadata": {"name": "a"}})
    with pytest.raises(APIStatusError) as conflict:
        fake.create(CMS, {"metadata": {"name": "a"}})
    assert conflict.value.code == 409
    with pytest.raises(NotFoundError):
        fake.get(f"{CMS}/missing")
    with pytest.raises(NotFoundError):
        fake.get("/api/v1/nosuchthings")
    stale = fake.get(f"{CMS}/a")
    fake.patch(f"{CMS}/a", {"data": {"x": "1"}})
    with pytest.raises(APIStatusError) as outdated:
        fake.put(f"{CMS}/a", stale)
    assert outdated.value.code == 409


def test_merge_patch_is_rfc_7386():
    assert merge_patch({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": None, "e": 4}, "f": [1]}) == \
        {"a": 1, "b": {"d": 3, "e": 4}, "f": [1]}
    assert merge_patch({"a": 1}, ["x"]) == ["x"]


def test_discovery_documents_follow_crds(fake):
    discovery = Discovery(fetch=fake.fetch, min_refresh_interval=0)
    assert discovery.resolve_text("deploy").gvr == ("apps", "v1", "deployments")
    fake.create_crd(widget_crd())
    widgets = discovery.resolve_text("widgets.example.com")
    assert widgets.namespaced and widgets.kind == "Widget"
    fake.delete_crd("widgets.example.com")
    discovery.refresh()
    with pytest.raises(NotFoundError):
        discovery.resolve_text("widgets.example.com")
    status, _ = fake.fetch("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com")
    assert status == 404


def test_a_watch_resumes_after_its_version_and_answers_410_below_compaction(fake):
    fake.create(CMS, {"metadata": {"name": "a"}})
    lw = fake.lister_watcher(Discovery(fetch=fake.fetch).resolve(("", "v1", "configmaps")), "ns")
    page = lw.list(ListOptions(resource_version="0"))
    assert [o["metadata"]["name"] for o in page.items] == ["a"]
    fake.create(CMS, {"metadata": {"name": "b"}})
    fake.create("/api/v1/namespaces/other/configmaps", {"metadata": {"name": "elsewhere"}})
    fake.delete(f"{CMS}/a")
    stream = lw.watch(ListOptions(resource_version=page.resource_version))
    seen: list[tuple[str, str]] = []

    def read():
        for event in stream:
            seen.append((event.type, event.object["metadata"]["name"]))
            if len(seen) == 2:
                return

    reader = threading.Thread(target=read)
    reader.start()
    reader.join(5)
    stream.stop()
    assert seen == [("ADDED", "b"), ("DELETED", "a")], "only its namespace, in version order"
    fake.compact()
    with pytest.raises(ResourceExpiredError):
        lw.watch(ListOptions(resource_version=page.resource_version))


def test_deleting_a_crd_deletes_its_objects_then_ends_its_watches(fake):
    fake.create_crd(widget_crd())
    widgets = "/apis/example.com/v1/namespaces/ns/widgets"
    fake.create(widgets, {"metadata": {"name": "w"}})
    resource = Discovery(fetch=fake.fetch).resolve(("example.com", "v1", "widgets"))
    lw = fake.lister_watcher(resource)
    stream = lw.watch(ListOptions(resource_version=str(fake.resource_version)))
    events: list[str] = []
    reader = threading.Thread(target=lambda: events.extend(e.type for e in stream))
    reader.start()
    fake.delete_crd("widgets.example.com")
    reader.join(5)
    assert not reader.is_alive() and events == ["DELETED"]
    with pytest.raises(NotFoundError):
        lw.list(ListOptions())
