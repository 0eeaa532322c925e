"""A cluster's history when its store is away: the present unaffected, the past 503 with why,
nothing lost once the store is back; the store never written for another cluster."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from app.clusters.cluster import Cluster, build_factory
from app.gateway import Gateway
from app.history.sqlite_store import SQLiteStore
from app.history.store import ForeignStore
from app.settings import Settings
from control_plane.fake import FakeCluster
from tests.app.conftest import run_gateway
from tests.app.history.kept import HISTORY, PODS, configmap
from tests.helpers import wait_until

BASE = "/api/v1/namespaces/shop/configmaps"


def _fake() -> FakeCluster:
    fake = FakeCluster()
    fake.ensure_namespace("kube-system")  # the cluster's identity: its UID
    fake.ensure_namespace("shop")
    return fake


def test_a_store_away_holds_up_nothing_and_gets_every_change_once_it_is_back(tmp_path):
    fake = _fake()
    folder = tmp_path / "later"  # not there yet: the store cannot be opened
    with run_gateway(fake, history=f"sqlite:///{folder}/h.db") as running, \
            httpx.Client(base_url=running.url, timeout=30) as http:
        assert http.get(BASE).status_code == 200
        made = [fake.create(BASE, configmap(f"c{i}")) for i in range(5)]
        running.wait_seen(made[-1])
        assert [o["metadata"]["name"] for o in http.get(BASE).json()["items"]] == \
            [f"c{i}" for i in range(5)]  # the present: as ever
        past = http.get(f"/history{BASE}")
        assert past.status_code == 503 and "does not exist" in past.json()["message"]
        assert past.headers["Retry-After"]
        ready = http.get("/readyz?verbose")
        assert ready.status_code == 200 and "[+]cluster-default-history behind" in ready.text
        assert "does not exist" not in ready.text  # a cause is never on the open probe
        assert "kcg_history_writable{cluster=\"default\"} 0.0" in http.get("/metrics").text

        folder.mkdir()
        history = running.gateway.default.history
        wait_until(lambda: history.problem() is None, 15, message="the store back")
        assert history.writer.flushed(10)
        changes = http.get(f"/history{BASE}").json()["items"]
        assert sorted(c["object"]["metadata"]["name"] for c in changes) == [f"c{i}" for i in range(5)]
        version = made[2]["metadata"]["resourceVersion"]
        # the baseline the cache listed came with the store: exact from then on
        exact = http.get(f"{BASE}?resourceVersion={version}&resourceVersionMatch=Exact")
        assert exact.status_code in (200, 410), exact.text
        ready = http.get("/readyz?verbose")
        assert "[+]cluster-default-history ok" in ready.text
        assert "kcg_history_writable{cluster=\"default\"} 1.0" in http.get("/metrics").text


def test_a_store_written_for_another_cluster_stops_the_gateway_from_starting(tmp_path):
    store = SQLiteStore("sqlite:///h.db", str(tmp_path / "h.db"))
    store.create()
    store.claim("default", "uid-of-another-cluster")
    store.close()
    fake = _fake()
    settings = Settings(history=f"sqlite:///{tmp_path}/h.db")
    factory = build_factory(settings, lister_watcher_func=fake.lister_watcher,
                            discovery=fake.discovery())
    gateway = Gateway(settings, [Cluster("default", settings, factory)])

    async def start() -> None:
        try:
            await gateway.start()
        finally:
            await gateway.stop()

    with pytest.raises(ForeignStore, match="another cluster named 'default'"):
        asyncio.run(start())
    assert SQLiteStore("sqlite:///h.db", str(tmp_path / "h.db")).spans("default", "core/v1/pods") == []


def test_reads_of_the_past_beyond_the_bound_are_told_to_come_back(tmp_path, monkeypatch):
    from app.history import cluster_history
    from app.kube.status import StatusError

    store = SQLiteStore("sqlite:///h.db", str(tmp_path / "h.db"))
    store.create()
    history = cluster_history.ClusterHistory(store, "c", 3600)
    history.writer.claimed = True
    monkeypatch.setattr(cluster_history, "MAX_WAITING", 8)

    async def many() -> list:
        return await asyncio.gather(*(history._read(time.sleep, 0.2) for _ in range(20)),
                                    return_exceptions=True)

    outcomes = asyncio.run(many())
    refused = [o for o in outcomes if isinstance(o, StatusError)]
    assert len(refused) == 12 and all(o.code == 429 for o in refused)
    assert refused[0].headers["Retry-After"] == "1"
    assert outcomes.count(None) == 8
    store.close()


def test_a_replay_that_retention_passes_ends_with_410_never_with_a_silent_gap(store):
    from app.history.cluster_history import ClusterHistory
    from app.history.store import Span
    from app.kube.status import StatusError

    store.write("c", [(PODS, c) for c in HISTORY] + [(PODS, Span(10, 15))], 0.0)
    history = ClusterHistory(store, "c", 3600)
    history.writer.claimed = True

    async def pages() -> list:
        first, _ = await history.changes_page(PODS, 10, None, 15, None, set(), limit=2)
        store.forget_before("c", PODS, 13)  # retention, between two pages of the replay
        try:
            await history.changes_page(PODS, 10, (first[-1].rv, "shop", first[-1].name), 15,
                                       None, set(), limit=2)
        except StatusError as error:
            return [first, error]
        return [first, None]

    first, error = asyncio.run(pages())
    assert [c.rv for c in first] == [11, 12]
    assert error is not None and error.code == 410 and error.reason == "Expired"
    assert "the oldest version kept is 13" in error.message
