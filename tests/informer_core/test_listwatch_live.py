"""ApiListerWatcher and Discovery against the real API server."""

from __future__ import annotations

import threading
import time

import pytest

from informer_core.discovery import Discovery, GroupVersionResource
from informer_core.errors import APIStatusError, NotFoundError, ResourceExpiredError
from informer_core.listwatch import ListOptions
from informer_core.rest import ApiListerWatcher
from control_plane.kubeapi import KubeAPI

pytestmark = pytest.mark.cluster


def cms(api_client, namespace=None, **kw):
    return ApiListerWatcher(api_client, "/api/v1/configmaps", namespace=namespace,
                            api_version="v1", kind="ConfigMap", **kw)


def test_list_sets_kind_and_api_version_on_items_and_pages(local_cluster, api_client, namespace):
    kube = KubeAPI.for_cluster(local_cluster)
    kube.create_many(f"/api/v1/namespaces/{namespace}/configmaps",
                     [{"metadata": {"name": f"c{i}"}} for i in range(3)])
    page = cms(api_client, namespace).list(ListOptions())
    assert sorted(i["metadata"]["name"] for i in page.items) == ["c0", "c1", "c2"]
    assert all(i["kind"] == "ConfigMap" and i["apiVersion"] == "v1" for i in page.items)
    assert page.resource_version
    first = cms(api_client, namespace).list(ListOptions(limit=2))
    assert len(first.items) == 2 and first.continue_token
    rest = cms(api_client, namespace).list(ListOptions(limit=2, continue_token=first.continue_token))
    assert [i["metadata"]["name"] for i in rest.items] == ["c2"] and not rest.continue_token


def test_server_side_selectors_via_tweak_list_options(local_cluster, api_client, namespace):
    kube = KubeAPI.for_cluster(local_cluster)
    kube.create(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "a", "labels": {"x": "1"}}})
    kube.create(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "b"}})

    def tweak(options):
        options.label_selector = "x=1"

    page = cms(api_client, namespace, tweak_list_options=tweak).list(ListOptions())
    assert [i["metadata"]["name"] for i in page.items] == ["a"]


def test_watch_delivers_events_and_abort_wakes_a_blocked_read(local_cluster, api_client, namespace):
    kube = KubeAPI.for_cluster(local_cluster)
    lw = cms(api_client, namespace)
    rv = lw.list(ListOptions()).resource_version
    stream = lw.watch(ListOptions(resource_version=rv, timeout_seconds=300))
    events = []

    def read():
        for event in stream:
            events.append((event.type, event.object["metadata"]["name"]))

    reader = threading.Thread(target=read)
    reader.start()
    kube.create(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "w"}})
    deadline = time.monotonic() + 5
    while not events and time.monotonic() < deadline:
        time.sleep(0.01)
    assert events == [("ADDED", "w")]
    started = time.monotonic()
    lw.abort()  # from another thread, while the reader blocks in recv()
    reader.join(2)
    assert not reader.is_alive() and time.monotonic() - started < 1.0


def test_a_stream_stopped_by_its_reader_closes_its_socket_at_once(local_cluster, api_client, namespace):
    # A reader that leaves between events keeps the stream's generator suspended;
    # stop() must close the socket then and there, not leave it to the garbage collector.
    kube = KubeAPI.for_cluster(local_cluster)
    lw = cms(api_client, namespace)
    rv = lw.list(ListOptions()).resource_version
    kube.create(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "s"}})
    stream = lw.watch(ListOptions(resource_version=rv, timeout_seconds=300))
    conn = stream._call._conn
    assert next(iter(stream)).type == "ADDED"
    assert conn.sock is not None
    stream.stop()
    assert conn.sock is None
    never_read = lw.watch(ListOptions(resource_version=rv, timeout_seconds=300))
    conn = never_read._call._conn
    never_read.stop()
    assert conn.sock is None and list(never_read) == []
    assert not lw._calls


def test_error_answers_become_typed_exceptions(local_cluster, api_client):
    with pytest.raises(NotFoundError):
        ApiListerWatcher(api_client, "/api/v1/nosuchthings").list(ListOptions())
    user = local_cluster.api_client(local_cluster.user)
    try:
        with pytest.raises(APIStatusError) as info:
            cms(user).list(ListOptions())
        assert info.value.code == 403 and info.value.reason == "Forbidden"
    finally:
        user.close()


def test_expired_resource_version_is_resource_expired_error(local_cluster, api_client, namespace):
    kube = KubeAPI.for_cluster(local_cluster)
    old = kube.create(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "o"}})
    for i in range(3):
        kube.patch(f"/api/v1/namespaces/{namespace}/configmaps/o", {"data": {"n": str(i)}})
    local_cluster.compact_etcd()
    with pytest.raises(ResourceExpiredError):
        cms(api_client, namespace).list(ListOptions(
            resource_version=old["metadata"]["resourceVersion"], resource_version_match="Exact",
            limit=1))


@pytest.mark.parametrize("text,gvr", [
    ("pods", ("", "v1", "pods")), ("po", ("", "v1", "pods")),
    ("deployments.apps", ("apps", "v1", "deployments")),
    ("deployments.v1.apps", ("apps", "v1", "deployments")), ("deploy", ("apps", "v1", "deployments")),
    ("cm", ("", "v1", "configmaps")), ("nodes", ("", "v1", "nodes")),
    ("crd", ("apiextensions.k8s.io", "v1", "customresourcedefinitions")),
])
def test_discovery_resolves_kubectl_names_on_a_real_server(api_client, text, gvr):
    assert Discovery(api_client).resolve_text(text).gvr == GroupVersionResource(*gvr)
