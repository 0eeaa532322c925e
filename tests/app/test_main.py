"""Readiness, HTTPS serving, and the real `serve` command's graceful SIGTERM."""

from __future__ import annotations

import os
import pathlib
import signal
import ssl
import subprocess
import sys
import time

import httpx
import pytest

from control_plane.certs import self_signed_cert
from control_plane.cluster import free_port

pytestmark = pytest.mark.cluster


def wait_for(predicate, timeout=20.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("timed out")


def _chart_readiness_probe() -> dict:
    """The readiness probe the chart gives the Deployment (the rendered manifests)."""
    import yaml

    manifests = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "kube-cache-gateway.yaml"
    for doc in yaml.safe_load_all(manifests.read_text()):
        if doc and doc.get("kind") == "Deployment":
            (container,) = doc["spec"]["template"]["spec"]["containers"]
            return container["readinessProbe"]
    raise AssertionError("no Deployment in the rendered manifests")


def test_readyz_waits_for_prewarm_then_stays_ready_while_the_api_server_is_away(local_cluster):
    """The chart's own probe, asked as the kubelet asks it while the API server is stopped,
    never fails: the replicas stay in their Service exactly when the cache is all there is."""
    probe = _chart_readiness_probe()
    period, timeout, threshold = (probe["periodSeconds"], probe["timeoutSeconds"],
                                  probe["failureThreshold"])
    server = local_cluster.add_apiserver()
    client = local_cluster.api_client(server=server)
    try:

        from app.settings import Settings
        from tests.app.conftest import RunningGateway

        settings = Settings(port=free_port(), prewarm=("configmaps", "deployments.apps"))
        gw = RunningGateway(settings, client).start()
        try:
            wait_for(lambda: httpx.get(f"{gw.url}/readyz").status_code == 200)
            local_cluster.stop_apiserver(server)
            answers = []
            # long enough for the heartbeat to notice and for the kubelet to give up
            for _ in range(threshold + 2):
                began = time.monotonic()
                answers.append(httpx.get(f"{gw.url}/readyz", timeout=timeout).status_code)
                time.sleep(max(0.0, period - (time.monotonic() - began)))
            assert answers == [200] * len(answers), answers
            verbose = httpx.get(f"{gw.url}/readyz?verbose", timeout=timeout)
            assert verbose.status_code == 200
            assert "[+]cluster-default-synced ok" in verbose.text
            assert "[+]cluster-default-following stale: serving from the cache" in verbose.text
            assert verbose.text.endswith("readyz check passed\n")
            assert httpx.get(f"{gw.url}/healthz").text == "ok", "alive all the same"
            served = httpx.get(f"{gw.url}/core/v1/configmaps")
            assert served.status_code == 200, "the cache still answers"
            assert "age" in served.headers, "saying how old it may be"
        finally:
            gw.stop()
    finally:
        local_cluster.remove_apiserver(server)
        client.close()


def test_prewarm_of_a_denied_or_unknown_resource_fails_start_up(local_cluster, tmp_path):
    kubeconfig = local_cluster.write_kubeconfig(tmp_path / "kc", local_cluster.admin)
    for prewarm, needle in (("secrets", "denied"), ("nosuchthings", "nosuchthings")):
        out = subprocess.run([sys.executable, "-m", "app.launch.cli", "serve", "--kubeconfig", str(kubeconfig),
                              "--port", str(free_port()), "--prewarm", prewarm],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode != 0
        assert needle in out.stderr


def test_serve_under_load_finishes_requests_ends_streams_and_exits_cleanly_on_sigterm(
        local_cluster, tmp_path):
    """SIGTERM while lists are being answered and streams are open: every request that got an
    answer got a whole 200, the SSE stream ends with ``retry:`` and an ERROR 503, the watch
    ends cleanly (as the API server ends its watches: client-go watches again), and the
    process exits 0 within its grace period."""
    import threading

    kubeconfig = local_cluster.write_kubeconfig(tmp_path / "kc", local_cluster.admin)
    port = free_port()
    env = dict(os.environ, KCG_PORT=str(port), KCG_LOG_LEVEL="warning")
    proc = subprocess.Popen([sys.executable, "-m", "app.launch.cli", "serve", "--kubeconfig", str(kubeconfig),
                             "--prewarm", "configmaps"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    stop = threading.Event()
    outcomes: list[str] = []

    def load() -> None:  # lists, back to back, each on a fresh connection
        while not stop.is_set():
            try:
                got = httpx.get(f"http://127.0.0.1:{port}/api/v1/configmaps", timeout=10)
                whole = got.status_code == 200 and got.json()["kind"] == "ConfigMapList"
                outcomes.append("ok" if whole else f"status {got.status_code}")
            except httpx.ConnectError:
                outcomes.append("refused")  # after the listener closed: the client retries
            except (httpx.HTTPError, ValueError) as exc:
                outcomes.append(f"broken {type(exc).__name__}")

    watch_end: list[str] = []

    def watch() -> None:
        try:
            with httpx.stream("GET", f"http://127.0.0.1:{port}/api/v1/configmaps",
                              params={"watch": "true"}, timeout=30) as answer:
                for _ in answer.iter_lines():
                    pass
            watch_end.append("ended")
        except httpx.HTTPError as exc:
            watch_end.append(f"broken {type(exc).__name__}")

    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: _ok(f"{url}/readyz"), timeout=30)
        loaders = [threading.Thread(target=load) for _ in range(4)]
        watcher = threading.Thread(target=watch)
        for t in (*loaders, watcher):
            t.start()
        with httpx.stream("GET", f"{url}/core/v1/configmaps",
                          headers={"Accept": "text/event-stream"}, timeout=30) as sse:
            lines = sse.iter_lines()
            while next(lines) != "event: SYNCED":
                pass
            time.sleep(0.5)  # under load
            answered_before = outcomes.count("ok")
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            rest = list(lines)  # ends when the server ends the stream
        assert proc.wait(timeout=15) == 0
        took = time.monotonic() - started
        stop.set()
        for t in (*loaders, watcher):
            t.join(15)
        assert answered_before > 10
        assert [o for o in outcomes if o not in ("ok", "refused")] == []
        assert "retry: 2000" in rest and any('"code":503' in line for line in rest), rest[-4:]
        assert watch_end == ["ended"]
        assert took < 10
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def test_serve_speaks_https_with_the_given_certificate(local_cluster, tmp_path):
    kubeconfig = local_cluster.write_kubeconfig(tmp_path / "kc", local_cluster.admin)
    cert, key = self_signed_cert(tmp_path)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app.launch.cli", "serve", "--kubeconfig", str(kubeconfig),
                             "--port", str(port), "--tls-cert-file", str(cert),
                             "--tls-private-key-file", str(key), "--log-level", "warning"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"https://127.0.0.1:{port}"
        trusted = ssl.create_default_context(cafile=str(cert))
        wait_for(lambda: _ok(f"{url}/healthz", verify=trusted), timeout=30)
        answer = httpx.get(f"{url}/api/v1/namespaces", verify=trusted, timeout=30)
        assert answer.status_code == 200 and answer.json()["kind"] == "NamespaceList"
        with pytest.raises(httpx.HTTPError):  # plain HTTP on the TLS port is refused
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).raise_for_status()
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def _ok(url: str, verify: bool | ssl.SSLContext = True) -> bool:
    try:
        return httpx.get(url, timeout=2, verify=verify).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_secrets_cluster_is_never_connected_with_the_gateways_own_client():
    """With --cluster-secrets and no clusters file, the first Secret's cluster (the default)
    was connected with the client serve had loaded — the gateway's own identity — so whoever
    could write a Secret had the home cluster served under a name of their choosing. A
    Secret's cluster has the Secret's credentials only; the file's default still reuses it."""
    import json

    from app.clusters.config import ClusterSpec
    from app.main import _connector
    from app.query.budget import QueryMemory
    from app.settings import Settings
    from informer_core.rest import RawClient

    from kubernetes.client import ApiClient, Configuration

    home = Configuration()
    home.host = "https://home.invalid:6443"
    own = ApiClient(home)  # the gateway's own client: never used for a Secret's cluster
    spec = ClusterSpec("prod", server="https://127.0.0.1:6443",
                       config=json.dumps({"bearerToken": "from-the-secret"}))
    connect = _connector(Settings(cluster_secrets=True), QueryMemory(), None, own, None)
    cluster = connect(spec, True)
    try:
        assert cluster.api_client is not own
        assert RawClient(cluster.api_client).headers()["authorization"] == "Bearer from-the-secret"
    finally:
        cluster.api_client.close()
    file_default = _connector(Settings(clusters="clusters.yaml"), QueryMemory(), None, own, None)
    assert file_default(ClusterSpec("home"), True).api_client is own
    own.close()
