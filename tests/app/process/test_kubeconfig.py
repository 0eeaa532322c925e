"""The API client of a cluster, from a kubeconfig: who it says it is to the API server."""

from __future__ import annotations

from app.process.kubeconfig import api_client_for
from app.version import USER_AGENT
from informer_core.rest import RawClient


def _kubeconfig(tmp_path, user: str, context: str = "x"):
    """A kubeconfig for an API server whose certificate is not verified, ``user`` its user."""
    path = tmp_path / "kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}}}]
users: [{{name: u, user: {user}}}]
contexts: [{{name: {context}, context: {{cluster: c, user: u}}}}]
current-context: {context}
""")
    return path


def test_every_request_to_the_api_server_names_the_gateway_and_its_version(tmp_path):
    kubeconfig = _kubeconfig(tmp_path, "{token: secret}")
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

    kubeconfig = _kubeconfig(tmp_path, "{token: secret}")
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


def _exec_kubeconfig(tmp_path, command: str) -> str:
    return str(_kubeconfig(tmp_path, "{exec: {apiVersion: client.authentication.k8s.io/v1beta1, "
                                     f"command: {command}}}}}", context="prod"))


def _plugin(tmp_path, body: str) -> str:
    script = tmp_path / "plugin"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return str(script)


def test_a_missing_exec_plugin_ends_serve_with_exit_2_naming_it(tmp_path):
    import subprocess
    import sys

    # its own process: serve sets up the process's logging, which a test process must keep
    out = subprocess.run([sys.executable, "-m", "app", "serve", "--kubeconfig",
                          _exec_kubeconfig(tmp_path, "no-such-plugin")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    err = out.stderr
    assert err.startswith("error: the credentials of the current context could not be loaded")
    assert "no-such-plugin" in err and "Traceback" not in err


def test_a_failing_exec_plugin_is_named_with_what_it_said(tmp_path):
    import pytest

    from app.process.kubeconfig import CredentialsError

    plugin = _plugin(tmp_path, "echo 'token expired: run aws sso login' >&2\nexit 1\n")
    with pytest.raises(CredentialsError) as info:
        api_client_for(_exec_kubeconfig(tmp_path, plugin), "prod")
    assert "context 'prod'" in str(info.value) and "token expired" in str(info.value)


def test_a_working_exec_plugin_gives_the_client_its_token(tmp_path):
    plugin = _plugin(tmp_path, """cat <<'JSON'
{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
 "status": {"token": "from-the-plugin"}}
JSON
""")
    client = api_client_for(_exec_kubeconfig(tmp_path, plugin), "")
    try:
        assert RawClient(client).headers()["authorization"] == "Bearer from-the-plugin"
    finally:
        client.close()


def test_a_hanging_exec_plugin_is_stopped_at_its_bound_and_its_cluster_is_not_held(
        tmp_path, monkeypatch):
    """The client waited for an exec plugin without a bound: one that hung held its cluster
    half-open for good. Now it is killed after EXEC_TIMEOUT and its credentials fail as a
    failing plugin's do; the process is gone."""
    import time

    import pytest

    import app.process.kubeconfig as kubeconfig

    monkeypatch.setattr(kubeconfig, "EXEC_TIMEOUT", 1.0)
    pid_file = tmp_path / "pid"
    plugin = _plugin(tmp_path, f"echo $$ > {pid_file}\nexec sleep 60\n")
    began = time.monotonic()
    with pytest.raises(kubeconfig.CredentialsError) as info:
        api_client_for(_exec_kubeconfig(tmp_path, plugin), "prod")
    took = time.monotonic() - began
    assert took < 10, f"{took:.1f} s: the bound is 1 s"
    assert "did not answer within 1 s and was stopped" in str(info.value)
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        import os

        os.kill(pid, 0)
