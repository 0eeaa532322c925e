"""The resource policy: --allow and --deny, written as kubectl writes resources."""

from __future__ import annotations

import pytest

from app.auth.policy import ResourcePolicy
from app.kube.status import StatusError
from informer_core.discovery import APIResource

SECRETS = APIResource("", "v1", "secrets", "Secret", True, frozenset({"list", "watch"}), singular="secret")
PODS = APIResource("", "v1", "pods", "Pod", True, frozenset({"list", "watch"}), ("po",), "pod")
DEPLOY = APIResource("apps", "v1", "deployments", "Deployment", True, frozenset({"list", "watch"}), ("deploy",))
WIDGETS = APIResource("example.com", "v1", "widgets", "Widget", True, frozenset({"list", "watch"}))


def test_default_policy_denies_secrets_only():
    policy = ResourcePolicy()
    assert not policy.permits(SECRETS)
    assert all(policy.permits(r) for r in (PODS, DEPLOY, WIDGETS))


@pytest.mark.parametrize("allow,deny,expected", [
    ((), ("secrets",), {"pods", "deployments", "widgets"}),
    (("pods", "deployments.apps"), (), {"pods", "deployments"}),
    (("po", "deploy"), (), {"pods", "deployments"}),
    (("deployments.v1.apps", "widgets.example.com"), (), {"deployments", "widgets"}),
    (("*",), ("widgets.example.com", "secret"), {"pods", "deployments"}),
    (("pods",), ("pods",), set()),
    (("deployments.extensions",), (), set()),
])
def test_allow_and_deny(allow, deny, expected):
    policy = ResourcePolicy(allow, deny)
    assert {r.resource for r in (SECRETS, PODS, DEPLOY, WIDGETS) if policy.permits(r)} == expected


def test_a_denied_resource_is_a_403_naming_it_and_the_flags():
    with pytest.raises(StatusError) as info:
        ResourcePolicy().check(SECRETS, "token")
    error = info.value
    assert (error.code, error.reason) == (403, "Forbidden")
    assert "secrets is not served by this gateway" in error.message and "--deny" in error.message
    assert error.body()["details"] == {"name": "token", "kind": "secrets"}
    ResourcePolicy().check(PODS)  # allowed: no error
