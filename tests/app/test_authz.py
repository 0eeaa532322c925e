"""The resource policy: names as kubectl writes them; deny wins; secrets denied by default."""

from __future__ import annotations

import asyncio

import pytest

from app.authz import Access, Authorization, ResourcePolicy
from app.status import StatusError
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


def test_authorization_raises_a_403_status_naming_the_resource():
    authz = Authorization(ResourcePolicy())
    asyncio.run(authz.authorize(None, Access("list", PODS)))
    with pytest.raises(StatusError) as info:
        asyncio.run(authz.authorize(None, Access("watch", SECRETS, "default")))
    assert info.value.code == 403 and "secrets" in info.value.message
    assert Access("watch", SECRETS, "default").describe() == 'watch secrets in the namespace "default"'
