"""The gateway's caches: loaded on demand, unloaded when idle, kept while a stream is open."""

from __future__ import annotations

import time

import httpx

from tests.app.conftest import run_gateway
from tests.helpers import wait_until


def test_idle_informers_are_unloaded_and_come_back_on_demand(backend, namespace):
    with run_gateway(backend, idle_unload=2.0) as gw:
        url = f"{gw.url}/core/v1/namespaces/{namespace}/configmaps"
        assert httpx.get(url).status_code == 200
        factory = gw.gateway.default.factory
        (generic,) = factory.informers().values()
        wait_until(lambda: not gw.gateway.default.caches.entries(), timeout=15)
        wait_until(lambda: generic.thread is not None and not generic.thread.is_alive(), timeout=15)
        assert generic.gone_reason == "idle"
        assert httpx.get(url).status_code == 200, "a later request loads it again"
        (fresh,) = factory.informers().values()
        assert fresh is not generic and not fresh.stopped()


def test_unloading_is_off_by_default_and_streams_keep_a_cache_loaded(backend, namespace):
    with run_gateway(backend, idle_unload=1.0) as gw:
        url = f"{gw.url}/core/v1/namespaces/{namespace}/configmaps"
        with httpx.stream("GET", url + "?watch=true", timeout=30) as stream:
            time.sleep(3)  # past the idle time and two passes of the reaper: nothing may happen
            assert gw.gateway.default.caches.entries(), "a resource with an open stream is not idle"
        del stream
    with run_gateway(backend) as gw:
        assert gw.settings.idle_unload == 0


def test_requests_for_unknown_resources_share_one_discovery_refresh_and_hold_nothing():
    """A burst of misses (typos, a fuzzer, a hostile caller) costs one refresh per interval,
    holds no thread while it waits, and slows no request for a known resource."""
    import concurrent.futures

    from control_plane.fake import FakeCluster

    fake = FakeCluster()
    fetches: list[str] = []
    original = fake.fetch

    def counting(path, timeout=30.0):
        fetches.append(path)
        time.sleep(0.03)  # a busy API server: a refresh takes a good part of the interval
        return original(path, timeout)

    fake.fetch = counting
    fake.ensure_namespace("demo")
    with run_gateway(fake) as running, httpx.Client(base_url=running.url, timeout=30) as http:
        assert http.get("/api/v1/namespaces/demo/configmaps").status_code == 200
        time.sleep(1.1)  # past the refresh interval
        before = fetches.count("/api")
        burst_began = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(64) as pool:
            misses = [pool.submit(http.get, f"/api/v1/nosuch{i}") for i in range(64)]
            time.sleep(0.05)
            began = time.monotonic()
            known = http.get("/api/v1/namespaces/demo/configmaps")
            known_took = time.monotonic() - began
            answers = [m.result() for m in misses]
        burst = time.monotonic() - burst_began
        assert {a.status_code for a in answers} == {404}
        assert known.status_code == 200 and known_took < 0.5
        # one refresh per interval (1 s, start to start) while misses keep coming, not one
        # per miss, and none begun while another is still on its way; at most one heartbeat
        assert fetches.count("/api") - before <= 1 + int(burst) + 1 < len(answers)
