"""Answers never staler than asked: a list or get naming a resourceVersion waits for the watch
(at most 3 s, then the API server's 504), resourceVersionMatch as the API server checks it.

The watch is made to lag on purpose: the in-memory cluster holds every watch
event while paused (the real API server's side is in ``test_freshness_live``)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import httpx
import pytest

from app.cache.hub import EventHub
from app.cache.requested_version import FRESHNESS_WAIT


@pytest.fixture
def cm_path(kube, gateway, http) -> str:
    namespace = f"f-{uuid.uuid4().hex[:8]}"
    kube.ensure_namespace(namespace)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    gateway.wait_seen(kube.create(path, {"metadata": {"name": "first"}}))
    assert http.get(path).status_code == 200  # the cache is loaded and watching
    return path


def names(answer: httpx.Response) -> set[str]:
    return {o["metadata"]["name"] for o in answer.json()["items"]}


def read_later(http, url: str) -> dict:
    """GET ``url`` on a thread; the dict gets the answer and how long it took."""
    out: dict = {}

    def run():
        began = time.monotonic()
        out["answer"] = http.get(url)
        out["took"] = time.monotonic() - began

    out["thread"] = threading.Thread(target=run)
    out["thread"].start()
    return out


def test_a_read_at_the_version_of_a_write_sees_the_write_though_the_watch_lags(
        backend, kube, http, cm_path):
    backend.pause_watches()
    try:
        written = kube.create(cm_path, {"metadata": {"name": "mine"}})
        rv = written["metadata"]["resourceVersion"]
        assert "mine" not in names(http.get(cm_path))  # without the version: what the cache holds
        pending = read_later(http, f"{cm_path}?resourceVersion={rv}")
        one = read_later(http, f"{cm_path}/mine?resourceVersion={rv}")
        time.sleep(0.5)
        assert pending["thread"].is_alive() and one["thread"].is_alive()  # waiting, not answering
    finally:
        backend.resume_watches()
    pending["thread"].join(5)
    one["thread"].join(5)
    assert pending["answer"].status_code == 200
    assert "mine" in names(pending["answer"])
    assert int(pending["answer"].json()["metadata"]["resourceVersion"]) >= int(rv)
    assert 0.5 <= pending["took"] < FRESHNESS_WAIT
    assert one["answer"].status_code == 200 and one["answer"].json()["metadata"]["name"] == "mine"


@pytest.mark.parametrize("query", ["resourceVersion={rv}",
                                   "resourceVersion={rv}&resourceVersionMatch=NotOlderThan",
                                   "resourceVersion={rv}&resourceVersionMatch=Exact"])
def test_a_version_the_watch_does_not_bring_in_time_is_the_api_servers_504(
        backend, kube, http, cm_path, query):
    before = http.get(cm_path).json()["metadata"]["resourceVersion"]
    backend.pause_watches()
    try:
        rv = kube.create(cm_path, {"metadata": {"name": "late"}})["metadata"]["resourceVersion"]
        began = time.monotonic()
        got = http.get(f"{cm_path}?{query.format(rv=rv)}")
        took = time.monotonic() - began
    finally:
        backend.resume_watches()
    assert got.status_code == 504
    assert got.headers["Retry-After"] == "1"
    assert got.json() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f"Timeout: Too large resource version: {rv}, current: {before}",
        "reason": "Timeout", "details": {
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1}, "code": 504}
    assert FRESHNESS_WAIT <= took < FRESHNESS_WAIT + 1.5


def test_version_zero_or_none_answers_at_once_from_what_the_cache_holds(backend, kube, http,
                                                                        cm_path):
    backend.pause_watches()
    try:
        kube.create(cm_path, {"metadata": {"name": "unseen"}})
        for query in ("", "?resourceVersion=0", "?resourceVersion=",
                      "?resourceVersion=0&resourceVersionMatch=NotOlderThan"):
            began = time.monotonic()
            got = http.get(cm_path + query)
            assert got.status_code == 200 and "unseen" not in names(got), query
            assert time.monotonic() - began < 1.0
    finally:
        backend.resume_watches()


def test_an_exact_list_is_answered_at_the_version_it_names_or_410(kube, gateway, http, cm_path):
    first = http.get(cm_path).json()["metadata"]["resourceVersion"]
    again = http.get(f"{cm_path}?resourceVersion={first}&resourceVersionMatch=Exact")
    assert again.status_code == 200
    assert again.json()["metadata"]["resourceVersion"] == first
    gateway.wait_seen(kube.create(cm_path, {"metadata": {"name": "later"}}))
    moved = http.get(f"{cm_path}?resourceVersion={first}&resourceVersionMatch=Exact")
    assert moved.status_code == 410 and moved.json()["reason"] == "Expired"
    assert http.get(f"{cm_path}?resourceVersion={first}").status_code == 200  # NotOlderThan


@pytest.mark.parametrize("query, message, cause", [
    ("resourceVersionMatch=NotOlderThan",
     "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
     "FieldValueForbidden"),
    ("resourceVersionMatch=Exact&resourceVersion=0",
     'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
     "FieldValueForbidden"),
    ("resourceVersionMatch=Bogus&resourceVersion=5",
     'Unsupported value: "Bogus": supported values: "Exact", "NotOlderThan", ""',
     "FieldValueNotSupported"),
    ("resourceVersionMatch=NotOlderThan&resourceVersion=5&limit=1&continue=abc",
     "Forbidden: resourceVersionMatch is forbidden when continue is provided",
     "FieldValueForbidden"),
    # as API servers since 1.27 answer (the WatchList feature on: the 1.20 API server of the
    # suite said "resourceVersionMatch is forbidden for watch"), from apimachinery's rules
    ("watch=1&resourceVersionMatch=NotOlderThan&resourceVersion=5",
     "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
     "provided", "FieldValueForbidden"),
    ("watch=1&sendInitialEvents=true",
     "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
     "FieldValueForbidden"),
])
def test_resource_version_match_is_checked_as_the_api_server_checks_it(http, cm_path, query,
                                                                        message, cause):
    got = http.get(f"{cm_path}?{query}")
    assert got.status_code == 422
    body = got.json()
    assert body["reason"] == "Invalid"
    assert body["message"] == f'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: {message}'
    assert body["details"]["causes"] == [{"reason": cause, "message": message,
                                          "field": "resourceVersionMatch"}]
    # a get ignores resourceVersionMatch, as the API server does
    assert http.get(f"{cm_path}/first?{query.replace('watch=1&', '')}").status_code == 200


def test_the_hub_wakes_waiters_when_their_version_arrives_and_forgets_the_rest():
    async def scenario():
        hub = EventHub(ring_size=10)
        hub.mark_ready()
        early = asyncio.ensure_future(hub.reached(5, timeout=1.0))
        never = asyncio.ensure_future(hub.reached(50, timeout=0.2))
        await asyncio.sleep(0)
        hub.rv = 5  # as _publish advances it
        hub._wake()
        assert await early is True
        assert await never is False
        assert hub._waiters == []
        assert await hub.reached(3, timeout=0.01) is True  # already there: no waiting

    asyncio.run(scenario())


def test_watch_list_combinations_the_api_server_refuses_are_its_422(http, cm_path):
    """Every error at once, aggregated as apimachinery's field errors are."""
    both = http.get(f"{cm_path}?watch=1&sendInitialEvents=true&resourceVersionMatch=Exact")
    assert both.status_code == 422
    assert both.json()["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: [resourceVersionMatch: Forbidden: '
        'sendInitialEvents requires setting resourceVersionMatch to NotOlderThan, '
        'resourceVersionMatch: Unsupported value: "Exact": supported values: "NotOlderThan"]')
    assert [c["reason"] for c in both.json()["details"]["causes"]] == [
        "FieldValueForbidden", "FieldValueNotSupported"]
    listed = http.get(f"{cm_path}?sendInitialEvents=true")
    assert listed.status_code == 422
    assert listed.json()["details"]["causes"] == [{
        "reason": "FieldValueForbidden", "field": "sendInitialEvents",
        "message": "Forbidden: sendInitialEvents is forbidden for list"}]
    assert http.get(f"{cm_path}?watch=1&sendInitialEvents=yes").status_code == 400
