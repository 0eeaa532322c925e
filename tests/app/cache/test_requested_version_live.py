"""Freshness on the real API server: its own answers to the same version questions, and a
watch made to lag by a fault proxy between the gateway and the API server."""

from __future__ import annotations

import ssl
import threading
import time
import types
import uuid

import httpx
import pytest

from control_plane.faults import FaultProxy
from tests.app.conftest import run_gateway

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def direct(local_cluster):
    trust = ssl.create_default_context(cafile=str(local_cluster.primary.ca_file))
    with httpx.Client(base_url=local_cluster.primary.url, verify=trust, timeout=30, headers={
            "Authorization": f"Bearer {local_cluster.admin.token}"}) as client:
        yield client


@pytest.fixture
def cm_path(kube, gateway, http) -> str:
    namespace = f"fl-{uuid.uuid4().hex[:8]}"
    kube.ensure_namespace(namespace)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    gateway.wait_seen(kube.create(path, {"metadata": {"name": "first"}}))
    assert http.get(path).status_code == 200
    return path


@pytest.mark.parametrize("suffix", ["", "/first"])
def test_a_version_from_the_future_is_answered_as_the_api_server_answers_it(
        http, direct, cm_path, suffix):
    future = int(http.get(cm_path).json()["metadata"]["resourceVersion"]) + 100_000
    url = f"{cm_path}{suffix}?resourceVersion={future}"
    ours, theirs = http.get(url), direct.get(url)
    assert ours.status_code == theirs.status_code == 504
    assert ours.headers["Retry-After"] == theirs.headers["Retry-After"] == "1"
    mine, its = ours.json(), theirs.json()
    assert {k: v for k, v in mine.items() if k != "message"} == \
        {k: v for k, v in its.items() if k != "message"}
    prefix = f"Timeout: Too large resource version: {future}, current: "
    assert mine["message"].startswith(prefix) and its["message"].startswith(prefix)


@pytest.mark.parametrize("query", [
    "resourceVersionMatch=NotOlderThan", "resourceVersionMatch=Exact&resourceVersion=0",
    "resourceVersionMatch=Bogus&resourceVersion=5",
    "resourceVersionMatch=NotOlderThan&resourceVersion=5&limit=1&continue=abc",
    # on a watch the gateway answers as API servers since 1.27 do (watch-list), not as the
    # suite's 1.20: tests/app/cache/test_requested_version.py holds those words
])
def test_resource_version_match_errors_are_the_api_servers(http, direct, cm_path, query):
    ours, theirs = http.get(f"{cm_path}?{query}"), direct.get(f"{cm_path}?{query}")
    assert ours.status_code == theirs.status_code == 422
    mine, its = ours.json(), theirs.json()
    assert mine["message"] == its["message"]
    assert mine["details"]["causes"] == its["details"]["causes"]
    assert mine["reason"] == its["reason"]


def test_read_your_write_through_a_lagging_watch(local_cluster, kube):
    primary = local_cluster.primary
    namespace = f"lag-{uuid.uuid4().hex[:8]}"
    kube.ensure_namespace(namespace)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    with FaultProxy("127.0.0.1", primary.port) as proxy, \
            run_gateway(local_cluster, server=types.SimpleNamespace(
                url=proxy.url, ca_file=primary.ca_file)) as gateway, \
            httpx.Client(base_url=gateway.url, timeout=30) as http:
        assert http.get(path).status_code == 200  # loaded, watching through the proxy
        proxy.pause()  # the watch lags from here
        try:
            written = kube.create(path, {"metadata": {"name": "mine"}})
            rv = written["metadata"]["resourceVersion"]
            stale = http.get(path)
            assert [o["metadata"]["name"] for o in stale.json()["items"]] == []
            answers: dict = {}

            def read():
                began = time.monotonic()
                answers["got"] = http.get(f"{path}?resourceVersion={rv}")
                answers["took"] = time.monotonic() - began

            reader = threading.Thread(target=read)
            reader.start()
            time.sleep(1.0)
            assert reader.is_alive()
        finally:
            proxy.resume()
        reader.join(10)
        got = answers["got"]
        assert got.status_code == 200
        assert [o["metadata"]["name"] for o in got.json()["items"]] == ["mine"]
        assert 1.0 <= answers["took"] < 3.0
        # held longer than the bound: the API server's 504
        proxy.pause()
        try:
            rv = kube.create(path, {"metadata": {"name": "later"}})["metadata"]["resourceVersion"]
            late = http.get(f"{path}?resourceVersion={rv}")
        finally:
            proxy.resume()
        assert late.status_code == 504 and late.json()["reason"] == "Timeout"
