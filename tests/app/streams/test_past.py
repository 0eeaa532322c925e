"""A stream resumed from the history store that cannot go on: retention passed its version
while it was replayed, or the store went away. It ends with the ``ERROR`` the API server sends
when its window passes a watch (410) or it cannot serve (503) — never a gap, never a cut."""

from __future__ import annotations

import httpx
import orjson
import pytest

from app.history import cluster_history
from app.history.store import StoreUnavailable
from control_plane.fake import FakeCluster
from tests.app.conftest import run_gateway
from tests.app.history.kept import configmap, wait_kept

BASE = "/api/v1/namespaces/shop/configmaps"


@pytest.mark.parametrize("fault, code, reason", [
    ("retention", 410, "Expired"), ("store away", 503, "ServiceUnavailable")])
def test_a_replay_that_cannot_go_on_ends_with_the_error_after_what_it_sent(
        tmp_path, monkeypatch, fault, code, reason):
    fake = FakeCluster()
    fake.ensure_namespace("kube-system")
    fake.ensure_namespace("shop")
    monkeypatch.setattr(cluster_history, "REPLAY_PAGE", 2)
    read = cluster_history.ClusterHistory.changes_page
    pages = []

    async def page_then_fault(self, resource, version, place, *args, **kwargs):
        if pages:  # between the first page and the second
            if fault == "retention":
                self.store.forget_before(self.cluster, resource, pages[0][-1].rv + 1)
            else:
                monkeypatch.setattr(self.store, "changes_from", _away)
        rows, before = await read(self, resource, version, place, *args, **kwargs)
        pages.append(rows)
        return rows, before

    monkeypatch.setattr(cluster_history.ClusterHistory, "changes_page", page_then_fault)
    with run_gateway(fake, history=f"sqlite:///{tmp_path}/h.db", event_ring_size=2) as running, \
            httpx.Client(base_url=running.url, timeout=30) as http:
        assert http.get(BASE).status_code == 200
        made = [fake.create(BASE, configmap(f"c{i}")) for i in range(6)]
        running.wait_seen(made[-1])
        wait_kept(running, made[-1])
        start = made[0]["metadata"]["resourceVersion"]
        answer = http.get(f"{BASE}?watch=1&resourceVersion={start}&timeoutSeconds=20")
        assert answer.elapsed.total_seconds() < 10  # ended by the fault, not the timeout
        events = [orjson.loads(line) for line in answer.text.splitlines() if line]
        assert [e["object"]["metadata"]["name"] for e in events[:-1]] == ["c1", "c2"]
        assert events[-1]["type"] == "ERROR", events[-1]
        assert (events[-1]["object"]["code"], events[-1]["object"]["reason"]) == (code, reason)
        assert http.get(BASE).status_code == 200  # the present, served as ever


def _away(*args, **kwargs):
    raise StoreUnavailable("the store is away (a test's)")
