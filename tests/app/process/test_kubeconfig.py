"""The API client of a cluster, from a kubeconfig: who it says it is to the API server."""

from __future__ import annotations

from app.process.kubeconfig import api_client_for
from app.version import USER_AGENT
from informer_core.rest import RawClient


def test_every_request_to_the_api_server_names_the_gateway_and_its_version(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("""apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: secret}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
""")
    client = api_client_for(str(kubeconfig), "")
    try:
        headers = RawClient(client).headers()  # lists, watches, discovery and reviews alike
        assert headers["User-Agent"] == USER_AGENT
        assert headers["authorization"] == "Bearer secret"
    finally:
        client.close()


def test_an_unverified_api_server_is_said_once_at_start_not_on_every_connection(tmp_path, caplog):
    import warnings

    import urllib3

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("""apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: secret}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
""")
    with caplog.at_level("WARNING", logger="kube-cache-gateway"):
        client = api_client_for(str(kubeconfig), "")
    client.close()
    (said,) = [r.getMessage() for r in caplog.records]
    assert "https://127.0.0.1:6443" in said and "without verifying its TLS certificate" in said
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        api_client_for(str(kubeconfig), "").close()
        warnings.warn("per connection", urllib3.exceptions.InsecureRequestWarning)
    assert not [w for w in caught if issubclass(w.category, urllib3.exceptions.InsecureRequestWarning)]
