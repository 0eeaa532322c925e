"""The informer machinery against a real kube-apiserver + etcd.

Each test states the behaviour it proves; faults are real: API server restarts,
etcd compaction, a deleted CRD.
"""

from __future__ import annotations

import threading
import time
import uuid

import orjson
import pytest

from informer_core.delta_fifo import DeletedFinalStateUnknown
from informer_core.discovery import GroupVersionResource
from informer_core.errors import NotFoundError, ResourceExpiredError, UnsupportedResourceError
from informer_core.factory import SharedInformerFactory
from informer_core.informer import SharedIndexInformer
from informer_core.labels import parse_selector
from informer_core.rest import ApiListerWatcher
from control_plane.kubeapi import KubeAPI, widget_crd
from tests.helpers import wait_until
from tests.informer_core.fakes import RecordingHandler

pytestmark = pytest.mark.cluster

CONFIGMAPS = GroupVersionResource("", "v1", "configmaps")
PODS = GroupVersionResource("", "v1", "pods")


@pytest.fixture
def kube(local_cluster) -> KubeAPI:
    return KubeAPI.for_cluster(local_cluster)


@pytest.fixture
def factory(api_client):
    """A factory over the primary apiserver; shut down (and threads joined) after the test."""
    made: list[tuple[SharedInformerFactory, threading.Event]] = []

    def make(**kwargs) -> tuple[SharedInformerFactory, threading.Event]:
        f = SharedInformerFactory(kwargs.pop("api_client", api_client), **kwargs)
        stop = threading.Event()
        made.append((f, stop))
        return f, stop

    yield make
    for f, stop in made:
        stop.set()
        f.shutdown()


def in_namespace(handler: RecordingHandler, names: set[str]) -> list[tuple]:
    return [c for c in handler.snapshot() if c[1] in names or c[1].split("/")[-1] in names]


def pod(name: str, labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}}


def cm(name: str, labels: dict | None = None, data: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": labels or {}}, "data": data or {}}


@pytest.mark.parametrize("kind", ["configmaps", "pods", "widgets"])
def test_create_update_relabel_delete_give_the_exact_handler_sequence(kind, kube, factory, namespace):
    if kind == "widgets":
        kube.create_crd(widget_crd())
        gvr = GroupVersionResource("example.com", "v1", "widgets")
        base = f"/apis/example.com/v1/namespaces/{namespace}/widgets"
        body = {"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "x", "labels": {"app": "a"}}, "spec": {"size": "S"}}
        change = {"spec": {"size": "M"}}
    elif kind == "pods":
        gvr, base = PODS, f"/api/v1/namespaces/{namespace}/pods"
        body, change = pod("x", {"app": "a"}), {"metadata": {"annotations": {"note": "1"}}}
    else:
        gvr, base = CONFIGMAPS, f"/api/v1/namespaces/{namespace}/configmaps"
        body, change = cm("x", {"app": "a"}), {"data": {"k": "v"}}
    f, stop = factory(namespace=namespace)
    generic = f.for_resource(gvr)
    handler = RecordingHandler()
    generic.informer().add_event_handler(handler)
    f.start(stop)
    assert f.wait_for_cache_sync(stop, timeout=20) == {gvr: True}

    created = kube.create(base, body)
    updated = kube.patch(f"{base}/x", change)
    relabeled = kube.patch(f"{base}/x", {"metadata": {"labels": {"app": "b"}}})
    lister = generic.lister().by_namespace(namespace)
    wait_until(lambda: lister.list(parse_selector("app=b")), timeout=10, message="relabel")
    assert lister.list(parse_selector("app=a")) == []
    assert lister.get("x")["metadata"]["resourceVersion"] == relabeled["metadata"]["resourceVersion"]
    kube.delete(f"{base}/x")
    wait_until(lambda: ("delete", "x") in [(c[0], c[1]) for c in handler.snapshot()],
               timeout=10, message="delete")
    rvs = [o["metadata"]["resourceVersion"] for o in (created, updated, relabeled)]
    expected = [("add", "x", False), ("update", "x", rvs[0], rvs[1]),
                ("update", "x", rvs[1], rvs[2])]
    seen = in_namespace(handler, {"x"})
    if kind == "pods":
        # The API server first writes deletionTimestamp (an update), then removes the pod.
        assert seen[3][:3] == ("update", "x", rvs[2])
        expected.append(seen[3])
    assert seen == expected + [("delete", "x")]
    assert lister.list() == []
    item = generic.lister().list()
    assert all("apiVersion" in o and "kind" in o for o in item)


def test_initial_list_larger_than_a_page_follows_continue_tokens(local_cluster, kube, namespace):
    # The 1.20 watch cache ignores limit for resourceVersion=0: list from an
    # apiserver with the configmaps watch cache off, or paging proves nothing.
    server = local_cluster.add_apiserver(["--watch-cache-sizes=configmaps#0"])
    client = local_cluster.api_client(server=server)
    try:
        kube.create_many(f"/api/v1/namespaces/{namespace}/configmaps",
                         [cm(f"c{i:04d}", {"i": str(i % 7)}) for i in range(1200)])
        calls = []

        class Recording(ApiListerWatcher):
            def list_body(self, options):  # what the informer fetches (it encodes the body itself)
                body = super().list_body(options)
                page = orjson.loads(body)
                calls.append((options.resource_version, options.limit, options.continue_token,
                              len(page["items"]), bool(page["metadata"].get("continue"))))
                return body

        lw = Recording(client, "/api/v1/configmaps", namespace=namespace,
                       api_version="v1", kind="ConfigMap")
        informer = SharedIndexInformer(lw, page_size=500)
        stop = threading.Event()
        thread = threading.Thread(target=informer.run, args=(stop,))
        thread.start()
        try:
            wait_until(informer.has_synced, timeout=30, message="sync")
            assert len(informer.get_store().list_keys()) == 1200
        finally:
            stop.set()
            thread.join(5)
        assert [c[3] for c in calls] == [500, 500, 200]
        assert calls[0][:3] == ("0", 500, "")
        assert all(c[0] == "" and c[2] for c in calls[1:]), "continue pages carry the token only"
        assert [c[4] for c in calls] == [True, True, False]
    finally:
        local_cluster.remove_apiserver(server)
        client.close()


def _run_informer_on(client, namespace, handler, errors=None, page_size=500):
    lw = ApiListerWatcher(client, "/api/v1/configmaps", namespace=namespace,
                          api_version="v1", kind="ConfigMap")
    informer = SharedIndexInformer(lw, page_size=page_size)
    informer.add_event_handler(handler)
    if errors is not None:
        informer.set_watch_error_handler(errors.append)
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,))
    thread.start()
    wait_until(informer.has_synced, timeout=30, message="sync")
    return informer, stop, thread


def _truth(kube, namespace) -> dict[str, str]:
    items = kube.get(f"/api/v1/namespaces/{namespace}/configmaps")["items"]
    return {f"{namespace}/{o['metadata']['name']}": o["metadata"]["resourceVersion"] for o in items}


def _cached(informer) -> dict[str, str]:
    return {o.key: o.resource_version for o in informer.get_indexer().list_encoded()}


def test_apiserver_restart_mid_churn_converges_and_gap_deletions_are_tombstones(
        local_cluster, kube, namespace):
    server = local_cluster.add_apiserver()
    client = local_cluster.api_client(server=server)
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    kube.create_many(base, [cm(f"victim-{i}") for i in range(5)] + [cm(f"keep-{i}") for i in range(5)])
    handler = RecordingHandler()
    informer, stop, thread = _run_informer_on(client, namespace, handler)
    churn_stop = threading.Event()

    def churn():  # creates and deletes through the other apiserver, all along
        i = 0
        while not churn_stop.is_set():
            kube.create(base, cm(f"churn-{i}"))
            if i % 2:
                kube.delete(f"{base}/churn-{i - 1}")
            i += 1
            time.sleep(0.02)

    churner = threading.Thread(target=churn)
    churner.start()
    try:
        time.sleep(0.5)
        local_cluster.stop_apiserver(server)
        for i in range(5):  # deleted while the informer cannot watch
            kube.delete(f"{base}/victim-{i}")
        kube.patch(f"{base}/keep-0", {"data": {"changed": "while-down"}})
        time.sleep(1.0)
        local_cluster.start_apiserver(server)
        time.sleep(1.0)
    finally:
        churn_stop.set()
        churner.join()
    try:
        wait_until(lambda: _cached(informer) == _truth(kube, namespace), timeout=30,
                   message="the cache to converge to the apiserver's truth")
        deletes = [c for c in handler.snapshot() if c[0] == "delete" and "victim" in c[1]]
        assert sorted(c[1] for c in deletes) == [f"tombstone:{namespace}/victim-{i}" for i in range(5)]
        assert any(c[0] == "update" and c[1] == "keep-0" for c in handler.snapshot())
        # No phantom: every key the handlers were last told about exists, and vice versa.
        alive: set[str] = set()
        for call in handler.snapshot():
            name = call[1].split("/")[-1]
            if call[0] == "add":
                alive.add(name)
            elif call[0] == "delete":
                alive.discard(name)
        assert {k.split("/")[-1] for k in _truth(kube, namespace)} == alive
    finally:
        stop.set()
        thread.join(5)
        local_cluster.remove_apiserver(server)
        client.close()


def test_forced_410_is_seen_by_the_watch_error_handler_then_relists_and_converges(
        local_cluster, kube, namespace):
    # No watch cache: watches and exact-version lists go to etcd, where compaction bites.
    server = local_cluster.add_apiserver(["--watch-cache=false"])
    client = local_cluster.api_client(server=server)
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    kube.create_many(base, [cm(f"c{i}") for i in range(5)])
    errors: list[BaseException] = []
    handler = RecordingHandler()
    informer, stop, thread = _run_informer_on(client, namespace, handler, errors)
    synced_rv = informer.last_sync_resource_version()
    try:
        local_cluster.stop_apiserver(server)
        kube.delete(f"{base}/c0")
        kube.create(base, cm("late"))
        for i in range(20):  # move etcd well past the informer's version, then compact
            kube.patch(f"{base}/c1", {"data": {"n": str(i)}})
        local_cluster.compact_etcd()
        local_cluster.start_apiserver(server)
        wait_until(lambda: _cached(informer) == _truth(kube, namespace), timeout=30,
                   message="convergence after the 410")
        assert any(isinstance(e, ResourceExpiredError) for e in errors), errors
        stats = informer.reflector_stats()
        assert stats.relists >= 1
        assert int(informer.last_sync_resource_version()) > int(synced_rv)
        assert ("delete", f"tombstone:{namespace}/c0") in handler.kinds()
        assert ("add", "late") in handler.kinds()
    finally:
        stop.set()
        thread.join(5)
        local_cluster.remove_apiserver(server)
        client.close()


def test_a_sleeping_handler_does_not_delay_another(kube, factory, namespace):
    f, stop = factory()
    generic = f.for_resource(CONFIGMAPS)
    slow, fast = RecordingHandler(delay=1.0), RecordingHandler()
    generic.informer().add_event_handler(slow)
    generic.informer().add_event_handler(fast)
    f.start(stop)
    f.wait_for_cache_sync(stop, timeout=20)
    before = len(fast.snapshot())
    started = time.monotonic()
    for i in range(5):
        kube.create(f"/api/v1/namespaces/{namespace}/configmaps", cm(f"s{i}"))
    wait_until(lambda: len(fast.snapshot()) - before >= 5, timeout=5, message="fast handler")
    assert time.monotonic() - started < 1.5
    assert len(in_namespace(slow, {f"s{i}" for i in range(5)})) <= 2


def test_deleting_a_crd_stops_its_informer_without_a_retry_storm(kube, factory, api_client):
    group = f"g{uuid.uuid4().hex[:6]}.example.com"
    crd = widget_crd(group=group, plural="gadgets", kind="Gadget")
    kube.create_crd(crd)
    gvr = GroupVersionResource(group, "v1", "gadgets")
    gone: list[tuple] = []
    f, stop = factory(on_resource_gone=lambda g, reason: gone.append((g, reason)))
    generic = f.for_resource(gvr)
    lists = []
    lw = generic.informer()._lw
    original = lw.list

    def counting_list(options):
        lists.append(time.monotonic())
        return original(options)

    lw.list = counting_list
    f.start(stop)
    f.wait_for_cache_sync(stop, timeout=20)
    kube.delete_crd(crd["metadata"]["name"])
    deleted_at = time.monotonic()
    wait_until(lambda: gone, timeout=30, message="the informer to be stopped as gone")
    wait_until(lambda: not generic.thread.is_alive(), timeout=5, message="its thread to end")
    assert gone[0][0] == gvr and "no longer exists" in gone[0][1]
    assert generic.stopped() and generic.gone_reason
    time.sleep(2)
    assert len([t for t in lists if t > deleted_at]) <= 3, "retried after the resource was gone"
    with pytest.raises(NotFoundError):
        f.for_resource(gvr)
    # Bring it back: a later for_resource gets a fresh informer that syncs.
    kube.create_crd(crd)
    fresh = f.for_resource(gvr)
    assert fresh is not generic
    f.start(stop)
    assert f.wait_for_cache_sync(stop, timeout=20)[gvr] is True
    kube.delete_crd(crd["metadata"]["name"])


def test_for_resource_is_single_flight_under_concurrency(factory):
    f, stop = factory()
    results: list = []
    barrier = threading.Barrier(16)

    def ask():
        barrier.wait()
        results.append(f.for_resource(("", "v1", "services")))

    threads = [threading.Thread(target=ask) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(r) for r in results}) == 1
    assert len(f.informers()) == 1


def test_unknown_and_unwatchable_resources_fail_the_caller(factory):
    f, _ = factory()
    with pytest.raises(NotFoundError):
        f.for_resource(("", "v1", "widgets-that-do-not-exist"))
    with pytest.raises(UnsupportedResourceError):
        f.for_resource(("", "v1", "bindings"))


def test_start_is_idempotent_and_starts_only_what_is_new(factory):
    f, stop = factory()
    cms = f.for_resource(CONFIGMAPS)
    f.start(stop)
    first_thread = cms.thread
    f.start(stop)
    assert cms.thread is first_thread
    svc = f.for_resource(("", "v1", "services"))
    assert svc.thread is None
    f.start(stop)
    assert svc.thread is not None and cms.thread is first_thread
    synced = f.wait_for_cache_sync(stop, timeout=20)
    assert synced == {CONFIGMAPS: True, GroupVersionResource("", "v1", "services"): True}


def test_wait_for_cache_sync_times_out_for_an_unreachable_server(local_cluster, factory):
    server = local_cluster.add_apiserver()
    client = local_cluster.api_client(server=server)
    try:
        f, stop = factory(api_client=client)
        f.for_resource(CONFIGMAPS)
        local_cluster.stop_apiserver(server)
        f.start(stop)
        started = time.monotonic()
        assert f.wait_for_cache_sync(stop, timeout=1.0) == {CONFIGMAPS: False}
        assert 0.9 < time.monotonic() - started < 2.0
    finally:
        local_cluster.remove_apiserver(server)
        client.close()


def test_stop_mid_watch_is_honoured_within_a_second_and_shutdown_leaves_no_thread(api_client):
    before = set(threading.enumerate())
    f = SharedInformerFactory(api_client)
    stop = threading.Event()
    for gvr in (CONFIGMAPS, PODS, GroupVersionResource("apps", "v1", "deployments")):
        f.for_resource(gvr)
    f.start(stop)
    assert all(f.wait_for_cache_sync(stop, timeout=20).values())
    time.sleep(0.3)  # every reflector is now blocked reading its watch
    started = time.monotonic()
    stop.set()
    f.shutdown()
    assert time.monotonic() - started < 1.0
    assert set(threading.enumerate()) <= before, [t.name for t in set(threading.enumerate()) - before]


def test_a_namespaced_factory_sees_only_its_namespace(kube, factory, namespace):
    kube.create(f"/api/v1/namespaces/{namespace}/configmaps", cm("mine"))
    kube.ensure_namespace("other-ns")
    kube.create("/api/v1/namespaces/other-ns/configmaps", cm(f"theirs-{uuid.uuid4().hex[:6]}"))
    f, stop = factory(namespace=namespace)
    generic = f.for_resource(CONFIGMAPS)
    f.start(stop)
    f.wait_for_cache_sync(stop, timeout=20)
    namespaces = {o["metadata"]["namespace"] for o in generic.lister().list()}
    assert namespaces == {namespace}


def test_tombstones_carry_the_last_known_object(kube, local_cluster, namespace):
    # Covered in depth above; here the object inside the tombstone is checked.
    server = local_cluster.add_apiserver()
    client = local_cluster.api_client(server=server)
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    kube.create(base, cm("t", data={"last": "state"}))
    deleted: list = []

    class Deletes(RecordingHandler):
        def on_delete(self, o):
            deleted.append(o)

    informer, stop, thread = _run_informer_on(client, namespace, Deletes())
    try:
        local_cluster.stop_apiserver(server)
        kube.delete(f"{base}/t")
        local_cluster.start_apiserver(server)
        wait_until(lambda: deleted, timeout=30, message="the tombstone")
        assert isinstance(deleted[0], DeletedFinalStateUnknown)
        assert deleted[0].obj["data"] == {"last": "state"}
    finally:
        stop.set()
        thread.join(5)
        local_cluster.remove_apiserver(server)
        client.close()


def test_a_metadata_only_informer_keeps_and_delivers_metadata_alone(kube, factory, namespace):
    """As client-go's metadata informers: the API server is asked for PartialObjectMetadata,
    so the list, each watch event and the store hold each object's metadata and nothing else,
    while the informer follows changes as a whole-object one does. Other resources of the same
    factory stay whole."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    kube.create(base, cm("before", labels={"k": "1"}, data={"big": "x" * 4000}))
    f, stop = factory(namespace=namespace, metadata_only=lambda r: r.resource == "configmaps")
    generic = f.for_resource(CONFIGMAPS)
    whole = f.for_resource(PODS)
    handler = RecordingHandler()
    generic.informer().add_event_handler(handler)
    f.start(stop)
    assert f.wait_for_cache_sync(stop, timeout=20)
    kube.create(base, cm("after", data={"big": "y" * 4000}))
    kube.patch(f"{base}/before", {"metadata": {"labels": {"k": "2"}}})
    wait_until(lambda: {o["metadata"]["name"]: o["metadata"].get("labels")
                        for o in generic.lister().list()} == {"before": {"k": "2"}, "after": None},
               timeout=20, message="the changes followed")
    for obj in generic.lister().list():
        assert set(obj) == {"kind", "apiVersion", "metadata"}, obj
        assert (obj["kind"], obj["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
        assert "managedFields" in obj["metadata"]  # no transform: the API server's metadata as sent
    # handlers are told after the store holds a change (the processor's own thread): wait
    wait_until(lambda: len(handler.snapshot()) >= 3, timeout=20, message="the handler told")
    assert [c[:2] for c in handler.snapshot()] == [("add", "before"), ("add", "after"),
                                                  ("update", "before")]
    kube.create(f"/api/v1/namespaces/{namespace}/pods", pod("p"))
    wait_until(lambda: whole.lister().list(), timeout=20, message="the pod")
    assert whole.lister().list()[0]["kind"] == "Pod" and "spec" in whole.lister().list()[0]
