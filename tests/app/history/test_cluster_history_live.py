"""The past through the list paths, against the real API server: an Exact list at any version
the gateway kept equals the API server's own answer at it, and still answers once etcd has
compacted it (the API server then says 410) — on SQLite and on PostgreSQL."""

from __future__ import annotations

import contextlib
import json
import ssl
import time
from typing import Any

import httpx
import pytest

from control_plane.kubeapi import KubeAPI
from tests.app.conftest import run_gateway
from tests.app.history.kept import configmap, wait_kept
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster


def _items(body: dict) -> list[tuple[str, str]]:
    return [(o["metadata"]["name"], o["metadata"]["resourceVersion"]) for o in body["items"]]


def test_exact_lists_at_past_versions_are_the_api_servers_even_after_compaction(
        local_cluster, kube, namespace, history_url):
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    with run_gateway(local_cluster, history=history_url) as running, \
            httpx.Client(base_url=running.url, timeout=30) as http:
        assert http.get(base).status_code == 200  # the cache loads; its list is the baseline
        versions = []
        a = kube.create(base, configmap("a", tier="web"))
        versions.append(a["metadata"]["resourceVersion"])
        b = kube.create(base, configmap("b", tier="db"))
        versions.append(b["metadata"]["resourceVersion"])
        a = kube.patch(f"{base}/a", {"data": {"v": "1"}})
        versions.append(a["metadata"]["resourceVersion"])
        kube.delete(f"{base}/b")
        c = kube.create(base, configmap("c", tier="web"))
        versions.append(c["metadata"]["resourceVersion"])
        b2 = kube.create(base, configmap("b", tier="web"))  # the same name again, another object
        versions.append(b2["metadata"]["resourceVersion"])
        running.wait_seen(b2)
        wait_kept(running, versions[-1])

        theirs = {}
        for version in versions:
            query = f"resourceVersion={version}&resourceVersionMatch=Exact"
            theirs[version] = _items(kube.get(f"{base}?{query}"))
            ours = http.get(f"{base}?{query}")
            assert ours.status_code == 200, ours.text
            assert _items(ours.json()) == theirs[version], version
            assert ours.json()["metadata"]["resourceVersion"] == version
        assert [n for n, _ in theirs[versions[2]]] == ["a", "b"]  # the versions differ indeed
        assert [n for n, _ in theirs[versions[3]]] == ["a", "c"]

        local_cluster.compact_etcd()
        old = versions[1]
        query = f"resourceVersion={old}&resourceVersionMatch=Exact"
        refused = httpx.get(f"{local_cluster.primary.url}{base}?{query}",
                            headers={"Authorization": f"Bearer {local_cluster.admin.token}"},
                            verify=ssl.create_default_context(
                                cafile=str(local_cluster.primary.ca_file)), timeout=30)
        assert refused.status_code == 410  # the API server forgot it
        ours = http.get(f"{base}?{query}")
        assert ours.status_code == 200 and _items(ours.json()) == theirs[old]

        # every form of a list, at the past version
        selected = http.get(f"{base}?{query}&labelSelector=tier%3Ddb").json()
        assert _items(selected) == [i for i in theirs[old] if i[0] == "b"]
        first = http.get(f"{base}?{query}&limit=1").json()
        assert _items(first) == theirs[old][:1] and first["metadata"]["continue"]
        rest = http.get(f"{base}?limit=1&continue={first['metadata']['continue']}").json()
        assert _items(rest) == theirs[old][1:2]  # the next page at the same past version
        assert rest["metadata"]["resourceVersion"] == old
        table = http.get(f"{base}?{query}", headers={
            "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json()
        assert table["kind"] == "Table" and [r["object"]["metadata"]["name"]
                                             for r in table["rows"]] == ["a", "b"]
        meta = http.get(f"{base}?{query}", headers={
            "Accept": "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"}).json()
        assert meta["kind"] == "PartialObjectMetadataList" and len(meta["items"]) == 2
        assert "data" not in meta["items"][0]

        # before the gateway kept anything: gone, as the API server says of a compacted version
        too_old = http.get(f"{base}?resourceVersion=1&resourceVersionMatch=Exact")
        assert too_old.status_code == 410, too_old.text
        assert too_old.json()["reason"] == "Expired"


def _configmap_lists(kube) -> int:
    """The LISTs of configmaps the API server has answered (its own metric)."""
    total = 0
    for line in kube.text("/metrics").splitlines():
        if line.startswith("apiserver_request_total{") and 'resource="configmaps"' in line \
                and 'verb="LIST"' in line:
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def _names(http, base) -> list[tuple[str, str]]:
    return _items(http.get(base).json())


def test_a_restart_on_the_store_serves_at_once_and_watches_on_without_a_list(
        local_cluster, kube, namespace, history_url):
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    with run_gateway(local_cluster, history=history_url) as first, \
            httpx.Client(base_url=first.url, timeout=30) as http:
        assert http.get(base).status_code == 200
        kube.create(base, configmap("a"))
        b = kube.create(base, configmap("b"))
        first.wait_seen(b)
        wait_kept(first, b)
        before = int(b["metadata"]["resourceVersion"])
    # while no gateway runs
    a = kube.patch(f"{base}/a", {"data": {"v": "1"}})
    kube.delete(f"{base}/b")
    c = kube.create(base, configmap("c"))
    lists = _configmap_lists(kube)
    with run_gateway(local_cluster, history=history_url) as second, \
            httpx.Client(base_url=second.url, timeout=30) as http:
        assert http.get(base).status_code == 200
        second.wait_seen(c)
        entry = next(iter(second.gateway.default.caches.entries().values()))
        stats = entry.informer.reflector_stats()
        assert stats.seeded and stats.lists == 0
        assert _configmap_lists(kube) == lists  # the API server answered no LIST
        assert _names(http, base) == _items(kube.get(base))
        wait_kept(second, c)
        history = http.get(f"/history{base}/a").json()["items"]
        assert [(h["type"], h["resourceVersion"]) for h in history][:2] == [
            ("MODIFIED", a["metadata"]["resourceVersion"]), ("ADDED", history[1]["resourceVersion"])]
        exact = http.get(f"{base}?resourceVersion={before}&resourceVersionMatch=Exact")
        assert exact.status_code == 200 and [n for n, _ in _items(exact.json())] == ["a", "b"]
        # a watch from before the restart: the changes made while no gateway ran, from the
        # store (this gateway's ring began after them), then live
        replayed = http.get(f"{base}?watch=1&resourceVersion={before}&timeoutSeconds=2")
        assert [(json.loads(line)["type"], json.loads(line)["object"]["metadata"]["name"])
                for line in replayed.text.splitlines() if line] == [
            ("MODIFIED", "a"), ("DELETED", "b"), ("ADDED", "c")]
        last = kube.patch(f"{base}/c", {"data": {"v": "2"}})
        second.wait_seen(last)
        wait_kept(second, last)
    # while no gateway runs: changes, then a new API server whose watch cache begins now
    kube.patch(f"{base}/a", {"data": {"v": "2"}})
    kube.delete(f"{base}/c")
    d = kube.create(base, configmap("d"))
    fresh = local_cluster.add_apiserver(name="fresh-watch-cache")
    try:
        with run_gateway(local_cluster, server=fresh, history=history_url) as third, \
                httpx.Client(base_url=third.url, timeout=30) as http:
            assert http.get(base).status_code == 200
            third.wait_seen(d)
            wait_until(lambda: _names(http, base) == _items(kube.get(base)), 10,
                       message="the relist's state")
            entry = next(iter(third.gateway.default.caches.entries().values()))
            assert entry.informer.reflector_stats().lists >= 1  # 410 for the stored version
            wait_kept(third, d)  # the relist's differences written
            # the differences as the changes they are: never a phantom delete-and-add
            kinds = {n: [h["type"] for h in http.get(f"/history{base}/{n}").json()["items"]]
                     for n in ("a", "c", "d")}
            assert kinds["a"] == ["MODIFIED", "MODIFIED", "ADDED"]
            assert kinds["c"] == ["DELETED", "MODIFIED", "ADDED"]
            assert kinds["d"] == ["ADDED"]
    finally:
        local_cluster.remove_apiserver(fresh)


def _gateways(stack: contextlib.ExitStack, local_cluster, urls: list[str],
              **settings) -> list[tuple[Any, httpx.Client]]:
    """A gateway on each store of ``urls`` (run side by side, to wait for the API server once)
    and a client of each."""
    running = [stack.enter_context(run_gateway(local_cluster, history=url, **settings))
               for url in urls]
    return [(r, stack.enter_context(httpx.Client(base_url=r.url, timeout=30))) for r in running]


@pytest.mark.timeout(240)
def test_events_the_api_server_deletes_after_its_ttl_stay_in_the_history(
        local_cluster, kube, namespace, tmp_path, postgres_history_url):
    # an API server whose Events live 5 s (its leases, reused, keep them up to a minute more)
    short = local_cluster.add_apiserver(["--event-ttl=5s"], name="short-event-ttl")
    base = f"/api/v1/namespaces/{namespace}/events"
    try:
        writer = KubeAPI.for_cluster(local_cluster, server=short)
        with contextlib.ExitStack() as stack:
            gateways = _gateways(stack, local_cluster,
                                 [f"sqlite:///{tmp_path}/h.db", postgres_history_url])
            for _, http in gateways:
                assert http.get(base).status_code == 200
            made = writer.create(base, {
                "metadata": {"name": "backoff"}, "type": "Warning", "reason": "BackOff",
                "message": "Back-off restarting failed container", "count": 1,
                "involvedObject": {"kind": "Pod", "namespace": namespace, "name": "api-1"}})
            version = made["metadata"]["resourceVersion"]
            for running, _ in gateways:
                running.wait_seen(made)
            wait_until(lambda: kube.get(f"{base}/backoff", ok_missing=True) is None, 150,
                       interval=1.0, message="the API server's TTL to delete the Event")
            for running, http in gateways:  # on SQLite, then on PostgreSQL
                wait_until(lambda: [o["metadata"]["name"] for o in http.get(base).json()["items"]]
                           == [], 10, message="the gateway to see it go")
                wait_until(lambda: [c["type"] for c in http.get(f"/history{base}/backoff").json()
                                    ["items"]] == ["DELETED", "ADDED"], 10,
                           message=f"its history on {running.settings.history}: added, then "
                                   f"deleted by the TTL")
                exact = http.get(f"{base}?resourceVersion={version}&resourceVersionMatch=Exact")
                assert exact.status_code == 200
                assert [(o["metadata"]["name"], o["reason"]) for o in exact.json()["items"]] == [
                    ("backoff", "BackOff")]
    finally:
        local_cluster.remove_apiserver(short)


def test_what_falls_out_of_retention_answers_410_and_the_present_stays(
        local_cluster, kube, namespace, tmp_path, postgres_history_url, monkeypatch):
    from app.history import writer

    monkeypatch.setattr(writer, "RETAIN_EVERY", 0.5)  # retention looked at twice a second
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    with contextlib.ExitStack() as stack:
        gateways = _gateways(stack, local_cluster,
                             [f"sqlite:///{tmp_path}/h.db", postgres_history_url],
                             history_retention=3.0)
        for _, http in gateways:
            assert http.get(base).status_code == 200
        old = kube.create(base, configmap("a"))
        version = old["metadata"]["resourceVersion"]
        query = f"{base}?resourceVersion={version}&resourceVersionMatch=Exact"
        for running, http in gateways:
            running.wait_seen(old)
            wait_until(lambda: http.get(query).status_code == 200, 10, message="kept")
        time.sleep(4.0)  # older than the retention now
        newer = kube.patch(f"{base}/a", {"data": {"v": "1"}})
        now = newer["metadata"]["resourceVersion"]
        for running, http in gateways:  # on SQLite, then on PostgreSQL
            running.wait_seen(newer)
            wait_until(lambda: http.get(query).status_code == 410, 10,
                       message=f"forgotten on {running.settings.history}")
            assert http.get(query).json()["reason"] == "Expired"
            assert _items(http.get(base).json()) == [("a", now)]
            wait_until(lambda: http.get(f"{base}?resourceVersion={now}"
                                        f"&resourceVersionMatch=Exact").status_code == 200, 10,
                       message="the newest version kept")

def test_a_postgresql_store_that_refuses_then_comes_back_loses_nothing_and_doubles_nothing(
        local_cluster, kube, namespace, local_postgres, postgres_history_url):
    """The database refuses connections and its sessions are ended (a failover, a restart):
    the present is served as ever, the past is 503 with why, and once it is back every change
    made meanwhile is written, each once."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    database = postgres_history_url.rsplit("/", 1)[1]
    with run_gateway(local_cluster, history=postgres_history_url) as running, \
            httpx.Client(base_url=running.url, timeout=30) as http:
        assert http.get(base).status_code == 200
        first = kube.create(base, configmap("a"))
        wait_kept(running, first)
        history = running.gateway.default.history
        local_postgres.sql(f"ALTER DATABASE {database} ALLOW_CONNECTIONS false")
        local_postgres.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           f"WHERE datname = '{database}'")
        try:
            made = [kube.create(base, configmap("b")), kube.patch(f"{base}/a", {"data": {"v": "1"}}),
                    kube.create(base, configmap("c"))]
            running.wait_seen(made[-1])
            assert _items(http.get(base).json()) == [  # the present: as ever
                (o["metadata"]["name"], o["metadata"]["resourceVersion"])
                for o in sorted([made[1], made[0], made[2]], key=lambda o: o["metadata"]["name"])]
            wait_until(lambda: history.problem() is not None, 15, message="the store seen away")
            away = http.get(f"/history{base}")
            assert away.status_code == 503 and away.headers["Retry-After"], away.text
            assert "password" not in away.text
        finally:
            local_postgres.sql(f"ALTER DATABASE {database} ALLOW_CONNECTIONS true")
        wait_until(lambda: history.problem() is None, 30, message="the store back")
        wait_kept(running, made[-1])
        changes = [(c["type"], c["object"]["metadata"]["name"], c["resourceVersion"])
                   for c in http.get(f"/history{base}").json()["items"]]
        assert sorted(changes, key=lambda c: int(c[2])) == [
            ("ADDED", "a", first["metadata"]["resourceVersion"]),
            ("ADDED", "b", made[0]["metadata"]["resourceVersion"]),
            ("MODIFIED", "a", made[1]["metadata"]["resourceVersion"]),
            ("ADDED", "c", made[2]["metadata"]["resourceVersion"])]
