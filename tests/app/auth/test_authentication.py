"""TokenReviewAuthenticator: tokens reviewed and kept, impersonation reviewed part by part."""

from __future__ import annotations

import pytest

from app.auth.authentication import token_expiry
from app.auth.identity import Credentials, Impersonation, credentials_from_scope
from app.kube.status import StatusError
from tests.app.auth.reviewing import ALICE, Clock, authenticator, jwt, run
from tests.app.fake_reviewer import TableReviewer


def test_no_token_or_a_rejected_token_is_a_401_and_rejections_are_kept_briefly():
    reviewer = TableReviewer({"good": ALICE})
    clock = Clock()
    authn = authenticator(reviewer, clock, deny_ttl=30)
    for creds in (Credentials(None), Credentials("bad"), Credentials("bad")):
        with pytest.raises(StatusError) as info:
            run(authn.authenticate(creds))
        assert (info.value.code, info.value.message, info.value.reason) == (
            401, "Unauthorized", "Unauthorized")
    assert len(reviewer.token_reviews) == 1  # no review without a token; the rejection kept
    clock.now += 31
    with pytest.raises(StatusError):
        run(authn.authenticate(Credentials("bad")))
    assert len(reviewer.token_reviews) == 2


def test_a_token_review_is_kept_for_its_ttl_and_never_past_the_tokens_exp():
    clock = Clock()
    token = jwt({"exp": 1.7e9 + 10})  # expires 10 s from the wall clock's now
    reviewer = TableReviewer({"plain": ALICE, token: ALICE})
    authn = authenticator(reviewer, clock, token_ttl=120)
    assert run(authn.authenticate(Credentials("plain"))).user.name == "alice"
    identity = run(authn.authenticate(Credentials(token)))
    assert identity.expires == clock.now + 10
    clock.now += 11
    run(authn.authenticate(Credentials("plain")))
    run(authn.authenticate(Credentials(token)))
    assert [t for t, _ in reviewer.token_reviews] == ["plain", token, token]


def _headers(*pairs: tuple[str, str]) -> list[tuple[bytes, bytes]]:
    return [(b"host", b"gateway:8080"), *((n.encode(), v.encode("latin-1")) for n, v in pairs)]


def test_known_gives_the_kept_identity_of_a_bearer_token_from_the_raw_headers():
    """The hot path's shortcut: a reviewed token's very identity, or ``None`` for
    anything the full path must answer — and never a different answer from it."""
    clock = Clock()
    reviewer = TableReviewer({"good": ALICE, "\xe9t\xe9": ALICE})
    authn = authenticator(reviewer, clock, token_ttl=120)
    assert authn.known(_headers(("authorization", "Bearer good"))) is None  # not reviewed yet
    identity = run(authn.authenticate(Credentials("good")))
    for form in ("Bearer good", "bearer good", "BEARER  good ", "Bearer good\t"):
        assert authn.known(_headers(("authorization", form))) is identity, form
    assert authn.cached_identity(Credentials("good")) is identity
    assert authn.known(_headers(("authorization", "Basic Z29vZDpnb29k"))) is None
    assert authn.known(_headers(("authorization", "Bearer other"))) is None
    assert authn.known(_headers()) is None
    # an impersonation is always the full path's, however well known the caller
    assert authn.known(_headers(("authorization", "Bearer good"),
                                ("impersonate-user", "bob"))) is None
    # the last Authorization header is the one read, as by credentials_from_scope
    assert authn.known(_headers(("authorization", "Bearer other"),
                                ("authorization", "Bearer good"))) is identity
    # whatever the header, known answers as the full path would, or leaves it to it
    for form in ("Bearer good\xa0", "Bearer \x85good", "Bearer\tgood", "Bearer ", "Bearer  ",
                 "bearer good\r", "Bearergood"):
        headers = _headers(("authorization", form))
        fast = authn.known(headers)
        assert fast is None or fast is authn.cached_identity(
            credentials_from_scope({"headers": headers})), form
    # a token of latin-1 bytes (headers are read as latin-1) is one and the same token
    latin = run(authn.authenticate(Credentials("\xe9t\xe9")))
    assert authn.known(_headers(("authorization", "Bearer \xe9t\xe9"))) is latin
    with pytest.raises(StatusError):
        run(authn.authenticate(Credentials("bad")))
    assert authn.known(_headers(("authorization", "Bearer bad"))) is None  # kept rejection
    clock.now += 120
    assert authn.known(_headers(("authorization", "Bearer good"))) is None  # the review ended
    assert len(reviewer.token_reviews) == 3


@pytest.mark.parametrize("token, exp", [
    (jwt({"exp": 123}), 123.0), (jwt({"exp": 1.5}), 1.5), (jwt({"sub": "x"}), None),
    (jwt({"exp": True}), None), ("opaque-token", None), ("a.b.c", None), ("a.!!!.c", None),
])
def test_token_expiry_is_read_from_a_jwt_when_there_is_one(token, exp):
    assert token_expiry(token) == exp


def test_audiences_are_asked_for_and_a_review_for_other_audiences_is_rejected():
    reviewer = TableReviewer({"t": ALICE})
    authn = authenticator(reviewer, audiences=("gateway",))
    run(authn.authenticate(Credentials("t")))
    assert reviewer.token_reviews == [("t", ("gateway",))]
    reviewer.audiences = ["someone-else"]
    with pytest.raises(StatusError) as info:
        run(authenticator(reviewer, audiences=("gateway",)).authenticate(Credentials("t")))
    assert info.value.code == 401


def test_an_impersonation_is_read_not_decided_each_cluster_decides():
    """The identity names the user asked for and the caller behind it; whether the caller may
    impersonate is asked of the cluster that holds the data (``AccessReviews.impersonation``),
    never once here for every cluster."""
    reviewer = TableReviewer({"t": ALICE})
    authn = authenticator(reviewer)
    imp = Impersonation("system:serviceaccount:ns1:robot", ("ops",), "u-9",
                        (("scopes", ("view",)),))
    identity = run(authn.authenticate(Credentials("t", imp)))
    assert identity.user.name == "system:serviceaccount:ns1:robot"
    assert identity.user.groups == ("ops", "system:authenticated")
    assert identity.impersonator.name == "alice" and identity.impersonation == imp
    assert reviewer.access_reviews == [], "no access review in the identity cluster"


def test_a_review_that_cannot_be_made_is_a_503_and_is_not_kept():
    reviewer = TableReviewer({"t": ALICE})
    reviewer.failing = True
    authn = authenticator(reviewer)
    with pytest.raises(StatusError) as info:
        run(authn.authenticate(Credentials("t")))
    assert info.value.code == 503 and info.value.headers == {"Retry-After": "1"}
    reviewer.failing = False
    assert run(authn.authenticate(Credentials("t"))).user.name == "alice"


def test_rejected_tokens_are_kept_apart_and_never_push_accepted_ones_out():
    from app.auth.review_budget import ReviewBudget

    reviewer = TableReviewer({"good": ALICE})
    authn = authenticator(reviewer, max_entries=4, budget=ReviewBudget(rate=1000, burst=1000))
    run(authn.authenticate(Credentials("good")))
    for i in range(50):
        with pytest.raises(StatusError):
            run(authn.authenticate(Credentials(f"random-{i}", client="10.0.0.9")))
    assert authn.cached_identity(Credentials("good")).user.name == "alice"
    assert len(reviewer.token_reviews) == 51
    with pytest.raises(StatusError) as info:  # a kept rejection: answered without a review
        authn.cached_identity(Credentials("random-49"))
    assert info.value.code == 401


def test_new_tokens_past_the_budget_are_429_without_a_review():
    from app.auth.review_budget import ReviewBudget

    reviewer = TableReviewer({"good": ALICE})
    authn = authenticator(reviewer, budget=ReviewBudget(rate=1, burst=3))
    codes = []
    for i in range(10):
        try:
            run(authn.authenticate(Credentials(f"random-{i}", client="10.0.0.9")))
        except StatusError as error:
            codes.append(error.code)
    assert codes == [401] * 3 + [429] * 7
    assert len(reviewer.token_reviews) == 3
    assert run(authn.authenticate(Credentials("good", client="10.0.0.8"))).user.name == "alice"


# -- ServiceAccount tokens verified here ------------------------------------------------------

def _local_verifier():
    from tests.app.auth.test_service_account_tokens import verifier
    tokens = verifier()
    tokens.clock = lambda: 1.7e9  # the authenticator's wall clock below
    return tokens


def _sa_token(**change):
    from tests.app.auth.test_service_account_tokens import POD, claims, sign
    payload = claims(**POD)
    payload.update(iat=int(1.7e9), nbf=int(1.7e9), exp=int(1.7e9) + 3600, **change)
    return payload, sign


def test_a_service_account_token_verified_here_costs_no_review_and_is_kept():
    payload, sign = _sa_token()
    token = sign(payload)
    reviewer = TableReviewer({"plain": ALICE})
    clock = Clock()
    authn = authenticator(reviewer, clock, token_ttl=120, local=_local_verifier())
    identity = run(authn.authenticate(Credentials(token)))
    assert identity.user.name == "system:serviceaccount:shop:api"
    assert identity.expires == clock.now + 120 and identity.bound is not None
    assert authn.cached_identity(Credentials(token)) is identity
    assert run(authn.authenticate(Credentials("plain"))).user.name == "alice"  # not a JWT
    assert [t for t, _ in reviewer.token_reviews] == ["plain"] and authn.verified == 1


def test_a_forged_service_account_token_is_a_401_with_no_review_and_kept_rejected():
    from tests.app.auth.test_service_account_tokens import OTHER_RSA
    payload, sign = _sa_token()
    forged = sign(payload, OTHER_RSA)
    reviewer = TableReviewer({forged: ALICE})  # the table would even accept it
    authn = authenticator(reviewer, Clock(), local=_local_verifier())
    for _ in range(2):
        with pytest.raises(StatusError) as info:
            run(authn.authenticate(Credentials(forged)))
        assert info.value.code == 401
    assert reviewer.token_reviews == [] and authn.refused == 1  # the second: kept rejected


def test_a_kid_not_held_fetches_the_keys_once_then_verifies_or_refuses():
    from tests.app.auth.test_service_account_tokens import ISSUER, JWKS, OTHER_RSA, _jwk
    from app.auth.service_account_tokens import SigningKeys
    payload, sign = _sa_token()
    token = sign(payload, OTHER_RSA, "rotated")
    local = _local_verifier()
    fetched = []

    async def refresh():
        fetched.append(1)
        local.keys_changed(SigningKeys.from_jwks(ISSUER, {"keys": [
            *JWKS["keys"], _jwk(OTHER_RSA, "rotated", "RS256")]}))

    local.refresh = refresh
    authn = authenticator(TableReviewer({}), Clock(), local=local)
    assert run(authn.authenticate(Credentials(token))).user.uid == "sa-uid"
    assert fetched == [1]


def test_a_revoked_identity_is_not_kept_and_its_token_is_judged_again():
    payload, sign = _sa_token()
    token = sign(payload)
    local = _local_verifier()
    reviewer = TableReviewer({})
    authn = authenticator(reviewer, Clock(), local=local)
    identity = run(authn.authenticate(Credentials(token)))
    headers = _headers(("authorization", f"Bearer {token}"))
    assert authn.known(headers) is identity
    local.objects.held.pop(("pods", "shop", "api-7"))
    local.object_changed("pods", "shop", "api-7", None)  # the Pod deleted
    assert authn.known(headers) is None and authn.cached_identity(Credentials(token)) is None
    with pytest.raises(StatusError) as info:  # not held now: asked, and the API server refuses
        run(authn.authenticate(Credentials(token)))
    assert info.value.code == 401 and [t for t, _ in reviewer.token_reviews] == [token]


def test_the_audiences_a_review_accepted_are_learnt_for_tokens_verified_here():
    payload, sign = _sa_token(aud=["https://api.example"])
    token = sign(payload)
    local = _local_verifier()
    local.audiences = frozenset()
    reviewer = TableReviewer({token: {**ALICE, "username": "system:serviceaccount:shop:api"}})
    reviewer.audiences = ["https://api.example"]  # what the API server accepted of the token
    authn = authenticator(reviewer, Clock(), token_ttl=1, local=local)
    run(authn.authenticate(Credentials(token)))
    assert local.learnt == {"https://api.example"} and len(reviewer.token_reviews) == 1
    other = sign(dict(payload, jti="2"))
    assert run(authn.authenticate(Credentials(other))).bound is not None
    assert len(reviewer.token_reviews) == 1


def test_a_new_service_account_token_is_known_from_the_caches_path_with_no_coroutine():
    """The first request of a new ServiceAccount caller is answered as a known one's: its
    token verified where the kept ones are read (``cached_identity``), not in a review's
    flight — a forged one refused there too."""
    from tests.app.auth.test_service_account_tokens import OTHER_RSA
    payload, sign = _sa_token()
    authn = authenticator(TableReviewer({}), Clock(), local=_local_verifier())
    identity = authn.cached_identity(Credentials(sign(payload)))
    assert identity is not None and identity.user.uid == "sa-uid"
    assert authn.cached_identity(Credentials(sign(payload))) is identity  # kept
    with pytest.raises(StatusError) as info:
        authn.cached_identity(Credentials(sign(payload, OTHER_RSA)))
    assert info.value.code == 401 and authn.refused == 1
    assert authn.cached_identity(Credentials("a-static-token")) is None  # reviewed, later
