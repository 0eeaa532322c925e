"""The cluster unit: what it holds, and that reads of its data are decided by its own reviews."""

from __future__ import annotations

import asyncio

import pytest

from app.auth.policy import ResourcePolicy
from app.clusters.cluster import DEFAULT_CLUSTER, Cluster
from app.gateway import Gateway
from app.kube.access import Access
from app.kube.status import StatusError
from app.main import build_factory
from app.settings import Settings
from control_plane.fake import FakeCluster
from informer_core.discovery import APIResource
from tests.app.fake_reviewer import TableReviewer

PODS = APIResource("", "v1", "pods", "Pod", True, frozenset({"list", "watch"}))


def _cluster(name: str, settings: Settings, reviewer=None, default: bool = True) -> Cluster:
    fake = FakeCluster()
    factory = build_factory(settings, discovery=fake.discovery(),
                            lister_watcher_func=fake.lister_watcher)
    return Cluster(name, settings, factory, reviewer, default=default)


def test_a_cluster_holds_its_client_discovery_factory_caches_and_reviews():
    settings = Settings(authz="kubernetes")
    reviewer = TableReviewer()
    cluster = _cluster(DEFAULT_CLUSTER, settings, reviewer)
    assert cluster.name == "default" and cluster.default
    assert cluster.discovery is cluster.factory.discovery
    assert cluster.caches.factory is cluster.factory
    assert cluster.reviewer is reviewer and cluster.access.reviewer is reviewer
    plain = _cluster("plain", Settings())
    assert plain.reviewer is None and plain.access is None  # --authz none: nobody reviewed


def test_each_clusters_reads_are_decided_by_its_own_reviews_with_one_identity():
    """Identity once (the gateway's authenticator, in the default cluster); rights per cluster."""
    settings = Settings(authz="kubernetes")
    users = {"t": {"username": "alice", "groups": []}}
    here = TableReviewer(users, {("alice", "list", "pods", "a")})
    there = TableReviewer(users)  # alice may read nothing there
    first, second = _cluster("first", settings, here), _cluster("second", settings, there, False)
    gateway = Gateway(settings, [first, second])
    assert gateway.default is first and set(gateway.clusters) == {"first", "second"}
    assert first.authorization.authenticator is second.authorization.authenticator

    async def ask(cluster: Cluster):
        scope = {"type": "http", "headers": [(b"authorization", b"Bearer t")], "client": ("1.2.3.4", 1)}
        return await cluster.authorization.authorize(scope, Access("list", PODS, "a"))

    assert asyncio.run(ask(first)).identity.user.name == "alice"
    with pytest.raises(StatusError) as info:
        asyncio.run(ask(second))
    assert info.value.code == 403
    assert len(here.token_reviews) == 1, "reviewed once, kept for the second cluster's read"
    assert not there.token_reviews, "tokens are reviewed in the identity cluster only"
    assert len(there.access_reviews) == 1, "rights asked of the cluster that holds the data"


def test_a_gateway_serves_exactly_one_default_cluster():
    settings = Settings()
    with pytest.raises(ValueError, match="exactly one default cluster"):
        Gateway(settings, [_cluster("a", settings, default=False)])
    with pytest.raises(ValueError, match="exactly one default cluster"):
        Gateway(settings, [_cluster("a", settings), _cluster("b", settings)])


def test_the_policy_is_the_gateways_in_every_cluster():
    settings = Settings(deny=("secrets", "configmaps"))
    gateway = Gateway(settings, [_cluster("a", settings), _cluster("b", settings, default=False)])
    assert all(c.authorization.policy is gateway.policy for c in gateway.clusters.values())
    assert isinstance(gateway.policy, ResourcePolicy)
