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
