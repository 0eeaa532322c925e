"""From a cluster's spec to its API client: a kubeconfig's context, or an Argo CD Secret's
connection turned into the same kubeconfig."""

from __future__ import annotations

import base64
import json
import re

import pytest

from app.clusters.config import ClusterSpec
from app.clusters.connect import api_client_of, kubeconfig_of_secret
from app.settings import Settings
from informer_core.rest import RawClient


def test_a_secrets_bearer_token_and_tls_become_a_kubeconfig():
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n...").decode()
    config = kubeconfig_of_secret("prod", "https://10.0.0.1:6443", {
        "bearerToken": "t0ken",
        "tlsClientConfig": {"caData": ca, "serverName": "kubernetes.default", "insecure": False},
        "proxyUrl": "http://proxy:3128"})
    (cluster,) = config["clusters"]
    assert cluster["cluster"] == {"server": "https://10.0.0.1:6443",
                                  "certificate-authority-data": ca,
                                  "tls-server-name": "kubernetes.default",
                                  "proxy-url": "http://proxy:3128"}
    (user,) = config["users"]
    assert user["user"] == {"token": "t0ken"}
    assert config["current-context"] == "prod"


def test_an_exec_provider_becomes_the_kubeconfig_exec_plugin():
    config = kubeconfig_of_secret("eks", "https://x", {"execProviderConfig": {
        "command": "argocd-k8s-auth", "args": ["aws", "--cluster-name", "prod"],
        "env": {"AWS_REGION": "eu-west-1"}, "apiVersion": "client.authentication.k8s.io/v1beta1",
        "installHint": "install it"}, "tlsClientConfig": {"insecure": True}})
    assert config["clusters"][0]["cluster"]["insecure-skip-tls-verify"] is True
    assert config["users"][0]["user"]["exec"] == {
        "command": "argocd-k8s-auth", "args": ["aws", "--cluster-name", "prod"],
        "env": [{"name": "AWS_REGION", "value": "eu-west-1"}],
        "apiVersion": "client.authentication.k8s.io/v1beta1", "installHint": "install it"}


@pytest.mark.parametrize("config", [{"tlsClientConfig": "yes"}, {"execProviderConfig": {"args": []}},
                                    {"tlsClientConfig": {"caData": 5}}])
def test_a_malformed_secret_config_is_a_value_error(config):
    with pytest.raises(ValueError):
        kubeconfig_of_secret("x", "https://x", config)


def test_the_client_of_a_secret_spec_carries_its_token():
    spec = ClusterSpec("prod", server="https://127.0.0.1:6443",
                       config=json.dumps({"bearerToken": "s3cret",
                                          "tlsClientConfig": {"insecure": True}}))
    client = api_client_of(spec, Settings(cluster_secrets=True, cluster_secret_allow=("insecure",)))
    try:
        assert client.configuration.host == "https://127.0.0.1:6443"
        assert RawClient(client).headers()["authorization"] == "Bearer s3cret"
    finally:
        client.close()


def test_the_client_of_a_file_spec_uses_its_kubeconfig_and_context(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "one",
        "clusters": [{"name": c, "cluster": {"server": f"https://{c}.example:6443",
                                             "insecure-skip-tls-verify": True}}
                     for c in ("one", "two")],
        "users": [{"name": "u", "user": {"token": "tok"}}],
        "contexts": [{"name": c, "context": {"cluster": c, "user": "u"}} for c in ("one", "two")]}))
    client = api_client_of(ClusterSpec("b", kubeconfig=str(path), context="two"), Settings())
    try:
        assert client.configuration.host == "https://two.example:6443"
    finally:
        client.close()
    default = api_client_of(ClusterSpec("a"), Settings(kubeconfig=str(path)))
    try:
        assert default.configuration.host == "https://one.example:6443", "--kubeconfig, current context"
    finally:
        default.close()


def test_the_gateways_own_namespace_is_its_pods_else_its_contexts_else_default(tmp_path):
    from app.clusters.connect import own_namespace

    account = tmp_path / "sa"
    account.mkdir()
    (account / "namespace").write_text("kcg-system\n")
    assert own_namespace(Settings(serviceaccount_dir=str(account))) == "kcg-system"
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "one",
        "clusters": [{"name": "c", "cluster": {"server": "https://x"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "one", "context": {"cluster": "c", "user": "u", "namespace": "ops"}},
                     {"name": "two", "context": {"cluster": "c", "user": "u"}}]}))
    nowhere = str(tmp_path / "no-sa")
    assert own_namespace(Settings(serviceaccount_dir=nowhere, kubeconfig=str(path))) == "ops"
    assert own_namespace(Settings(serviceaccount_dir=nowhere, kubeconfig=str(path),
                                  context="two")) == "default"
    assert own_namespace(Settings(serviceaccount_dir=nowhere,
                                  kubeconfig=str(tmp_path / "missing"))) == "default"


def test_serve_refuses_an_identity_cluster_the_clusters_file_does_not_name(tmp_path, capsys):
    """A misspelt --authn-cluster once authorized with no authenticator at all, serving callers
    with no token: now serve does not start (exit 2), naming it and the clusters there are."""
    from app.clusters.connect import load_default_client
    from app.launch.launch import serve

    path = tmp_path / "clusters.yaml"
    path.write_text("clusters:\n  - name: home\n  - name: prod\n")
    settings = Settings(clusters=str(path), authz="kubernetes", authn_cluster="hmoe")
    assert load_default_client(settings) is None
    assert serve(settings) == 2
    said = capsys.readouterr().err
    assert "--authn-cluster hmoe: no cluster of that name" in said and "home, prod" in said


def _secret_spec(server: str = "https://prod.example:6443", **config) -> ClusterSpec:
    return ClusterSpec("prod", server=server, config=json.dumps(config), source="Secret kcg/prod")


@pytest.mark.parametrize("spec, says", [
    (_secret_spec(execProviderConfig={"command": "sh", "args": ["-c", "id"]}),
     "execProviderConfig runs 'sh', which is not among --cluster-secret-commands (none)"),
    (_secret_spec(proxyUrl="http://collector.example:3128"), "proxyUrl is refused unless"),
    (_secret_spec("http://prod.example:8080"), "a server without TLS is refused unless"),
    (_secret_spec(tlsClientConfig={"insecure": True}), "tlsClientConfig.insecure is refused"),
])
def test_what_a_cluster_secret_may_ask_for_is_refused_unless_allowed(tmp_path, spec, says):
    """Whoever may write a Secret there made the gateway run any command (execProviderConfig
    was executed) and could send its credentials through a proxy of theirs: each is refused
    by default, before anything runs, and allowed by the operator by name."""
    with pytest.raises(ValueError, match="^Secret kcg/prod: " + re.escape(says)):
        api_client_of(spec, Settings(cluster_secrets=True))
    allowed = Settings(cluster_secrets=True, cluster_secret_commands=("aws",),
                       cluster_secret_allow=("proxy-url", "http", "insecure"))
    if "execProviderConfig" not in spec.config:
        api_client_of(spec, allowed).close()


def test_an_allowed_command_is_run_and_no_other_and_never_with_a_secrets_path(tmp_path):
    """The exec plugin a Secret names runs only when its command is one the operator named,
    exactly as written; a Secret's env may not choose what runs (PATH, LD_PRELOAD)."""
    marker = tmp_path / "ran"
    plugin = tmp_path / "plugin"
    plugin.write_text(f"#!/bin/sh\ntouch {marker}\necho '{{\"apiVersion\": "
                      f"\"client.authentication.k8s.io/v1beta1\", \"kind\": \"ExecCredential\", "
                      f"\"status\": {{\"token\": \"t\"}}}}'\n")
    plugin.chmod(0o755)
    exec_config = {"command": str(plugin), "apiVersion": "client.authentication.k8s.io/v1beta1"}
    spec = _secret_spec(execProviderConfig=exec_config)
    with pytest.raises(ValueError, match="not among --cluster-secret-commands"):
        api_client_of(spec, Settings(cluster_secrets=True, cluster_secret_commands=("aws",)))
    assert not marker.exists(), "a command not allowed never runs"
    for name in ("PATH", "LD_PRELOAD"):
        sneaky = _secret_spec(execProviderConfig={**exec_config, "env": {name: str(tmp_path)}})
        with pytest.raises(ValueError, match=f"sets {name}, which choose what runs"):
            api_client_of(sneaky, Settings(cluster_secrets=True,
                                           cluster_secret_commands=(str(plugin),)))
    assert not marker.exists()
    client = api_client_of(spec, Settings(cluster_secrets=True,
                                          cluster_secret_commands=(str(plugin),)))
    client.close()
    assert marker.exists(), "the allowed command ran"
