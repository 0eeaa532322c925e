"""Cluster Secrets in Argo CD's shape: what a Secret must hold to name a cluster."""

from __future__ import annotations

import base64
import json

import pytest

from app.clusters.config import ClustersError
from app.clusters.secrets import spec_of_secret, specs_of_secrets


def _secret(**data: str) -> dict:
    return {"metadata": {"namespace": "kcg", "name": "prod-secret"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def test_a_secret_names_its_cluster_server_and_connection():
    spec = spec_of_secret(_secret(name="prod", server="https://prod.example:6443",
                                  config=json.dumps({"bearerToken": "t", "tlsClientConfig": {}})))
    assert (spec.name, spec.server) == ("prod", "https://prod.example:6443")
    assert json.loads(spec.config) == {"bearerToken": "t", "tlsClientConfig": {}}
    assert spec.source == "Secret kcg/prod-secret"


def test_the_same_connection_compares_equal_whatever_the_key_order():
    one = spec_of_secret(_secret(name="a", server="https://a", config='{"x": 1, "y": 2}'))
    two = spec_of_secret(_secret(name="a", server="https://a", config='{"y": 2, "x": 1}'))
    assert one == two


@pytest.mark.parametrize("data,says", [
    ({"server": "https://a"}, "needs a name"),
    ({"name": "arn:aws:eks:x", "server": "https://a"}, "not a DNS label"),
    ({"name": "a"}, "data.server"),
    ({"name": "a", "server": "https://a", "config": "{"}, "not JSON"),
    ({"name": "a", "server": "https://a", "config": "[1]"}, "JSON object"),
])
def test_a_secret_that_cannot_name_a_cluster_says_which_and_why(data, says):
    with pytest.raises(ClustersError) as info:
        spec_of_secret(_secret(**data))
    assert str(info.value).startswith("Secret kcg/prod-secret") and says in str(info.value)


def test_data_that_is_not_base64_is_refused():
    secret = _secret(server="https://a")
    secret["data"]["name"] = "%%%"
    with pytest.raises(ClustersError, match="not base64"):
        spec_of_secret(secret)


def test_two_secrets_naming_one_cluster_serve_the_one_created_first(caplog):
    """A Secret written later cannot take over a cluster already served by naming it too;
    the log says which Secret is left out, and which one it yields to (not 'the file's')."""
    first = _secret(name="prod", server="https://first.example:6443")
    first["metadata"].update(name="a-prod", creationTimestamp="2026-01-01T00:00:00Z")
    later = _secret(name="prod", server="https://later.example:6443")
    later["metadata"].update(name="0-takeover", creationTimestamp="2026-06-01T00:00:00Z")
    other = _secret(name="dev", server="https://dev.example:6443")
    for order in ([first, later, other], [later, other, first]):
        specs = specs_of_secrets(order)
        assert [(s.name, s.server) for s in specs] == [("dev", "https://dev.example:6443"),
                                                       ("prod", "https://first.example:6443")]
    said = [r.getMessage() for r in caplog.records]
    assert ("Secret kcg/0-takeover is not served: it names cluster prod, which Secret "
            "kcg/a-prod, created before it, names already") in said


def test_a_secrets_cluster_may_know_callers_by_prefixed_names():
    secret = _secret(name="prod", server="https://prod.example:6443")
    secret["metadata"]["annotations"] = {"kube-cache-gateway.io/user-prefix": "oidc:",
                                         "kube-cache-gateway.io/group-prefix": "g:"}
    spec = spec_of_secret(secret)
    assert (spec.user_prefix, spec.group_prefix) == ("oidc:", "g:")
    assert spec != spec_of_secret(_secret(name="prod", server="https://prod.example:6443")), \
        "a prefix changed is a connection changed: its decisions start over"
