"""A gateway killed with SIGKILL while it writes its history: the SQLite file is whole, every
change it committed (to SQLite or PostgreSQL) is still there after a restart on the same store,
none twice, and the restarted gateway's Exact lists are the API server's own."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid

import httpx
import pytest

from control_plane.cluster import free_port
from control_plane.kubeapi import KubeAPI
from tests.app.conftest import run_gateway
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster


def _rows(url: str) -> list[tuple]:
    """Every configmaps row the store at ``url`` holds, read as a stranger to the gateway."""
    statement = ("SELECT namespace, name, rv, kind FROM kcg_changes WHERE resource = "
                 "'core/v1/configmaps'")
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url[len("sqlite:///"):]) as db:
            return db.execute(statement).fetchall()
    import psycopg

    with psycopg.connect(url) as db:
        return [tuple(row) for row in db.execute(statement).fetchall()]


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _written(url: str) -> float:
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith("kcg_history_changes_written_total"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_sigkill_while_writing_leaves_a_whole_store_and_loses_nothing_it_committed(
        local_cluster, tmp_path, history_url):
    kube = KubeAPI.for_cluster(local_cluster)
    namespace = f"kill-{uuid.uuid4().hex[:8]}"
    kube.ensure_namespace(namespace)
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    port = free_port()
    said = (tmp_path / "gateway.log").open("w")
    gateway = subprocess.Popen(
        [sys.executable, "-m", "app.launch.cli", "serve", "--kubeconfig",
         str(local_cluster.kubeconfig), "--port", str(port), "--history", history_url,
         "--prewarm", "configmaps", "--log-level", "warning"],
        stdout=subprocess.DEVNULL, stderr=said, env=dict(os.environ))
    url = f"http://127.0.0.1:{port}"
    stop = threading.Event()
    versions: list[str] = []

    def write() -> None:
        n = 0
        while not stop.is_set():
            name = f"o{n % 40:02d}"
            if n < 40:
                made = kube.create(base, {"metadata": {"name": name}, "data": {"n": str(n)}})
            else:
                made = kube.patch(f"{base}/{name}", {"data": {"n": str(n)}})
            versions.append(made["metadata"]["resourceVersion"])
            n += 1

    writer = threading.Thread(target=write, daemon=True)
    try:
        wait_until(lambda: _answers(f"{url}/readyz"), 60, message="the gateway ready")
        writer.start()
        wait_until(lambda: _written(url) > 300, 60, message="the gateway writing its history")
        gateway.send_signal(signal.SIGKILL)
        gateway.wait(10)
        if history_url.startswith("sqlite:///"):
            with sqlite3.connect(history_url[len("sqlite:///"):]) as db:
                assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        committed = set(_rows(history_url))
        assert len(committed) > 300
        time.sleep(1.0)  # more changes while no gateway runs
    finally:
        stop.set()
        if writer.is_alive():
            writer.join(30)
        if gateway.poll() is None:
            gateway.kill()
        gateway.wait(10)
        said.close()
    with run_gateway(local_cluster, history=history_url) as again, \
            httpx.Client(base_url=again.url, timeout=30) as http:
        assert http.get(base).status_code == 200
        # One change more, after the restart: the span reaches it once every change before it
        # (made while no gateway ran) is in. (The list's own version may lie past every
        # configmap change; the span would reach that only at a bookmark, up to a minute away.)
        last = kube.create(base, {"metadata": {"name": "after"}})["metadata"]["resourceVersion"]
        versions.append(last)
        history = again.gateway.default.history

        def caught_up() -> bool:
            spans = history.store.spans("default", "core/v1/configmaps")
            return any(hi >= int(last) for _, hi in spans)

        wait_until(caught_up, 30, message="the restarted gateway's store caught up")
        after = _rows(history_url)
        assert committed <= set(after)  # nothing committed is lost
        keys = [(ns, name, rv) for ns, name, rv, _ in after]
        assert len(keys) == len(set(keys))  # nothing twice
        ours = [(ns, name, rv) for ns, name, rv, _ in after if ns == namespace]
        assert ours and {str(rv) for _, _, rv in ours} <= set(versions)  # each a real change
        for version in versions[100:400:50]:  # the past as the API server has it
            query = f"?resourceVersion={version}&resourceVersionMatch=Exact"
            try:
                theirs = kube.get(base + query)
            except Exception:  # noqa: BLE001 - compacted there: nothing to compare with
                theirs = None
            ours_now = http.get(base + query)
            if theirs is None or ours_now.status_code == 410:
                continue  # not held by one of the two (compacted, or before a span)
            assert sorted((o["metadata"]["name"], o["metadata"]["resourceVersion"])
                          for o in ours_now.json()["items"]) == sorted(
                (o["metadata"]["name"], o["metadata"]["resourceVersion"]) for o in theirs["items"])
    kube.delete(f"/api/v1/namespaces/{namespace}")
