"""The one authorization point: the resource policy (names as kubectl writes them; deny wins;
secrets denied by default), then, with ``--authz kubernetes``, the caller's own rights over HTTP."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import orjson
import pytest

from app.auth.authorization import Authorization
from app.auth.policy import ResourcePolicy
from app.kube.access import Access
from app.kube.status import StatusError
from app.launch.demo import seed_workload
from control_plane.fake import FakeCluster
from informer_core.discovery import APIResource
from tests.app.auth.reviewing import Clock, authenticator, reviews
from tests.app.conftest import run_gateway
from tests.app.fake_reviewer import TableReviewer
from tests.app.readers import LineReader
from tests.helpers import wait_until

SECRETS = APIResource("", "v1", "secrets", "Secret", True, frozenset({"list", "watch"}), singular="secret")
PODS = APIResource("", "v1", "pods", "Pod", True, frozenset({"list", "watch"}), ("po",), "pod")
DEPLOY = APIResource("apps", "v1", "deployments", "Deployment", True, frozenset({"list", "watch"}), ("deploy",))
WIDGETS = APIResource("example.com", "v1", "widgets", "Widget", True, frozenset({"list", "watch"}))


def test_authorization_raises_a_403_status_naming_the_resource():
    authz = Authorization(ResourcePolicy())
    asyncio.run(authz.authorize(None, Access("list", PODS)))
    with pytest.raises(StatusError) as info:
        asyncio.run(authz.authorize(None, Access("watch", SECRETS, "default")))
    assert info.value.code == 403 and "secrets" in info.value.message
    assert Access("watch", SECRETS, "default").describe() == 'watch secrets in the namespace "default"'


# -- over HTTP, with --authz kubernetes (reviews answered from a table) ------------------------

USERS = {"t-alice": {"username": "alice", "groups": ["dev"]},
         "t-bob": {"username": "bob", "groups": ["dev"]}}


@pytest.fixture(scope="module")
def fake():
    cluster = FakeCluster()
    seed_workload(cluster, "demo-shop")
    return cluster


@pytest.fixture
def reviewer():
    return TableReviewer(USERS, {("alice", "*", "pods", "demo-shop"), ("alice", "get", "/api", ""),
                                 ("alice", "get", "/metrics", "")})


@pytest.fixture
def authorizing(fake, reviewer):
    with run_gateway(fake, reviewer=reviewer, authz="kubernetes", authz_cache_ttl=0.5,
                     authz_deny_cache_ttl=0.5) as running:
        yield running


def client(gateway, token=None, **headers):
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.Client(base_url=gateway.url, headers=headers, timeout=30)


def test_authentication_comes_before_every_other_answer(authorizing):
    with client(authorizing) as anonymous:
        for method, path in (("GET", "/api/v1/namespaces/demo-shop/pods"), ("GET", "/api/v1/nopes"),
                             ("POST", "/api/v1/namespaces/demo-shop/pods"), ("GET", "/api"),
                             ("GET", "/version"), ("GET", "/metrics"), ("GET", "/no/such")):
            got = anonymous.request(method, path)
            assert got.status_code == 401 and got.json()["reason"] == "Unauthorized", (method, path)
        for path in ("/healthz", "/livez", "/readyz"):
            assert anonymous.get(path).status_code == 200
    with client(authorizing, "t-alice") as alice:
        assert alice.get("/api/v1/nopes").status_code == 404
        assert alice.post("/api/v1/namespaces/demo-shop/pods").status_code == 405
        assert alice.get("/api").status_code == 200 and alice.get("/metrics").status_code == 200
        assert alice.get("/apis").status_code == 403  # no row allows it
    with client(authorizing, "t-bob") as bob:
        got = bob.get("/metrics")
        assert got.status_code == 403
        assert got.json()["message"] == 'forbidden: User "bob" cannot get path "/metrics"'


def test_the_resource_policy_still_applies_to_a_caller_allowed_everything(fake, reviewer):
    reviewer.allowed.add(("alice", "*", "*", "*"))
    with run_gateway(fake, reviewer=reviewer, authz="kubernetes") as running, \
            client(running, "t-alice") as alice:
        got = alice.get("/api/v1/namespaces/demo-shop/secrets")
        assert got.status_code == 403 and "resource policy" in got.json()["message"]
        assert alice.get("/api/v1/namespaces/demo-shop/pods").status_code == 200


def test_a_burst_of_requests_with_a_new_token_makes_one_review_of_each_kind(authorizing, reviewer):
    reviewer.delay = 0.2
    path = "/api/v1/namespaces/demo-shop/pods"
    with client(authorizing, "t-alice") as alice:
        alice.get(path)  # the cache is loaded; its reviews are now kept
        reviewer.token_reviews.clear()
        reviewer.access_reviews.clear()
        authorizing.gateway.authenticator.tokens.clear()
        authorizing.gateway.default.access.accesses.clear()

    async def burst():
        async with httpx.AsyncClient(base_url=authorizing.url, timeout=30,
                                     headers={"Authorization": "Bearer t-alice"}) as http:
            return await asyncio.gather(*(http.get(path) for _ in range(50)))

    answers = asyncio.run(burst())
    assert {a.status_code for a in answers} == {200}
    assert len(reviewer.token_reviews) == 1 and len(reviewer.access_reviews) == 1


def test_a_flood_of_random_tokens_makes_a_bounded_number_of_reviews(fake, reviewer):
    """Before: every new token a TokenReview (3,000 random tokens in 15 s from one client made
    3,000). Now the client's budget is spent, the rest are 429, and a known caller's requests,
    answered from kept reviews, do not wait behind the flood."""
    import statistics

    reviewer.delay = 0.005  # a review's round trip
    path = "/api/v1/namespaces/demo-shop/pods"
    with run_gateway(fake, reviewer=reviewer, authz="kubernetes") as running, \
            client(running, "t-alice") as alice:
        assert alice.get(path).status_code == 200

        def timed() -> float:
            began = time.perf_counter()
            assert alice.get(path).status_code == 200
            return time.perf_counter() - began

        idle = sorted(timed() for _ in range(50))
        reviewer.token_reviews.clear()

        async def flood() -> list[int]:
            async with httpx.AsyncClient(base_url=running.url, timeout=30) as http:
                async def one(i: int) -> int:
                    got = await http.get(path, headers={"Authorization": f"Bearer random-{i}"})
                    return got.status_code
                codes = []
                for wave in range(6):  # 600 new tokens over about three seconds
                    codes += await asyncio.gather(*(one(wave * 100 + i) for i in range(100)))
                    await asyncio.sleep(0.5)
                return codes

        began = time.monotonic()
        flooding = threading.Thread(target=lambda: results.extend(asyncio.run(flood())))
        results: list[int] = []
        flooding.start()
        during = []
        while flooding.is_alive():
            during.append(timed())
        flooding.join()
        took = time.monotonic() - began
    reviews = len(reviewer.token_reviews)
    assert set(results) == {401, 429} and results.count(429) > 400, sorted(set(results))
    assert reviews <= 20 + 10 * took + 2, f"{reviews} reviews in {took:.1f} s"
    assert statistics.quantiles(during, n=100)[98] < max(10 * idle[-1], 0.05), (idle[-1], during)


def test_the_dns_rebinding_guard_is_for_gateways_that_authorize_nobody(authorizing):
    with client(authorizing, "t-alice", Host="gateway.example.com") as alice:
        assert alice.get("/api/v1/namespaces/demo-shop/pods").status_code == 200


@pytest.mark.parametrize("kind", ["watch", "sse"])
def test_a_stream_is_reauthorized_as_its_decision_expires_and_ends_when_refused(
        authorizing, reviewer, kind):
    headers = {"Authorization": "Bearer t-alice"}
    target = "/api/v1/namespaces/demo-shop/pods"
    if kind == "watch":
        target += "?watch=true"
    else:
        headers["Accept"] = "text/event-stream"
    reader = LineReader(authorizing.url + target, headers=headers)
    try:
        wait_until(lambda: reader.status == 200, 10, message="the stream to open")
        asked = len(reviewer.access_reviews)
        wait_until(lambda: len(reviewer.access_reviews) >= asked + 2, 5,
                   message="two re-authorizations (every 0.5 s)")
        assert not reader.ended(timeout=0)
        reviewer.allowed.discard(("alice", "*", "pods", "demo-shop"))
        # re-checked when the decision expires, at most every RECHECK_AT_MOST_EVERY seconds
        reader.wait_for(lambda lines: any('"code":403' in line for line in lines), timeout=10)
        assert reader.ended(timeout=5)
        last = [line for line in reader.lines if '"code":403' in line][-1]
        status = orjson.loads(last.removeprefix("data: "))
        status = status.get("object", status)
        assert status["message"] == ('pods is forbidden: User "alice" cannot watch resource '
                                     '"pods" in API group "" in the namespace "demo-shop"')
    finally:
        reader.close()


def test_a_stream_whose_reauthorization_cannot_be_made_ends_failing_closed(authorizing, reviewer):
    reader = LineReader(authorizing.url + "/api/v1/namespaces/demo-shop/pods?watch=true",
                        headers={"Authorization": "Bearer t-alice"})
    try:
        wait_until(lambda: reader.status == 200, 10, message="the stream to open")
        reviewer.failing = True
        reader.wait_for(lambda lines: any('"code":503' in line for line in lines), timeout=10)
        assert reader.ended(timeout=5)
    finally:
        reader.close()
        reviewer.failing = False


def test_an_open_stream_reviews_its_caller_at_most_every_few_seconds(fake, reviewer):
    """With decisions not kept at all (a TTL of 0), an open stream must not review its caller
    in a tight loop: it re-checks when the decision expires, at most every few seconds."""
    from app.streams.live import RECHECK_AT_MOST_EVERY

    with run_gateway(fake, reviewer=reviewer, authz="kubernetes", authz_cache_ttl=0,
                     authz_deny_cache_ttl=0, authn_cache_ttl=0) as running:
        reader = LineReader(running.url + "/api/v1/namespaces/demo-shop/pods?watch=true",
                            headers={"Authorization": "Bearer t-alice"})
        try:
            wait_until(lambda: reader.status == 200, 10, message="the stream to open")
            before = len(reviewer.access_reviews)
            time.sleep(3 * RECHECK_AT_MOST_EVERY)
            made = len(reviewer.access_reviews) - before
            assert 1 <= made <= 4, f"{made} reviews in {3 * RECHECK_AT_MOST_EVERY:.0f} s"
            assert not reader.ended(timeout=0.1), "still allowed: still streaming"
        finally:
            reader.close()


def test_a_watch_of_one_object_is_authorized_as_a_watch(fake, reviewer):
    """``GET pods/NAME?watch=true`` streams: a caller allowed ``get`` but not ``watch`` may
    read the object, not follow it."""
    reviewer.tokens["t-carol"] = {"username": "carol", "groups": []}
    reviewer.allowed.add(("carol", "get", "pods", "demo-shop"))
    with run_gateway(fake, reviewer=reviewer, authz="kubernetes") as running, \
            client(running, "t-carol") as carol:
        pods = fake.request("GET", "/api/v1/namespaces/demo-shop/pods")["items"]
        path = f"/api/v1/namespaces/demo-shop/pods/{pods[0]['metadata']['name']}"
        assert carol.get(path).status_code == 200
        watched = carol.get(path + "?watch=true")
        assert watched.status_code == 403
        assert watched.json()["message"].startswith(
            f'pods "{pods[0]["metadata"]["name"]}" is forbidden: User "carol" cannot watch resource')


def _asking(token: str) -> dict:
    """A fresh request's scope, as the entry hands it on (each request gets its own context)."""
    return {"type": "http", "headers": [(b"authorization", f"Bearer {token}".encode())],
            "client": ("127.0.0.1", 1)}


def test_a_kept_grant_answers_a_repeated_get_and_ends_with_its_first_decision(reviewer):
    """The same caller asking the same again is granted from ``grants`` — by the very grant
    kept — but never past the access decision or token review it rests on, and never for a
    stream (whose grant carries its own credentials)."""
    clock = Clock()
    authz = Authorization(ResourcePolicy(), authenticator(reviewer, clock, token_ttl=60.0),
                          reviews(reviewer, clock, allow_ttl=10.0))
    get = Access("get", PODS, "demo-shop", "web-1")

    async def story() -> None:
        first = await authz.authorize(_asking("t-alice"), get)  # reviewed: nothing kept yet
        assert len(authz.grants) == 0
        kept = authz.granted(_asking("t-alice"), get)  # from the decision caches, then kept
        assert kept is not None and kept.expires == first.expires == clock.now + 10.0
        assert authz.granted(_asking("t-alice"), get) is kept
        # another object is another decision: reviewed, then kept in an entry of its own
        other = Access("get", PODS, "demo-shop", "web-2")
        assert authz.granted(_asking("t-alice"), other) is None
        await authz.authorize(_asking("t-alice"), other)
        assert authz.granted(_asking("t-alice"), other) not in (None, kept)
        watch = Access("watch", PODS, "demo-shop")
        await authz.authorize(_asking("t-alice"), watch)
        streaming = authz.granted(_asking("t-alice"), watch)
        assert streaming is not authz.granted(_asking("t-alice"), watch)
        # known by its kept review, the caller's credentials were not read until the stream's
        # grant needed them: it is checked again with them (reauthorize)
        assert streaming.credentials is not None and streaming.credentials.token == "t-alice"
        assert len(authz.grants) == 2  # the two gets'
        reviewer.allowed.clear()  # the right is taken away; the decision is kept 10 s
        assert authz.granted(_asking("t-alice"), get) is kept
        clock.now += 10.0
        assert authz.granted(_asking("t-alice"), get) is None  # both expired: a review is due
        with pytest.raises(StatusError) as refused:
            await authz.authorize(_asking("t-alice"), get)
        assert refused.value.code == 403

    asyncio.run(story())


def test_a_kept_grant_ends_with_the_token_review_when_that_ends_first(reviewer):
    clock = Clock()
    authz = Authorization(ResourcePolicy(), authenticator(reviewer, clock, token_ttl=5.0),
                          reviews(reviewer, clock, allow_ttl=300.0))
    get = Access("get", PODS, "demo-shop", "web-1")

    async def story() -> None:
        await authz.authorize(_asking("t-alice"), get)
        kept = authz.granted(_asking("t-alice"), get)
        assert kept is not None and kept.expires == clock.now + 5.0
        assert authz.granted(_asking("t-alice"), get) is kept
        del reviewer.tokens["t-alice"]  # the token is revoked; its review is kept 5 s
        clock.now += 5.0
        assert authz.granted(_asking("t-alice"), get) is None  # the token is asked again
        with pytest.raises(StatusError) as rejected:
            await authz.authorize(_asking("t-alice"), get)
        assert rejected.value.code == 401

    asyncio.run(story())


def test_a_partitioned_list_stays_partitioned_while_the_denial_is_kept(fake, reviewer):
    """The cluster-wide denial is cached; the partition must still be served from it."""
    fake.ensure_namespace("other")
    fake.create("/api/v1/namespaces/other/pods", {"apiVersion": "v1", "kind": "Pod",
                                                 "metadata": {"name": "elsewhere"}})
    with run_gateway(fake, reviewer=reviewer, authz="kubernetes",
                     namespace_partitioned_lists=True) as running, \
            client(running, "t-alice") as alice:
        for _ in range(3):
            got = alice.get("/api/v1/pods")
            assert got.status_code == 200
            assert {o["metadata"]["namespace"] for o in got.json()["items"]} == {"demo-shop"}
        with client(running, "t-bob") as bob:  # no namespace at all: the API server's 403
            got = bob.get("/api/v1/pods")
            assert got.status_code == 403
            assert got.json()["message"].endswith('cannot list resource "pods" in API group "" '
                                                  'at the cluster scope')


def test_kept_dashboard_answers_never_cross_partitions(fake, reviewer):
    """Dashboard answers are kept per query (and bucket marks), results per query and version:
    the caller's partition is part of what makes both, so a caller never gets another's kept
    answer."""
    fake.ensure_namespace("other")
    if fake.get("/api/v1/namespaces/other/pods/elsewhere", ok_missing=True) is None:
        fake.create("/api/v1/namespaces/other/pods", {"apiVersion": "v1", "kind": "Pod",
                                                     "metadata": {"name": "elsewhere"}})
    reviewer.tokens["t-carol"] = {"username": "carol", "groups": []}
    reviewer.allowed.add(("carol", "*", "pods", "other"))
    with run_gateway(fake, reviewer=reviewer, authz="kubernetes",
                     namespace_partitioned_lists=True) as running, \
            client(running, "t-alice") as alice, client(running, "t-carol") as carol:
        for query in ("summary=metadata.namespace", "sortBy=metadata.name&limit=3",
                      "fields=metadata.name", "filter=metadata.name~e"):
            first = alice.get(f"/api/v1/pods?{query}").json()
            second = carol.get(f"/api/v1/pods?{query}").json()
            if "counts" in first:
                assert set(first["counts"]["metadata.namespace"]) == {"demo-shop"}
                assert set(second["counts"]["metadata.namespace"]) == {"other"}
            else:
                assert {o["metadata"]["namespace"] for o in first["items"]} == {"demo-shop"}, query
                assert {o["metadata"]["namespace"] for o in second["items"]} == {"other"}, query


def test_partitions_cost_a_bounded_number_of_reviews_per_user_and_in_all(reviewer):
    """A caller with no rights listing every namespaced resource cluster-wide, in a cluster of
    2,000 namespaces: one review per namespace and resource, every half minute, before (each
    resource 2,000 more). Now the caller's set of reviews comes from a budget (5,000, then
    100 a second); past it, 429."""
    from control_plane.fake import BUILTIN_RESOURCES

    fake = FakeCluster()
    for i in range(2000):
        fake.ensure_namespace(f"team-{i:04d}")
    namespaced = [t for t in BUILTIN_RESOURCES if t.namespaced]
    with run_gateway(fake, reviewer=reviewer, authz="kubernetes",
                     namespace_partitioned_lists=True) as running, \
            client(running, "t-bob") as bob:
        began = time.monotonic()
        codes = []
        for _ in range(2):
            for kind in namespaced:
                prefix = f"/apis/{kind.group}/{kind.version}" if kind.group else "/api/v1"
                codes.append(bob.get(f"{prefix}/{kind.name}").status_code)
        took = time.monotonic() - began
    reviews = len([r for r in reviewer.access_reviews if r["user"] == "bob"])
    assert set(codes) <= {403, 405, 429} and 429 in codes, (codes, reviews, took)
    assert reviews <= 5_000 + 100 * took + len(namespaced) + 10, f"{reviews} reviews in {took:.0f} s"
    print(f"\n{len(codes)} cluster-wide lists by a caller with no rights, 2,000 namespaces: "
          f"{reviews} reviews in {took:.1f} s (before: one per namespace and list, "
          f"{2000 * len(codes)})")


# -- decisions that rest on RBAC read here, and on several answers ----------------------------

def test_a_kept_grant_and_a_streams_grant_end_when_rbac_changes(reviewer):
    """An allow found in the cluster's RBAC holds until RBAC changes — no TTL: the very next
    request after a binding is removed is refused, and a stream's grant is no longer current
    (its loop checks again: ``app.streams.live``)."""
    from app.auth.access_review import AccessReviews
    from tests.app.auth.reviewing import rbac_reading_pods

    clock = Clock()
    rbac = rbac_reading_pods(("Group", "dev"))
    reviewer.allowed.clear()  # the cluster's reviews allow nothing: RBAC here decides
    access = AccessReviews(reviewer, 300.0, 30.0, clock=clock, rbac=rbac)
    authz = Authorization(ResourcePolicy(), authenticator(reviewer, clock, token_ttl=60.0), access)
    get = Access("get", PODS, "a", "web-1")
    watch = Access("watch", PODS, "a")

    async def story() -> None:
        first = await authz.authorize(_asking("t-alice"), get)
        assert first.expires == clock.now + 60.0  # the token review's, not a decision's TTL
        kept = authz.granted(_asking("t-alice"), get)
        assert kept is not None and authz.granted(_asking("t-alice"), get) is kept
        stream = await authz.authorize(_asking("t-alice"), watch)
        assert authz.current(stream) and reviewer.access_reviews == []
        rbac.delete_binding("RoleBinding", "a", "readers")
        assert not authz.current(stream)
        assert authz.granted(_asking("t-alice"), get) is None  # not the kept grant
        with pytest.raises(StatusError) as refused:
            await authz.authorize(_asking("t-alice"), get)
        assert refused.value.code == 403
        with pytest.raises(StatusError):
            await authz.reauthorize(stream)

    asyncio.run(story())


def test_a_partition_lives_no_longer_than_the_first_answer_it_was_built_from():
    """Before, a partition was kept for its own TTL from when it was made, out of answers
    that may have been kept long before: a namespace revoked in the cluster was served past
    its allow's expiry (with 4 s / 2 s: 5.3 s)."""
    clock = Clock()
    table = TableReviewer(USERS, {("alice", "list", "pods", "a"), ("alice", "list", "pods", "b")})
    access = reviews(table, clock, allow_ttl=4.0, deny_ttl=2.0)

    async def namespaces() -> tuple[int, list[str]]:
        return 1, ["a", "b", "c"]

    authz = Authorization(ResourcePolicy(), authenticator(table, clock, token_ttl=600.0), access,
                          namespaces)
    every = Access("list", PODS)

    async def story() -> None:
        began = clock.now
        await authz.authorize(_asking("t-alice"), Access("list", PODS, "a"))  # kept until +4
        clock.now += 3.0
        grant = await authz.authorize(_asking("t-alice"), every)
        assert grant.namespaces == {"a", "b"}
        assert grant.expires == began + 4.0  # a's answer's expiry, not now + 2
        table.allowed.discard(("alice", "list", "pods", "a"))  # revoked in the cluster
        clock.now = began + 4.5  # a's allow has expired: the partition with it
        grant = await authz.authorize(_asking("t-alice"), every)
        assert grant.namespaces == {"b"}

    asyncio.run(story())


def test_a_streams_grant_is_granted_again_from_the_caches_while_rbac_still_allows_it(reviewer):
    """``regranted``: after a change of RBAC that leaves the access allowed, a stream's grant
    is renewed on the new epoch with no review and no coroutine; where the caches cannot say
    (the access no longer allowed, the token's identity no longer kept) it answers ``None``,
    and ``reauthorize`` decides."""
    from app.auth.access_review import AccessReviews
    from tests.app.auth.reviewing import rbac_reading_pods

    clock = Clock()
    rbac = rbac_reading_pods(("Group", "dev"))
    reviewer.allowed.clear()
    access = AccessReviews(reviewer, 300.0, 30.0, clock=clock, rbac=rbac)
    authz = Authorization(ResourcePolicy(), authenticator(reviewer, clock, token_ttl=60.0), access)
    watch = Access("watch", PODS, "a")
    stream = asyncio.run(authz.authorize(_asking("t-alice"), watch))
    rbac.set_cluster_role({"metadata": {"name": "unrelated"}, "rules": []})  # a change
    assert not authz.current(stream)
    again = authz.regranted(stream)
    assert again is not None and authz.current(again) and again.identity is stream.identity
    assert again.expires == stream.expires and reviewer.access_reviews == []
    rbac.delete_binding("RoleBinding", "a", "readers")
    assert authz.regranted(again) is None  # refused: the full path words the 403
    clock.now += 61  # the token's review expired
    rbac.set_binding("RoleBinding", {
        "metadata": {"name": "readers", "namespace": "a"},
        "subjects": [{"kind": "Group", "name": "dev"}],
        "roleRef": {"kind": "ClusterRole", "name": "read-pods"}})
    assert authz.regranted(again) is None and len(reviewer.token_reviews) == 1
