"""DelegatedAuth: reviews built as the API server builds them, cached, answered in its words."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from app.auth.delegated import Attributes, DelegatedAuth, forbidden_message, token_expiry
from app.auth.identity import Credentials, Impersonation, UserInfo
from app.kube.status import StatusError
from tests.app.fake_reviewer import TableReviewer

ALICE = {"username": "alice", "uid": "a-1", "groups": ["dev", "system:authenticated"]}


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def auth(reviewer, clock=None, wall=None, **kw) -> DelegatedAuth:
    clock = clock or Clock()
    return DelegatedAuth(reviewer, clock=clock, wall_clock=wall or (lambda: 1.7e9), **kw)


def run(coro):
    return asyncio.run(coro)


def jwt(claims: dict) -> str:
    def b64(doc):
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=").decode()
    return f"{b64({'alg': 'RS256'})}.{b64(claims)}.c2ln"


def test_no_token_or_a_rejected_token_is_a_401_and_rejections_are_kept_briefly():
    reviewer = TableReviewer({"good": ALICE})
    clock = Clock()
    delegated = auth(reviewer, clock, deny_ttl=30)
    for creds in (Credentials(None), Credentials("bad"), Credentials("bad")):
        with pytest.raises(StatusError) as info:
            run(delegated.authenticate(creds))
        assert (info.value.code, info.value.message, info.value.reason) == (
            401, "Unauthorized", "Unauthorized")
    assert len(reviewer.token_reviews) == 1  # no review without a token; the rejection kept
    clock.now += 31
    with pytest.raises(StatusError):
        run(delegated.authenticate(Credentials("bad")))
    assert len(reviewer.token_reviews) == 2


def test_a_token_review_is_kept_for_its_ttl_and_never_past_the_tokens_exp():
    clock = Clock()
    token = jwt({"exp": 1.7e9 + 10})  # expires 10 s from the wall clock's now
    reviewer = TableReviewer({"plain": ALICE, token: ALICE})
    delegated = auth(reviewer, clock, token_ttl=120)
    assert run(delegated.authenticate(Credentials("plain"))).user.name == "alice"
    identity = run(delegated.authenticate(Credentials(token)))
    assert identity.expires == clock.now + 10
    clock.now += 11
    run(delegated.authenticate(Credentials("plain")))
    run(delegated.authenticate(Credentials(token)))
    assert [t for t, _ in reviewer.token_reviews] == ["plain", token, token]


@pytest.mark.parametrize("token, exp", [
    (jwt({"exp": 123}), 123.0), (jwt({"exp": 1.5}), 1.5), (jwt({"sub": "x"}), None),
    (jwt({"exp": True}), None), ("opaque-token", None), ("a.b.c", None), ("a.!!!.c", None),
])
def test_token_expiry_is_read_from_a_jwt_when_there_is_one(token, exp):
    assert token_expiry(token) == exp


def test_audiences_are_asked_for_and_a_review_for_other_audiences_is_rejected():
    reviewer = TableReviewer({"t": ALICE})
    delegated = auth(reviewer, audiences=("gateway",))
    run(delegated.authenticate(Credentials("t")))
    assert reviewer.token_reviews == [("t", ("gateway",))]
    reviewer.audiences = ["someone-else"]
    with pytest.raises(StatusError) as info:
        run(auth(reviewer, audiences=("gateway",)).authenticate(Credentials("t")))
    assert info.value.code == 401


def test_access_reviews_carry_the_users_identity_and_the_api_servers_attributes():
    reviewer = TableReviewer({"t": ALICE}, {("alice", "get", "deployments", "team-a")})
    delegated = auth(reviewer)
    user = run(delegated.authenticate(Credentials("t"))).user
    run(delegated.check(user, Attributes("get", "deployments", "apps", "v1", "team-a", "web")))
    assert reviewer.access_reviews == [{
        "resourceAttributes": {"verb": "get", "group": "apps", "version": "v1",
                               "resource": "deployments", "namespace": "team-a", "name": "web"},
        "user": "alice", "uid": "a-1", "groups": ["dev", "system:authenticated"]}]


def test_allowed_and_denied_answers_are_kept_for_their_own_ttls():
    clock = Clock()
    reviewer = TableReviewer({"t": ALICE}, {("alice", "list", "pods", "a")})
    delegated = auth(reviewer, clock, allow_ttl=300, deny_ttl=30)
    user = UserInfo.from_review(ALICE)
    allowed, denied = Attributes("list", "pods", namespace="a"), Attributes("list", "pods", namespace="b")

    def ask():
        run(delegated.check(user, allowed))
        with pytest.raises(StatusError):
            run(delegated.check(user, denied))

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
        run(auth(reviewer).check(UserInfo("alice"), attrs))
    error = info.value
    assert (error.code, error.reason, error.message) == (403, "Forbidden", message)
    if not attrs.path:
        assert error.body()["details"] == {k: v for k, v in (
            ("name", attrs.name), ("group", attrs.group), ("kind", attrs.resource)) if v}


def test_impersonation_is_reviewed_part_by_part_and_then_acts_as_the_user():
    reviewer = TableReviewer({"t": ALICE}, {("alice", "impersonate", "*", "*")})
    delegated = auth(reviewer)
    imp = Impersonation("system:serviceaccount:ns1:robot", ("ops",), "u-9",
                        (("scopes", ("view",)),))
    identity = run(delegated.authenticate(Credentials("t", imp)))
    assert identity.user.name == "system:serviceaccount:ns1:robot"
    assert identity.user.groups == ("ops", "system:authenticated")
    assert identity.impersonator.name == "alice"
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
    reviewer = TableReviewer({"t": ALICE}, {("alice", "impersonate", "users", "")})
    with pytest.raises(StatusError) as info:
        run(auth(reviewer).authenticate(Credentials("t", Impersonation("bob", ("system:masters",)))))
    assert info.value.code == 403
    assert info.value.message == (
        'groups "system:masters" is forbidden: User "alice" cannot impersonate resource "groups" '
        'in API group "" at the cluster scope')


def test_a_review_that_cannot_be_made_is_a_503_and_is_not_kept():
    reviewer = TableReviewer({"t": ALICE})
    reviewer.failing = True
    delegated = auth(reviewer)
    with pytest.raises(StatusError) as info:
        run(delegated.authenticate(Credentials("t")))
    assert info.value.code == 503 and info.value.headers == {"Retry-After": "1"}
    reviewer.failing = False
    assert run(delegated.authenticate(Credentials("t"))).user.name == "alice"
