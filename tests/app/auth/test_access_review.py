"""AccessReviews: reviews built as the API server builds them, kept, answered in its words."""

from __future__ import annotations

import asyncio

import pytest

from app.auth.access_review import Attributes, forbidden_message
from app.auth.identity import Credentials, UserInfo
from app.auth.rbac import RBAC
from app.kube.status import StatusError
from tests.app.auth.reviewing import ALICE, Clock, authenticator, rbac_reading_pods, reviews, run
from tests.app.fake_reviewer import TableReviewer


def test_access_reviews_carry_the_users_identity_and_the_api_servers_attributes():
    reviewer = TableReviewer({"t": ALICE}, {("alice", "get", "deployments", "team-a")})
    user = run(authenticator(reviewer).authenticate(Credentials("t"))).user
    run(reviews(reviewer).check(user, Attributes("get", "deployments", "apps", "v1", "team-a", "web")))
    assert reviewer.access_reviews == [{
        "resourceAttributes": {"verb": "get", "group": "apps", "version": "v1",
                               "resource": "deployments", "namespace": "team-a", "name": "web"},
        "user": "alice", "uid": "a-1", "groups": ["dev", "system:authenticated"]}]


def test_allowed_and_denied_answers_are_kept_for_their_own_ttls():
    clock = Clock()
    reviewer = TableReviewer({"t": ALICE}, {("alice", "list", "pods", "a")})
    access = reviews(reviewer, clock, allow_ttl=300, deny_ttl=30)
    user = UserInfo.from_review(ALICE)
    allowed, denied = Attributes("list", "pods", namespace="a"), Attributes("list", "pods", namespace="b")

    def ask():
        run(access.check(user, allowed))
        with pytest.raises(StatusError):
            run(access.check(user, denied))

    ask()
    ask()
    assert len(reviewer.access_reviews) == 2
    clock.now += 31  # the denial expired, the allowance did not
    ask()
    assert len(reviewer.access_reviews) == 3
    clock.now += 300
    ask()
    assert len(reviewer.access_reviews) == 5


@pytest.mark.parametrize("attrs, message", [
    (Attributes("list", "pods", version="v1", namespace="team-a"),
     'pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the '
     'namespace "team-a"'),
    (Attributes("watch", "deployments", "apps", "v1"),
     'deployments.apps is forbidden: User "alice" cannot watch resource "deployments" in API '
     'group "apps" at the cluster scope'),
    (Attributes("get", "widgets", "example.com", "v1", "a", "w1"),
     'widgets.example.com "w1" is forbidden: User "alice" cannot get resource "widgets" in API '
     'group "example.com" in the namespace "a"'),
    (Attributes("impersonate", "userextras", "authentication.k8s.io", name="x", subresource="scopes"),
     'userextras.authentication.k8s.io "x" is forbidden: User "alice" cannot impersonate '
     'resource "userextras/scopes" in API group "authentication.k8s.io" at the cluster scope'),
    (Attributes("get", path="/metrics"), 'forbidden: User "alice" cannot get path "/metrics"'),
])
def test_denials_are_worded_as_the_api_server_words_them(attrs, message):
    assert forbidden_message("alice", attrs) == message
    assert forbidden_message("alice", attrs, "RBAC: role x not found") == (
        message + ": RBAC: role x not found")
    reviewer = TableReviewer()
    with pytest.raises(StatusError) as info:
        run(reviews(reviewer).check(UserInfo("alice"), attrs))
    error = info.value
    assert (error.code, error.reason, error.message) == (403, "Forbidden", message)
    if not attrs.path:
        assert error.body()["details"] == {k: v for k, v in (
            ("name", attrs.name), ("group", attrs.group), ("kind", attrs.resource)) if v}


def test_impersonation_is_reviewed_part_by_part_in_the_cluster_asked():
    from app.auth.identity import Impersonation

    reviewer = TableReviewer(allowed={("alice", "impersonate", "*", "*")})
    imp = Impersonation("system:serviceaccount:ns1:robot", ("ops",), "u-9",
                        (("scopes", ("view",)),))
    assert run(reviews(reviewer).impersonation(UserInfo("alice"), imp)) > 0
    asked = [r["resourceAttributes"] for r in reviewer.access_reviews]
    assert asked == [
        {"verb": "impersonate", "group": "", "version": "", "resource": "serviceaccounts",
         "namespace": "ns1", "name": "robot"},
        {"verb": "impersonate", "group": "", "version": "", "resource": "groups", "name": "ops"},
        {"verb": "impersonate", "group": "authentication.k8s.io", "version": "",
         "resource": "userextras", "name": "view", "subresource": "scopes"},
        {"verb": "impersonate", "group": "authentication.k8s.io", "version": "",
         "resource": "uids", "name": "u-9"},
    ]
    assert all(r["user"] == "alice" for r in reviewer.access_reviews)


def test_an_impersonation_not_allowed_is_a_403_naming_it():
    from app.auth.identity import Impersonation

    reviewer = TableReviewer(allowed={("alice", "impersonate", "users", "")})
    with pytest.raises(StatusError) as info:
        run(reviews(reviewer).impersonation(UserInfo("alice"), Impersonation("bob", ("system:masters",))))
    assert info.value.code == 403
    assert info.value.message == (
        'groups "system:masters" is forbidden: User "alice" cannot impersonate resource "groups" '
        'in API group "" at the cluster scope')


def test_a_prefixed_cluster_is_asked_about_its_own_names_for_what_is_impersonated():
    """A cluster that knows callers as c:NAME is asked whether c:alice may impersonate
    c:system:masters (what the impersonated identity will be there), not the bare group."""
    from app.auth.access_review import AccessReviews
    from app.auth.identity import Impersonation

    reviewer = TableReviewer(allowed={("c:alice", "impersonate", "users", "")})
    prefixed = AccessReviews(reviewer, user_prefix="c:", group_prefix="c:")
    with pytest.raises(StatusError) as info:
        run(prefixed.impersonation(UserInfo("alice"), Impersonation("bob", ("system:masters",))))
    asked = [(r["user"], r["resourceAttributes"]["resource"], r["resourceAttributes"]["name"])
             for r in reviewer.access_reviews]
    assert asked == [("c:alice", "users", "c:bob"), ("c:alice", "groups", "c:system:masters")]
    assert 'groups "c:system:masters" is forbidden: User "c:alice"' in info.value.message


# -- beside the cluster's RBAC, read here ---------------------------------------------------

def _beside(rbac, reviewer, clock=None, **prefixes):
    from app.auth.access_review import AccessReviews
    return AccessReviews(reviewer, 300.0, 30.0, clock=clock or Clock(), rbac=rbac, **prefixes)


def test_what_rbac_allows_here_is_allowed_with_no_review_until_rbac_changes():
    rbac = rbac_reading_pods(("Group", "dev"))
    reviewer = TableReviewer({}, set())
    access = _beside(rbac, reviewer)
    user = UserInfo.from_review(ALICE)
    pods = Attributes("list", "pods", namespace="a")
    assert access.cached_check(user, pods) == float("inf")
    assert run(access.check(user, pods)) == float("inf")
    assert reviewer.access_reviews == [] and access.sent == 0 and access.local_allows == 2
    epoch = access.epoch
    rbac.delete_binding("RoleBinding", "a", "readers")  # revoked: the next check is refused
    assert access.epoch != epoch
    assert access.cached_check(user, pods) is None  # not RBAC's: the cluster is asked
    with pytest.raises(StatusError) as refused:
        run(access.check(user, pods))
    assert refused.value.code == 403 and len(reviewer.access_reviews) == 1


def test_rbac_is_read_with_the_clusters_prefixes():
    rbac = rbac_reading_pods(("Group", "c:dev"))
    access = _beside(rbac, TableReviewer({}, set()), group_prefix="c:")
    assert access.rbac_allows(UserInfo.from_review(ALICE), Attributes("list", "pods", namespace="a"))
    unprefixed = _beside(rbac, TableReviewer({}, set()))
    assert not unprefixed.rbac_allows(UserInfo.from_review(ALICE),
                                      Attributes("list", "pods", namespace="a"))


def test_a_review_asked_beside_rbac_is_kept_until_rbac_changes_or_the_deny_ttl():
    clock = Clock()
    rbac = rbac_reading_pods(("User", "nobody"))
    reviewer = TableReviewer({}, {("alice", "get", "nodes", "")})  # another authorizer's allow
    access = _beside(rbac, reviewer, clock)
    user = UserInfo.from_review(ALICE)
    nodes = Attributes("get", "nodes", name="n1")
    assert run(access.check(user, nodes)) == clock.now + 30.0  # the deny TTL, not 300 s
    assert access.cached_check(user, nodes) == clock.now + 30.0  # kept
    assert len(reviewer.access_reviews) == 1
    rbac.set_cluster_role({"metadata": {"name": "unrelated"}, "rules": []})  # RBAC moved
    assert access.cached_check(user, nodes) is None  # no longer read: asked again
    run(access.check(user, nodes))
    assert len(reviewer.access_reviews) == 2
    clock.now += 30.0
    assert access.cached_check(user, nodes) is None


RBAC_ALLOWED = 'RBAC: allowed by RoleBinding "readers/a" of ClusterRole "read-pods" to User "alice"'


def test_an_allow_of_the_clusters_rbac_that_rbac_here_lacks_is_asked_again_a_moment_later():
    """The API server's RBAC follows its bindings through a watch of its own: asked the
    instant a deletion arrived here, it may still allow. Kept for the deny TTL, that allow
    let a revoked caller's open watch run on for 30 s; asked again a moment later, the API
    server has caught up and refuses."""
    rbac = rbac_reading_pods(("User", "alice"))
    reviewer = TableReviewer({}, set())
    reviewer.allow_reason, reviewer.lagging = RBAC_ALLOWED, 1
    access = _beside(rbac, reviewer)
    user = UserInfo.from_review(ALICE)
    pods = Attributes("list", "pods", namespace="a")
    rbac.delete_binding("RoleBinding", "a", "readers")  # here; not yet at the API server
    with pytest.raises(StatusError) as refused:
        run(access.check(user, pods))
    assert refused.value.code == 403
    assert len(reviewer.access_reviews) == 2 and access.disagreements == 1


def test_an_allow_of_the_clusters_rbac_given_again_is_kept_a_second_only():
    """Still allowed when asked again (this copy is behind, or the API server's is slow to
    catch up): kept a second, then asked again. Another authorizer's allow (any other
    reason) is kept for the deny TTL, as before."""
    from app.auth.access_review import DISAGREEMENT_TTL

    clock = Clock()
    rbac = rbac_reading_pods(("User", "alice"))
    reviewer = TableReviewer({}, set())
    reviewer.allow_reason, reviewer.lagging = RBAC_ALLOWED, 2
    access = _beside(rbac, reviewer, clock)
    user = UserInfo.from_review(ALICE)
    pods = Attributes("list", "pods", namespace="a")
    rbac.delete_binding("RoleBinding", "a", "readers")
    assert run(access.check(user, pods)) == clock.now + DISAGREEMENT_TTL
    assert len(reviewer.access_reviews) == 2 and access.disagreements == 1
    assert access.cached_check(user, pods) == clock.now + DISAGREEMENT_TTL  # kept, a second
    clock.now += DISAGREEMENT_TTL
    assert access.cached_check(user, pods) is None  # then asked again: caught up, refused
    with pytest.raises(StatusError):
        run(access.check(user, pods))
    assert len(reviewer.access_reviews) == 3


def test_an_allow_of_the_clusters_rbac_that_this_copy_catches_up_with_is_not_asked_again():
    """A binding just made: the review allows what this copy has not seen yet; by the time
    it would be asked again, the binding's event is here, and RBAC allows it."""
    rbac = RBAC()
    rbac.decide(True)
    reviewer = TableReviewer({}, {("alice", "list", "pods", "a")})
    reviewer.allow_reason = RBAC_ALLOWED
    access = _beside(rbac, reviewer)
    user = UserInfo.from_review(ALICE)
    pods = Attributes("list", "pods", namespace="a")

    async def check_while_the_binding_arrives() -> float:
        asking = asyncio.ensure_future(access.check(user, pods))
        while not reviewer.access_reviews:
            await asyncio.sleep(0.001)
        rbac.set_cluster_role({"metadata": {"name": "read-pods"}, "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]})
        rbac.set_binding("RoleBinding", {"metadata": {"name": "readers", "namespace": "a"},
                                         "subjects": [{"kind": "User", "name": "alice"}],
                                         "roleRef": {"kind": "ClusterRole",
                                                     "name": "read-pods"}})  # arriving here
        return await asking

    run(check_while_the_binding_arrives())
    assert len(reviewer.access_reviews) == 1 and access.disagreements == 1
    assert access.cached_check(user, pods) == float("inf")  # RBAC's own allow now


def test_rbac_that_does_not_decide_is_not_read():
    rbac = rbac_reading_pods(("Group", "dev"))
    rbac.decide(False)  # not synced, or fallen behind
    reviewer = TableReviewer({}, set())
    access = _beside(rbac, reviewer)
    assert access.epoch == 0
    with pytest.raises(StatusError):
        run(access.check(UserInfo.from_review(ALICE), Attributes("list", "pods", namespace="a")))
    assert len(reviewer.access_reviews) == 1


def test_a_denial_asked_beside_rbac_survives_rbac_changes_and_rbac_still_comes_first():
    """A partition of 2,000 namespaces is 2,000 denials: asked again after every change of
    RBAC they would be a storm of reviews. RBAC is read before a kept answer, so an allow
    it gains is in effect at once all the same."""
    rbac = rbac_reading_pods(("User", "nobody"))
    reviewer = TableReviewer({}, set())
    access = _beside(rbac, reviewer)
    user = UserInfo.from_review(ALICE)
    pods = Attributes("list", "pods", namespace="a")
    with pytest.raises(StatusError):
        run(access.check(user, pods))
    rbac.set_cluster_role({"metadata": {"name": "unrelated"}, "rules": []})
    with pytest.raises(StatusError):
        access.cached_check(user, pods)  # the denial, still kept: no review
    assert len(reviewer.access_reviews) == 1
    rbac.set_binding("RoleBinding", {"metadata": {"name": "alice", "namespace": "a"},
                                     "subjects": [{"kind": "User", "name": "alice"}],
                                     "roleRef": {"kind": "ClusterRole", "name": "read-pods"}})
    assert access.cached_check(user, pods) == float("inf")  # RBAC first: allowed at once
