"""The operations paths on their own: readiness before and after the first sync, and verbose."""

from __future__ import annotations

import threading

import httpx

from control_plane.fake import FakeCluster
from tests.app.conftest import run_gateway
from tests.helpers import wait_until


class _HeldLists:
    """A lister-watcher whose lists wait for ``gate``: a cache that cannot sync yet."""

    def __init__(self, inner, gate: threading.Event) -> None:
        self._inner, self._gate = inner, gate

    def list(self, options):
        self._gate.wait(30)
        return self._inner.list(options)

    def watch(self, options):
        return self._inner.watch(options)


def test_not_ready_until_the_prewarmed_caches_have_synced_then_ready_for_good():
    fake = FakeCluster()
    fake.request("POST", "/api/v1/namespaces", {"metadata": {"name": "a"}})
    fake.request("POST", "/api/v1/namespaces/a/configmaps", {"metadata": {"name": "c"}})
    gate = threading.Event()
    with run_gateway(fake, prewarm=("configmaps",), lister_watcher=lambda r, ns=None: _HeldLists(
            fake.lister_watcher(r, ns), gate)) as gateway:
        url = gateway.url
        waiting = httpx.get(f"{url}/readyz")
        assert waiting.status_code == 503
        verbose = httpx.get(f"{url}/readyz?verbose")
        assert verbose.status_code == 503
        assert verbose.text.splitlines() == waiting.text.splitlines() == [
            "[+]ping ok",
            "[-]cluster-default-synced failed: reason withheld",
            verbose.text.splitlines()[2],  # the heartbeat's word, whatever it is by now
            "readyz check failed"]
        gate.set()
        wait_until(lambda: httpx.get(f"{url}/readyz").status_code == 200, 20,
                   message="ready once synced")
        assert httpx.get(f"{url}/readyz").text == "ok"
        passed = httpx.get(f"{url}/readyz?verbose").text.splitlines()
        assert passed[:2] == ["[+]ping ok", "[+]cluster-default-synced ok"]
        assert passed[2].startswith("[+]cluster-default-following ok")
        assert passed[-1] == "readyz check passed"
        gateway.gateway.default.factory.stop_informer(
            next(iter(gateway.gateway.default.factory.informers())), "idle")
        assert httpx.get(f"{url}/readyz").status_code == 200, "synced once: ready for good"


def test_credentials_the_api_server_refuses_make_the_cluster_not_ready_saying_why():
    """An expired token, an exec plugin that fails to refresh it: the caches can no longer
    follow, and an operator must hear of it — unlike an API server that is away."""
    from app.cache.answer_age import HEARTBEAT_EVERY

    fake = FakeCluster()
    refused = threading.Event()
    discovery = fake.discovery()

    def fetch(path: str, timeout: float = 30.0):
        if refused.is_set() and path == "/api":
            return 401, {"kind": "Status", "code": 401, "reason": "Unauthorized"}
        return fake.fetch(path, timeout)

    discovery._fetch = fetch
    with run_gateway(fake, discovery=discovery) as gateway:
        url = gateway.url
        assert httpx.get(f"{url}/readyz").status_code == 200
        refused.set()
        wait_until(lambda: httpx.get(f"{url}/readyz").status_code == 503, 3 * HEARTBEAT_EVERY,
                   message="not ready while the credentials are refused")
        verbose = httpx.get(f"{url}/readyz?verbose").text
        assert "[-]cluster-default-credentials failed: reason withheld" in verbose
        assert "401" not in verbose, "an open probe names its checks, never a cause"
        refused.clear()
        wait_until(lambda: httpx.get(f"{url}/readyz").status_code == 200, 3 * HEARTBEAT_EVERY,
                   message="ready again once they work")
