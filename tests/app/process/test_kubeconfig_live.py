"""Every request to the API server goes the same way: through the kubeconfig's proxy-url, else
HTTPS_PROXY, except hosts NO_PROXY names — discovery, reviews, lists and watches alike,
through a real forward proxy (Debian's tinyproxy)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.process.kubeconfig import api_client_for
from app.settings import Settings
from control_plane.cluster import free_port
from control_plane.pytest_plugin import unavailable
from tests.app.conftest import RunningGateway
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster


class Proxy:
    """tinyproxy on loopback; ``tunnels()`` counts the CONNECTs it relayed."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("tinyproxy", path="/usr/bin:/usr/sbin")
        if binary is None:
            unavailable("tinyproxy is not installed (python -m control_plane.binaries --test-tools)")
        self.port = free_port()
        self.log = workdir / "tinyproxy.log"
        conf = workdir / "tinyproxy.conf"
        conf.write_text(f"Port {self.port}\nListen 127.0.0.1\nTimeout 600\nLogFile \"{self.log}\"\n"
                        f"LogLevel Connect\nMaxClients 200\nAllow 127.0.0.1\n")
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen([binary, "-d", "-c", str(conf)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self._listening, 10, message="tinyproxy to listen")

    def _listening(self) -> bool:
        try:
            httpx.get(self.url, timeout=1)
            return True
        except httpx.TransportError:
            return False

    def tunnels(self) -> int:
        text = self.log.read_text() if self.log.exists() else ""
        return text.count("): CONNECT ")  # "Request (file descriptor N): CONNECT host:port"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


@pytest.fixture
def proxy(tmp_path) -> Iterator[Proxy]:
    running = Proxy(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def _serve_through(local_cluster, kubeconfig: Path, proxy: Proxy) -> None:
    """A gateway that authorizes its callers (so reviews are made), a list and a watch."""
    client = api_client_for(str(kubeconfig), "")
    settings = Settings(port=free_port(), authz="kubernetes")
    gateway = RunningGateway(settings, client).start()
    token = {"Authorization": f"Bearer {local_cluster.admin.token}"}
    url = f"http://127.0.0.1:{settings.port}"
    try:
        assert httpx.get(f"{url}/apis", headers=token, timeout=30).status_code == 200
        # the pool's kept-alive connections (heartbeat, discovery, the reviews just made) are
        # tunnels through the proxy: the API server is reached no other way here
        after_discovery = proxy.tunnels()
        assert after_discovery >= 1, "discovery and the reviews through the proxy"
        namespace = f"proxied-{uuid.uuid4().hex[:6]}"
        from control_plane.kubeapi import KubeAPI
        kube = KubeAPI.for_cluster(local_cluster)
        kube.ensure_namespace(namespace)
        path = f"/api/v1/namespaces/{namespace}/configmaps"
        assert httpx.get(url + path, headers=token, timeout=30).status_code == 200
        wait_until(lambda: proxy.tunnels() >= after_discovery + 2, 10,
                   message="the list and the watch through the proxy")
        kube.create(path, {"metadata": {"name": "seen"}})
        wait_until(lambda: [o["metadata"]["name"] for o in httpx.get(
            url + path, headers=token, timeout=30).json()["items"]] == ["seen"], 10,
            message="the change to arrive over the proxied watch")
    finally:
        gateway.stop()
        client.close()


def test_https_proxy_carries_every_request(local_cluster, proxy, tmp_path, monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    kubeconfig = local_cluster.write_kubeconfig(tmp_path / "kubeconfig", local_cluster.admin)
    _serve_through(local_cluster, kubeconfig, proxy)


def test_the_kubeconfigs_proxy_url_carries_every_request(local_cluster, proxy, tmp_path,
                                                         monkeypatch):
    for name in ("HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    kubeconfig = local_cluster.write_kubeconfig(tmp_path / "kubeconfig", local_cluster.admin)
    doc = json.loads(kubeconfig.read_text())
    doc["clusters"][0]["cluster"]["proxy-url"] = proxy.url
    kubeconfig.write_text(json.dumps(doc))
    _serve_through(local_cluster, kubeconfig, proxy)


def test_no_proxy_is_read_as_the_official_client_reads_it(local_cluster, proxy, tmp_path,
                                                           monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    kubeconfig = local_cluster.write_kubeconfig(tmp_path / "kubeconfig", local_cluster.admin)
    client = api_client_for(str(kubeconfig), "")
    settings = Settings(port=free_port())
    gateway = RunningGateway(settings, client).start()
    try:
        assert httpx.get(f"http://127.0.0.1:{settings.port}/api/v1/configmaps",
                         timeout=30).status_code == 200
        time.sleep(0.5)
        assert proxy.tunnels() == 0, "NO_PROXY names the API server: straight to it"
    finally:
        gateway.stop()
        client.close()
