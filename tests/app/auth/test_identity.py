"""Credentials from headers, and the identity an impersonation gives, as the API server builds it."""

from __future__ import annotations

import pytest

from app.auth.identity import (
    Credentials,
    Impersonation,
    UserInfo,
    credentials_from_scope,
    impersonated_user,
)
from app.kube.status import StatusError


def scope(*headers: tuple[str, str]) -> dict:
    return {"headers": [(k.lower().encode(), v.encode()) for k, v in headers]}


def test_the_bearer_token_is_read_and_other_schemes_are_not():
    assert credentials_from_scope(scope(("Authorization", "Bearer abc.def"))) == Credentials("abc.def")
    assert credentials_from_scope(scope(("Authorization", "bearer  xyz "))) == Credentials("xyz")
    assert credentials_from_scope(scope(("Authorization", "Basic dTpw"))) == Credentials(None)
    assert credentials_from_scope(scope(("Authorization", "Bearer "))) == Credentials(None)
    assert credentials_from_scope(scope()) == Credentials(None)


def test_impersonation_headers_are_collected():
    got = credentials_from_scope(scope(
        ("Authorization", "Bearer t"), ("Impersonate-User", "alice"),
        ("Impersonate-Group", "dev"), ("Impersonate-Group", "ops"), ("Impersonate-Uid", "u-1"),
        ("Impersonate-Extra-Scopes", "view"), ("Impersonate-Extra-Scopes", "edit"),
        ("Impersonate-Extra-acme.com%2Fproject", "p1")))
    assert got == Credentials("t", Impersonation(
        "alice", ("dev", "ops"), "u-1", (("acme.com/project", ("p1",)), ("scopes", ("view", "edit")))))


@pytest.mark.parametrize("header", ["Impersonate-Group", "Impersonate-Uid", "Impersonate-Extra-x"])
def test_impersonating_anything_but_a_user_without_a_user_is_a_400(header):
    with pytest.raises(StatusError) as info:
        credentials_from_scope(scope(("Authorization", "Bearer t"), (header, "v")))
    assert info.value.code == 400 and "without impersonating a user" in info.value.message


@pytest.mark.parametrize("imp, groups", [
    (Impersonation("alice"), ("system:authenticated",)),
    (Impersonation("alice", ("dev",)), ("dev", "system:authenticated")),
    (Impersonation("alice", ("system:authenticated",)), ("system:authenticated",)),
    (Impersonation("alice", ("system:unauthenticated",)), ("system:unauthenticated",)),
    (Impersonation("system:anonymous"), ("system:unauthenticated",)),
    (Impersonation("system:serviceaccount:ns1:robot"),
     ("system:serviceaccounts", "system:serviceaccounts:ns1", "system:authenticated")),
    (Impersonation("system:serviceaccount:ns1:robot", ("dev",)), ("dev", "system:authenticated")),
])
def test_the_impersonated_user_gets_the_groups_the_api_server_gives(imp, groups):
    assert impersonated_user(imp).groups == groups


def test_a_review_user_becomes_the_subject_of_access_reviews():
    user = UserInfo.from_review({"username": "alice", "uid": "42", "groups": ["dev"],
                                 "extra": {"scopes": ["a", "b"]}})
    assert user == UserInfo("alice", "42", ("dev",), (("scopes", ("a", "b")),))
    assert user.review_spec() == {"user": "alice", "groups": ["dev"], "uid": "42",
                                  "extra": {"scopes": ["a", "b"]}}
    assert hash(user) == hash(UserInfo.from_review({"username": "alice", "uid": "42",
                                                    "groups": ["dev"],
                                                    "extra": {"scopes": ["a", "b"]}}))


def test_an_impersonation_no_identity_could_have_is_refused_before_it_is_kept():
    long = b"u" * 5000
    for header in (b"impersonate-user", b"impersonate-group", b"impersonate-extra-" + long[:2000]):
        scope = {"headers": [(b"authorization", b"Bearer t"), (b"impersonate-user", b"bob"),
                             (header, long)]}
        with pytest.raises(StatusError) as info:
            credentials_from_scope(scope)
        assert info.value.code == 400 and "is longer than 1024 bytes" in info.value.message
