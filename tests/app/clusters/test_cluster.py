"""The cluster unit: what it holds, and that reads of its data are decided by its own reviews."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from app.auth.policy import ResourcePolicy
from app.clusters.cluster import DEFAULT_CLUSTER, Cluster
from app.gateway import Gateway
from app.kube.access import Access, Attributes
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


# -- the cluster's RBAC, followed: decisions and open streams -----------------------------------

def _fake_with_ann_reading(namespace: str = "shop") -> FakeCluster:
    """An in-memory cluster holding RBAC in which ann may read the namespace's Pods."""
    from control_plane.fake import BUILTIN_RESOURCES, RBAC_RESOURCES

    fake = FakeCluster(BUILTIN_RESOURCES + RBAC_RESOURCES)
    fake.ensure_namespace(namespace)
    fake.create(f"/api/v1/namespaces/{namespace}/pods", {"metadata": {"name": "p1"}})
    fake.create(f"{RBAC}/clusterroles", {"metadata": {"name": "read-pods"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]})
    fake.create(f"{RBAC}/namespaces/{namespace}/rolebindings", {
        "metadata": {"name": "ann-reads", "namespace": namespace},
        "subjects": [{"kind": "User", "name": "ann"}],
        "roleRef": {"kind": "ClusterRole", "name": "read-pods"}})
    return fake


RBAC = "/apis/rbac.authorization.k8s.io/v1"
ANN = {"t-ann": {"username": "ann", "groups": ["system:authenticated"]}}


@contextlib.contextmanager
def _deciding(fake: FakeCluster, reviewer: TableReviewer, **settings):
    """A gateway over ``fake`` deciding from its RBAC (``--authz-local-rbac true``: the table
    reviewer cannot be asked for rules), once it does."""
    from tests.app.conftest import run_gateway
    from tests.helpers import wait_until

    with run_gateway(fake, reviewer=reviewer, authz="kubernetes", authz_local_rbac="true",
                     **settings) as running:
        wait_until(lambda: running.gateway.default.access.rbac.deciding, 10,
                   message="RBAC followed")
        yield running


def _anns_watch(running):
    """ann's watch of the Pods of ``shop``, once its first state is in."""
    from tests.app.readers import LineReader

    reader = LineReader(f"{running.url}/api/v1/namespaces/shop/pods?watch=true",
                        headers={"Authorization": "Bearer t-ann"})
    reader.wait_for(lambda lines: any('"p1"' in line for line in lines))
    return reader


def test_open_streams_end_with_a_403_when_rbac_takes_the_right_away():
    """Over an in-memory cluster holding RBAC (``--authz-local-rbac true``: the table reviewer
    cannot be asked for rules): ann's watch and EventSource stream are allowed by a
    RoleBinding, and end with the API server's 403 within a second of its deletion — no
    review was asked for either."""
    import time

    import httpx

    from tests.app.readers import LineReader

    fake = _fake_with_ann_reading()
    reviewer = TableReviewer(ANN)
    with _deciding(fake, reviewer) as running:
        headers = {"Authorization": "Bearer t-ann"}
        path = f"{running.url}/api/v1/namespaces/shop/pods"
        assert httpx.get(path, headers=headers).status_code == 200
        readers = [LineReader(f"{path}?watch=true", headers=headers),
                   LineReader(path, headers={**headers, "Accept": "text/event-stream"})]
        try:
            for reader in readers:
                reader.wait_for(lambda lines: any('"p1"' in line for line in lines))
            fake.delete(f"{RBAC}/namespaces/shop/rolebindings/ann-reads")
            began = time.monotonic()
            for reader in readers:
                reader.wait_for(lambda lines: any('"code":403' in line for line in lines), 5)
                assert reader.ended(timeout=2)
            took = time.monotonic() - began
        finally:
            for reader in readers:
                reader.close()
        assert took < 1.0, f"the streams ended {took:.2f} s after the binding was deleted"
        assert httpx.get(path, headers=headers).status_code == 403
        # the 403 came from a review: RBAC allowed nothing any more; before, nothing was asked
        assert reviewer.access_reviews and all(
            r["user"] == "ann" for r in reviewer.access_reviews)


def test_a_change_of_rbac_that_keeps_the_right_costs_open_streams_no_reauthorization(
        monkeypatch):
    """Every change of RBAC wakes every open stream; one that RBAC still allows is granted
    again from the caches where it waits (``Authorization.regranted``), with no task and no
    ``reauthorize``: under churn, ten thousand streams cost a lookup each per change."""
    import time

    import httpx

    from app.auth.authorization import Authorization
    from tests.helpers import wait_until

    fake = _fake_with_ann_reading()
    calls = []
    full = Authorization.reauthorize

    async def counted(self, grant):
        calls.append(grant.access.verb)
        return await full(self, grant)

    monkeypatch.setattr(Authorization, "reauthorize", counted)
    with _deciding(fake, TableReviewer(ANN)) as running:
        readers = []
        try:
            readers.extend(_anns_watch(running) for _ in range(20))
            epoch = running.gateway.default.access.epoch
            for i in range(5):  # RBAC changes that leave ann's right as it was
                fake.create(f"{RBAC}/clusterroles", {"metadata": {"name": f"other-{i}"},
                                                     "rules": []})
            wait_until(lambda: running.gateway.default.access.epoch >= epoch + 5, 5)
            time.sleep(0.6)  # swept: every stream woken and checked again
            fake.create("/api/v1/namespaces/shop/pods", {"metadata": {"name": "p2"}})
            for reader in readers:  # still open, still delivering
                reader.wait_for(lambda lines: any('"p2"' in line for line in lines))
            assert calls == []
            fake.delete(f"{RBAC}/namespaces/shop/rolebindings/ann-reads")
            for reader in readers:
                reader.wait_for(lambda lines: any('"code":403' in line for line in lines), 5)
        finally:
            for reader in readers:
                reader.close()
        assert len(calls) == len(readers)  # the refusal: worded by the full path, once each
        assert httpx.get(f"{running.url}/api/v1/namespaces/shop/pods",
                         headers={"Authorization": "Bearer t-ann"}).status_code == 403


@pytest.mark.parametrize("lagging, within", [(1, 1.0), (2, 3.0)])
def test_a_stream_the_api_servers_lagging_rbac_still_allowed_ends_once_it_caught_up(
        lagging, within):
    """The race one revocation in ten met against the real API server: a binding's deletion
    arrives here first, the stream checked again asks a review, and the API server's own
    RBAC — a moment behind — still allows it. That allow, kept for the deny TTL with no
    change of RBAC to come, let the watch run 30 s. Now it is asked again a moment later
    (refused: the stream ends within a second), and an allow given again is kept a second
    (the stream's next check, two seconds on at most, is refused)."""
    import time

    fake = _fake_with_ann_reading()
    reviewer = TableReviewer(ANN)
    reviewer.allow_reason = ('RBAC: allowed by RoleBinding "ann-reads/shop" of ClusterRole '
                             '"read-pods" to User "ann"')
    with _deciding(fake, reviewer) as running:
        reader = _anns_watch(running)
        try:
            assert reviewer.access_reviews == []  # RBAC here allowed it
            reviewer.lagging = lagging  # the API server's RBAC: behind by that many answers
            fake.delete(f"{RBAC}/namespaces/shop/rolebindings/ann-reads")
            began = time.monotonic()
            reader.wait_for(lambda lines: any('"code":403' in line for line in lines), 5)
            took = time.monotonic() - began
        finally:
            reader.close()
        assert running.gateway.default.access.disagreements >= 1
        assert len(reviewer.access_reviews) == lagging + 1
        assert took < within, f"the stream ended {took:.2f} s after the binding was deleted"


def test_a_merged_stream_lets_go_of_the_cluster_whose_rbac_took_the_right_away(tmp_path):
    """Each member of a merged stream rests on its own cluster's RBAC: a binding removed in
    one lets that cluster go within a second (its objects DELETED), the others stay."""
    import time

    from tests.app.conftest import run_fake_clusters
    from tests.app.readers import LineReader
    from tests.helpers import wait_until

    fakes = {"east": _fake_with_ann_reading(), "west": _fake_with_ann_reading()}
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml", reviewer=TableReviewer(ANN),
                           authz="kubernetes", authz_local_rbac="true") as running:
        wait_until(lambda: len(running.gateway.clusters) == 2 and all(
            c.access.rbac.deciding for c in running.gateway.clusters.values()), 10,
            message="both clusters' RBAC followed")
        reader = LineReader(f"{running.url}/clusters/*/api/v1/namespaces/shop/pods?watch=true",
                            headers={"Authorization": "Bearer t-ann"})
        try:
            reader.wait_for(lambda lines: sum('"p1"' in line for line in lines) == 2)
            fakes["east"].delete(f"{RBAC}/namespaces/shop/rolebindings/ann-reads")
            began = time.monotonic()
            reader.wait_for(lambda lines: any('"type":"DELETED"' in line and '"east"' in line
                                              for line in lines), 5)
            took = time.monotonic() - began
            assert not reader.ended(timeout=0.5)  # west still streams
        finally:
            reader.close()
        assert took < 1.0, f"east was let go {took:.2f} s after its binding was deleted"


@pytest.mark.parametrize("ttl, stale_after", [(300.0, 300.0), (0.0, 5.0)])
def test_rbac_decides_while_unseen_no_longer_than_a_reviews_allow_was_kept(ttl, stale_after):
    """A cluster out of sight: its RBAC goes on deciding as a kept review's allow went on,
    for --authz-cache-ttl, at least 5 s (a watch being reopened), then reviews decide."""
    settings = Settings(authz="kubernetes", authz_cache_ttl=ttl)
    cluster = _cluster(DEFAULT_CLUSTER, settings, TableReviewer())
    assert cluster.local_rbac.stale_after == stale_after
    assert cluster.access.rbac is cluster.local_rbac.rbac


def test_a_change_of_rbac_while_a_stream_is_checked_again_is_not_missed(monkeypatch):
    """The stream's wake-up for a change that comes while it is being checked again (after an
    earlier change) was taken before its next wait, which then slept until its next timer
    (a minute here): now it checks again at once."""
    import time

    from app.auth.authorization import Authorization

    fake = _fake_with_ann_reading()
    reviewer = TableReviewer(ANN)
    original = Authorization.reauthorize
    revoked: list[float] = []

    async def reauthorize(self, grant):
        renewed = await original(self, grant)
        if not revoked:  # the first check again: the binding goes while it is made
            revoked.append(time.monotonic())
            fake.delete(f"{RBAC}/namespaces/shop/rolebindings/ann-reads")
            rbac = self.access.rbac
            while rbac.allows("ann", ("system:authenticated",),
                              Attributes("watch", "pods", "", "v1", "shop")) is not None:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.3)  # the sweep's wake-up comes meanwhile
        return renewed

    monkeypatch.setattr(Authorization, "reauthorize", reauthorize)
    # the check that awaits (a review due): the caches' own answer is made in one step, with
    # no wait in which a change could come (``regranted``)
    monkeypatch.setattr(Authorization, "regranted", lambda self, grant: None)
    with _deciding(fake, reviewer, bookmark_interval=60.0,
                   heartbeat_interval=60.0) as running:
        reader = _anns_watch(running)
        try:
            fake.create(f"{RBAC}/clusterroles", {"metadata": {"name": "unrelated"}, "rules": []})
            reader.wait_for(lambda lines: any('"code":403' in line for line in lines), 10)
            took = time.monotonic() - revoked[0]
        finally:
            reader.close()
    assert took < 1.5, f"the stream ended {took:.2f} s after its binding was deleted"
