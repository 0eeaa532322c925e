"""Streams from further back than the ring, against the real API server: a watch from an old
version gets the API server's own events (selector transitions too), from the history store,
then live ones — and the same after etcd compacted, when the API server says 410; an
EventSource resumes from an old id with no RESET. On SQLite and on PostgreSQL."""

from __future__ import annotations

import ssl
import threading

import httpx
import orjson
import pytest

from tests.app.conftest import run_gateway
from tests.app.history.kept import configmap, wait_kept

pytestmark = pytest.mark.cluster


def _said(events: list[dict]) -> list[tuple[str, str, str]]:
    return [(e["type"], e["object"]["metadata"]["name"], e["object"]["metadata"]["resourceVersion"])
            for e in events if e["type"] != "BOOKMARK"]


def test_a_watch_from_a_version_older_than_the_ring_is_the_api_servers_then_goes_live(
        local_cluster, kube, namespace, history_url, monkeypatch):
    from app.history import cluster_history

    monkeypatch.setattr(cluster_history, "REPLAY_PAGE", 2)  # the replay read in pages of two
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    api = httpx.Client(base_url=local_cluster.primary.url, timeout=30, verify=ssl.create_default_context(
        cafile=str(local_cluster.primary.ca_file)),
        headers={"Authorization": f"Bearer {local_cluster.admin.token}"})
    with run_gateway(local_cluster, history=history_url, event_ring_size=2) as running, \
            httpx.Client(base_url=running.url, timeout=30) as http, api:
        assert http.get(base).status_code == 200
        start = kube.create(base, configmap("a", tier="web"))["metadata"]["resourceVersion"]
        kube.create(base, configmap("b", tier="db"))
        kube.patch(f"{base}/a", {"data": {"v": "1"}})
        kube.patch(f"{base}/a", {"metadata": {"labels": {"tier": "db"}}})  # leaves tier=web
        kube.create(base, configmap("c", tier="web"))
        kube.delete(f"{base}/b")
        last = kube.patch(f"{base}/c", {"data": {"v": "2"}})
        running.wait_seen(last)
        wait_kept(running, last)
        assert running.gateway.default.caches.entries()  # the ring (2 events) lost the start

        for selector in ("", "&labelSelector=tier%3Dweb"):
            query = f"?watch=1&resourceVersion={start}{selector}"
            theirs = _said(_bounded(api, base + query))
            ours = _said(_bounded(http, base + query))
            assert ours == theirs, selector
            assert theirs, "the API server's watch cache still had them"
        assert ("DELETED", "a") in [(t, n) for t, n, _ in
                                   _said(_bounded(http, f"{base}?watch=1&resourceVersion={start}"
                                                       f"&labelSelector=tier%3Dweb"))]

        local_cluster.compact_etcd()
        exact = api.get(f"{base}?resourceVersion={start}&resourceVersionMatch=Exact")
        assert exact.status_code == 410  # etcd forgot it
        replayed = _said(_bounded(http, f"{base}?watch=1&resourceVersion={start}"))
        assert len(replayed) == 6

        # resumed from the past, then live: a change made while it runs comes next
        events: list[dict] = []
        opened = threading.Event()

        def follow():
            with http.stream("GET", f"{base}?watch=1&resourceVersion={start}") as answer:
                for line in answer.iter_lines():
                    if line:
                        events.append(orjson.loads(line))
                        opened.set()
                    if len(events) >= 7:
                        return

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        assert opened.wait(10)
        d = kube.create(base, configmap("d"))
        reader.join(15)
        assert _said(events)[:6] == replayed
        assert _said(events)[6] == ("ADDED", "d", d["metadata"]["resourceVersion"])

        # an EventSource's old id: the same changes, no RESET, ids that are versions
        with http.stream("GET", base, headers={"Accept": "text/event-stream",
                                               "Last-Event-ID": start}) as answer:
            frames = []
            for line in answer.iter_lines():
                if line.startswith("event: "):
                    frames.append(line.removeprefix("event: "))
                if len(frames) >= 7:
                    break
        assert "RESET" not in frames and frames[:7] == [t for t, _, _ in replayed] + ["ADDED"]


def _bounded(client: httpx.Client, url: str) -> list[dict]:
    """A watch's events within two seconds (``timeoutSeconds``)."""
    answer = client.get(url + "&timeoutSeconds=2")
    assert answer.status_code == 200, answer.text
    return [orjson.loads(line) for line in answer.text.splitlines() if line]
