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
        factory = gw.gateway.cache.factory
        (generic,) = factory.informers().values()
        wait_until(lambda: not gw.gateway.cache.entries(), timeout=15)
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
            assert gw.gateway.cache.entries(), "a resource with an open stream is not idle"
        del stream
    with run_gateway(backend) as gw:
        assert gw.settings.idle_unload == 0
