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
