"""Relists on the real API server: the gateway's watch is held by a fault proxy while changes
pass and the API server restarts (its new watch cache knows nothing older than its start),
then cut; the gateway's watch resumes too old, and it relists. Clients
resuming as client-go does (watch) and as EventSource does (SSE) end with the API server's
state, with no duplicate, versions on the watch only increasing."""

from __future__ import annotations

import re
import types
import uuid

import httpx
import pytest

from control_plane.faults import FaultProxy
from tests.app.conftest import run_gateway, wait_until
from tests.app.streams.test_watch import ResumingWatcher
from tests.deploy.test_scale_out import EventSourceView

pytestmark = pytest.mark.cluster

_CHANGES = 60


def relists(url: str) -> int:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(int(float(v)) for v in re.findall(
        r'^kcg_informer_relists_total\{cluster="default",resource="configmaps[.][^"]*"\} (\S+)$', text, re.M))


def test_clients_come_through_a_relist_with_nothing_lost_or_repeated(local_cluster, kube):
    primary = local_cluster.primary
    namespace = f"relist-{uuid.uuid4().hex[:8]}"
    kube.ensure_namespace(namespace)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for i in range(20):
        kube.create(path, {"metadata": {"name": f"o{i:02d}"}, "data": {"v": "0"}})
    with FaultProxy("127.0.0.1", primary.port) as proxy, \
            run_gateway(local_cluster, server=types.SimpleNamespace(
                url=proxy.url, ca_file=primary.ca_file)) as gateway:
        watcher = ResumingWatcher(gateway.url, path)
        watcher.relist()
        sse = EventSourceView(gateway.url + path)
        sse.connect(seconds=1.0)
        before = relists(gateway.url)
        proxy.pause()
        for n in range(_CHANGES):  # changes in reverse key order, some deletions
            name = f"o{19 - n % 20:02d}"
            if n >= _CHANGES - 5:
                kube.delete(f"{path}/o{n % 5:02d}")
            else:
                kube.patch(f"{path}/{name}", {"data": {"v": str(n)}})
        local_cluster.restart_apiserver()  # its watch cache starts again from now
        proxy.reset()  # the held watch is cut
        proxy.resume()
        wait_until(lambda: relists(gateway.url) > before, 30, message="the gateway to relist")
        want = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                for o in kube.get(path)["items"]}
        # the relist's changes went out in version order, each at its own version: the
        # client holds the API server's objects and versions, resumed exactly or listed again
        wait_until(lambda: (watcher.watch(1.0), watcher.state == want)[1], 30,
                   message="the watch client's state to equal the API server's")
        watcher.watch(1.0)  # resume once more from where it stands
        assert watcher.duplicates() == []
        versions = [int(rv) for _, _, rv in watcher.delivered]
        assert versions == sorted(versions)
        wait_until(lambda: (sse.connect(seconds=1.0), sse.objects == want)[1], 30,
                   message="the SSE client's state to equal the API server's")
        assert sse.duplicates == []
        print(f"\nrelists {relists(gateway.url) - before}, watch events {len(watcher.delivered)}, "
              f"410s {watcher.gone}")
