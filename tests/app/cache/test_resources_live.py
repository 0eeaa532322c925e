"""A cluster's caches and its real API server: back after an outage, followed again at once."""

from __future__ import annotations


import httpx
import pytest

from informer_core.backoff import ExponentialBackoff
from tests.app.conftest import run_gateway
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster


def long_outage(**kwargs) -> ExponentialBackoff:
    """A reflector's backoff as a long outage leaves it: 60 s a try, until it starts over."""
    backoff = ExponentialBackoff(cap=60.0, jitter=0.0, **kwargs)
    while backoff.next_delay() < 60.0:
        pass
    return backoff


def test_the_caches_follow_a_returning_api_server_within_seconds_not_their_backoff(
        local_cluster, kube, namespace, monkeypatch):
    """The informers back off 60 s a try, as a long outage leaves them (client-go's backoff
    reaches 30-60 s); the heartbeat finds the API server back and they follow it again
    within seconds: a change made after the restart is served long before the backoff
    would have ended. (The watch's version is too old for the restarted API server's
    watch cache: the relist that follows waits a backoff started over, under a second.)"""
    import informer_core.reflector as reflector_module

    monkeypatch.setattr(reflector_module, "ExponentialBackoff", long_outage)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    with run_gateway(local_cluster) as gw, httpx.Client(base_url=gw.url, timeout=10) as http:
        assert http.get(path).status_code == 200
        caches = gw.gateway.default.caches
        (entry,) = caches.entries().values()
        stats = entry.generic.informer().reflector_stats()
        local_cluster.stop_apiserver()
        try:
            wait_until(lambda: stats.watch_errors >= 1, 15, message="the watch to break")
            wait_until(caches.api_server_away, 15, message="the heartbeat to go unanswered")
        finally:
            local_cluster.start_apiserver()
        kube.create(path, {"metadata": {"name": "after"}})
        wait_until(lambda: [o["metadata"]["name"] for o in http.get(path).json()["items"]]
                   == ["after"], 30, interval=0.2, message="the change made after the restart")
