"""Server-Sent Events across a real API server's restart: exactly the differences, no reset."""

from __future__ import annotations

import pytest

from tests.app.conftest import run_gateway
from tests.app.readers import LineReader, _changes, sse_events

pytestmark = pytest.mark.cluster


@pytest.mark.timeout(180)
def test_sse_subscribers_see_exactly_the_differences_across_an_apiserver_restart(local_cluster, kube, namespace):
    from control_plane.kubeapi import widget_crd

    kube.create_crd(widget_crd())
    server = local_cluster.add_apiserver()
    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    pods = f"/api/v1/namespaces/{namespace}/pods"
    widgets = f"/apis/example.com/v1/namespaces/{namespace}/widgets"

    def pod(name, labels=None):
        return {"metadata": {"name": name, "labels": labels or {}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}

    def widget(name, size="S"):
        return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name},
                "spec": {"size": size}}

    for name in ("a", "b", "c"):
        kube.create(cms, {"metadata": {"name": name}})
    for name in ("p1", "p2"):
        kube.create(pods, pod(name))
    for name in ("w1", "w2"):
        kube.create(widgets, widget(name))
    try:
        with run_gateway(local_cluster, server=server) as gw:
            paths = {"cms": f"/core/v1/namespaces/{namespace}/configmaps",
                     "pods": f"/core/v1/namespaces/{namespace}/pods",
                     "widgets": f"/example.com/v1/namespaces/{namespace}/widgets"}
            readers = {k: LineReader(gw.url + p, {"Accept": "text/event-stream"}) for k, p in paths.items()}
            try:
                for reader in readers.values():
                    reader.wait_for(lambda l: any(e.get("event") == "SYNCED" for e in sse_events(l)))
                synced_at = {k: len(r.lines) for k, r in readers.items()}
                kube.create(cms, {"metadata": {"name": "before-gap"}})
                readers["cms"].wait_for(lambda l: ("ADDED", "before-gap") in _changes(l))

                local_cluster.stop_apiserver(server)
                kube.delete(f"{cms}/a")
                kube.patch(f"{cms}/b", {"data": {"changed": "in-gap"}})
                kube.create(cms, {"metadata": {"name": "e"}})
                kube.delete(f"{pods}/p1")
                kube.patch(f"{pods}/p2", {"metadata": {"labels": {"moved": "yes"}}})
                kube.create(pods, pod("p3"))
                kube.delete(f"{widgets}/w1")
                kube.patch(f"{widgets}/w2", {"spec": {"size": "XL"}})
                kube.create(widgets, widget("w3"))
                local_cluster.start_apiserver(server)

                expected = {
                    "cms": [("ADDED", "before-gap"), ("DELETED", "a"), ("MODIFIED", "b"), ("ADDED", "e")],
                    "pods": [("DELETED", "p1"), ("MODIFIED", "p2"), ("ADDED", "p3")],
                    "widgets": [("DELETED", "w1"), ("MODIFIED", "w2"), ("ADDED", "w3")],
                }
                for key, reader in readers.items():
                    want = sorted(expected[key])
                    reader.wait_for(lambda l, k=key, w=want: sorted(
                        c for c in _changes(l[synced_at[k]:]) if not (c == ("MODIFIED", "p1"))) == w,
                        timeout=60)
                # The streams were never reset or broken, and they keep delivering.
                kube.patch(f"{cms}/e", {"data": {"after": "restart"}})
                readers["cms"].wait_for(lambda l: ("MODIFIED", "e") in _changes(l))
                for reader in readers.values():
                    kinds = [e.get("event") for e in sse_events(reader.lines)]
                    assert kinds.count("SYNCED") == 1 and "RESET" not in kinds and "ERROR" not in kinds
                    changes = _changes(reader.lines)
                    assert len(changes) == len(set(changes)), f"duplicates: {changes}"
            finally:
                for reader in readers.values():
                    reader.close()
    finally:
        local_cluster.remove_apiserver(server)


@pytest.mark.timeout(180)
def test_a_crd_deleted_while_streamed_ends_its_streams_unloads_and_comes_back(local_cluster, kube, namespace):
    """The CRD goes: its streams end with a clear ERROR (404 NotFound), its cache is unloaded
    and lists say 404; created again, it is served again from a fresh informer."""
    import json

    import httpx

    from control_plane.kubeapi import widget_crd
    from tests.helpers import wait_until

    crd = widget_crd("gone.example.com", "sprockets", "Sprocket")
    kube.create_crd(crd)
    path = f"/apis/gone.example.com/v1/namespaces/{namespace}/sprockets"

    def sprocket(name):
        return {"apiVersion": "gone.example.com/v1", "kind": "Sprocket", "metadata": {"name": name}}

    kube.create(path, sprocket("s1"))
    with run_gateway(local_cluster) as gw:
        assert [o["metadata"]["name"] for o in httpx.get(gw.url + path).json()["items"]] == ["s1"]
        sse = LineReader(gw.url + path, {"Accept": "text/event-stream"})
        watch = LineReader(gw.url + path + "?watch=true")
        try:
            sse.wait_for(lambda l: any(e.get("event") == "SYNCED" for e in sse_events(l)))
            watch.wait_for(lambda l: any('"s1"' in line for line in l))
            kube.delete_crd(crd["metadata"]["name"])

            sse.wait_for(lambda l: any(e.get("event") == "ERROR" for e in sse_events(l)), timeout=30)
            error = next(json.loads(e["data"]) for e in sse_events(sse.lines) if e.get("event") == "ERROR")
            assert (error["code"], error["reason"]) == (404, "NotFound"), error
            assert "sprockets.gone.example.com" in error["message"]
            watch.wait_for(lambda l: any('"ERROR"' in line for line in l), timeout=30)
            last = json.loads(watch.lines[-1])
            assert last["type"] == "ERROR" and last["object"]["code"] == 404, last
            assert sse.ended() and watch.ended()
            wait_until(lambda: not any(g.resource == "sprockets" for g in gw.gateway.default.caches.entries()),
                       10, message="the cache to be unloaded")
            wait_until(lambda: httpx.get(gw.url + path).status_code == 404, 30,
                       message="lists to answer 404")
            assert httpx.get(gw.url + path).json()["reason"] == "NotFound"

            kube.create_crd(crd)
            kube.create(path, sprocket("s2"))
            wait_until(lambda: httpx.get(gw.url + path).status_code == 200, 30,
                       message="the recreated CRD to be served")
            assert [o["metadata"]["name"] for o in httpx.get(gw.url + path).json()["items"]] == ["s2"]
            again = LineReader(gw.url + path, {"Accept": "text/event-stream"})
            try:
                again.wait_for(lambda l: any(e.get("event") == "SYNCED" for e in sse_events(l)))
                kube.create(path, sprocket("s3"))
                again.wait_for(lambda l: ("ADDED", "s3") in _changes(l))
            finally:
                again.close()
        finally:
            sse.close()
            watch.close()
            kube.delete_crd(crd["metadata"]["name"])
