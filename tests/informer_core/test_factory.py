"""SharedInformerFactory over its seams: an injected lister-watcher and discovery (no real server)."""

from __future__ import annotations

import threading

import pytest

from control_plane.fake import FakeCluster
from control_plane.kubeapi import widget_crd
from informer_core.errors import NotFoundError, UnsupportedResourceError
from informer_core.factory import GroupVersionResource, SharedInformerFactory
from informer_core.listwatch import ListOptions
from tests.helpers import wait_until

CONFIGMAPS = GroupVersionResource("", "v1", "configmaps")
WIDGETS = GroupVersionResource("example.com", "v1", "widgets")


@pytest.fixture
def cluster() -> FakeCluster:
    fake = FakeCluster()
    fake.ensure_namespace("a")
    fake.ensure_namespace("b")
    for ns in ("a", "b"):
        fake.create(f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "one", "labels": {"x": ns}}})
    return fake


@pytest.fixture
def stop():
    event = threading.Event()
    yield event
    event.set()


def make_factory(cluster: FakeCluster, **kwargs) -> SharedInformerFactory:
    return SharedInformerFactory(lister_watcher_func=cluster.lister_watcher,
                                 discovery=cluster.discovery(min_refresh_interval=0), **kwargs)


def test_a_factory_over_injected_seams_never_loads_a_kubernetes_configuration(cluster, stop, monkeypatch):
    import informer_core.factory as factory_module

    def refuse():
        raise AssertionError("the default configuration was loaded")

    monkeypatch.setattr(factory_module, "default_api_client", refuse)
    factory = make_factory(cluster)
    informer = factory.for_resource(CONFIGMAPS)
    factory.start(stop)
    assert factory.wait_for_cache_sync(stop, timeout=5) == {CONFIGMAPS: True}
    assert sorted(o["metadata"]["namespace"] for o in informer.lister().list()) == ["a", "b"]
    cluster.create("/api/v1/namespaces/a/configmaps", {"metadata": {"name": "two"}})
    wait_until(lambda: len(informer.lister().list()) == 3)
    factory.shutdown()


def test_namespace_and_tweak_list_options_reach_an_injected_lister_watcher(cluster, stop):
    def only_labelled_b(options: ListOptions) -> None:
        options.label_selector = "x=b"

    scoped = make_factory(cluster, namespace="a")
    tweaked = make_factory(cluster, tweak_list_options=only_labelled_b)
    informers = [scoped.for_resource(CONFIGMAPS), tweaked.for_resource(CONFIGMAPS)]
    for factory in (scoped, tweaked):
        factory.start(stop)
        assert all(factory.wait_for_cache_sync(stop, timeout=5).values())
    assert [o["metadata"]["namespace"] for o in informers[0].lister().list()] == ["a"]
    assert [o["metadata"]["namespace"] for o in informers[1].lister().list()] == ["b"]
    for factory in (scoped, tweaked):
        factory.shutdown()


def test_unknown_and_unwatchable_resources_fail_the_caller(cluster):
    factory = make_factory(cluster)
    with pytest.raises(NotFoundError):
        factory.for_resource(("", "v1", "nosuchthings"))
    with pytest.raises(UnsupportedResourceError):
        factory.for_resource(("", "v1", "bindings"))


def test_a_deleted_crd_stops_its_informer_and_a_recreated_one_gets_a_fresh_informer(cluster, stop):
    cluster.create_crd(widget_crd())
    cluster.create("/apis/example.com/v1/namespaces/a/widgets",
                   {"metadata": {"name": "w"}, "spec": {"size": "S"}})
    gone: list[GroupVersionResource] = []
    factory = make_factory(cluster, on_resource_gone=lambda gvr, reason: gone.append(gvr))
    first = factory.for_resource(WIDGETS)
    factory.start(stop)
    assert factory.wait_for_cache_sync(stop, timeout=5) == {WIDGETS: True}
    cluster.delete_crd("widgets.example.com")
    wait_until(first.stopped, timeout=10, message="the informer of a deleted CRD to stop")
    assert gone == [WIDGETS] and "no longer exists" in first.gone_reason
    with pytest.raises(NotFoundError):
        factory.for_resource(WIDGETS)
    cluster.create_crd(widget_crd())
    second = factory.for_resource(WIDGETS)
    assert second is not first and not second.stopped()
    factory.shutdown()


def test_retry_now_reaches_every_informer_backing_off(cluster, stop):
    """Lists failing (the API server away), each informer backs off, 1.6 s and more by its
    third try; told the API server is back, both try again at once and sync."""
    down = threading.Event()
    down.set()
    lists: list[GroupVersionResource] = []

    class Away:
        def __init__(self, inner, gvr):
            self.inner, self.gvr = inner, gvr

        def list(self, options):
            lists.append(self.gvr)
            if down.is_set():
                raise ConnectionError("connection refused")
            return self.inner.list(options)

        def watch(self, options):
            return self.inner.watch(options)

    factory = SharedInformerFactory(
        lister_watcher_func=lambda r, ns: Away(cluster.lister_watcher(r, ns), r.gvr),
        discovery=cluster.discovery(min_refresh_interval=0))
    secrets = GroupVersionResource("", "v1", "secrets")
    informers = [factory.for_resource(CONFIGMAPS), factory.for_resource(secrets)]
    factory.start(stop)
    wait_until(lambda: lists.count(CONFIGMAPS) >= 2 and lists.count(secrets) >= 2, timeout=10,
               message="second failures: the next delays are 1.6 s or more")
    down.clear()
    factory.retry_now()
    assert factory.wait_for_cache_sync(stop, timeout=1.0) == {CONFIGMAPS: True, secrets: True}
    assert all(i.informer().has_synced() for i in informers)
    factory.shutdown()
