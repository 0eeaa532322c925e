"""/clusters/*/history/: every cluster's changes, newest first, each with its cluster, paged
with each cluster's own place; what cannot be merged is refused."""

from __future__ import annotations

import time

import httpx

from control_plane.fake import FakeCluster
from tests.app.conftest import run_fake_clusters
from tests.helpers import wait_until

BASE = "/api/v1/namespaces/shop/configmaps"


def test_the_merged_history_is_every_clusters_changes_newest_first_paged_once(tmp_path):
    fakes = {name: FakeCluster() for name in ("a", "b")}
    for fake in fakes.values():
        fake.ensure_namespace("kube-system")
        fake.ensure_namespace("shop")
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml", default="a",
                           history=f"sqlite:///{tmp_path}/h.db") as gw, \
            httpx.Client(base_url=gw.url, timeout=30) as http:
        for name in fakes:
            assert http.get(f"/clusters/{name}{BASE}").status_code == 200  # cached: kept
        made = []
        for n in range(6):  # alternating clusters, a moment apart: a known order in time
            name = "ab"[n % 2]
            made.append((name, fakes[name].create(BASE, {"metadata": {"name": f"cm-{n}"}})))
            time.sleep(0.02)
        for name, obj in made:
            wait_until(lambda n=name, o=obj: any(
                hi >= int(o["metadata"]["resourceVersion"]) for _, hi in
                gw.gateway.clusters[n].history.store.spans(n, "core/v1/configmaps")), 10,
                message="kept")
        every = http.get(f"/clusters/*/history{BASE}").json()["items"]
        assert [(c["cluster"], c["object"]["metadata"]["name"]) for c in every] == [
            (name, obj["metadata"]["name"]) for name, obj in reversed(made)]
        times = [c["time"] for c in every]
        assert times == sorted(times, reverse=True)
        paged, token = [], ""
        while True:
            page = http.get(f"/clusters/*/history{BASE}", params={"limit": "2"} | (
                {"continue": token} if token else {}))
            assert page.status_code == 200, page.text
            paged += [(c["cluster"], c["resourceVersion"]) for c in page.json()["items"]]
            token = page.json()["metadata"].get("continue", "")
            if not token:
                break
        assert paged == [(c["cluster"], c["resourceVersion"]) for c in every]
        only_b = http.get(f"/clusters/*/history{BASE}?fields=patch").json()["items"]
        assert all("object" not in c for c in only_b)
        assert http.get(f"/clusters/*/history{BASE}/cm-1").status_code == 400
        assert http.get(f"/clusters/*/history{BASE}?continue=forged").status_code == 400
        assert http.get("/clusters/*/history/core/v1/nosuch").status_code == 404
