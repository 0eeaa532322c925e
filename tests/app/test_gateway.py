"""The gateway fails closed: with ``--authz kubernetes`` nobody is answered while callers
cannot be authenticated, whatever the identity cluster's state, and it never moves.

Each state is one in which an earlier gateway answered callers with no token at all
(its clusters were authorized with no authenticator, which meant "no authorization"):
the identity cluster misnamed, not connected, being connected, removed, or its reviews
failing. Over in-memory clusters with table reviewers; the same against three real API
servers is ``tests/app/clusters/test_cluster_several_live.py``.
"""

from __future__ import annotations

import threading

import httpx

from control_plane.fake import FakeCluster
from tests.app.conftest import clusters_file, run_fake_clusters
from tests.app.fake_reviewer import TableReviewer
from tests.helpers import wait_until

CM = "/api/v1/namespaces/apps/configmaps"
ALICE = {"username": "alice", "groups": ["system:authenticated"]}
# the paths a caller could read something through: every one is refused in these states
PATHS = ("/clusters/b" + CM, CM, "/clusters/*" + CM, "/clusters/b" + CM + "?watch=1",
         "/clusters/b/core/v1/configmaps", "/clusters/b/api", "/clusters/b/version", "/api",
         "/version", "/clusters", "/metrics", "/clusters/zz" + CM, "/clusters/b/ui/")


def _fake(*names: str) -> FakeCluster:
    fake = FakeCluster()
    fake.ensure_namespace("apps")
    for name in names:
        fake.create(CM, {"metadata": {"name": name}})
    return fake


def _reviewers(*names: str) -> dict[str, TableReviewer]:
    """Each cluster's reviewer knows alice's token and lets her read everything."""
    return {n: TableReviewer({"t-alice": ALICE}, {("alice", "*", "*", "*")}) for n in names}


def _refused_everywhere(url: str, why: str) -> None:
    for token in (None, "t-alice"):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        for path in PATHS:
            answer = httpx.get(url + path, headers=headers, timeout=10)
            assert answer.status_code == 503, (token, path, answer.status_code, answer.text[:200])
            assert answer.headers["retry-after"], path
            status = answer.json()
            assert status["kind"] == "Status" and status["reason"] == "ServiceUnavailable"
            assert why in status["message"], status["message"]
    for probe in ("/healthz", "/livez"):
        assert httpx.get(url + probe).status_code == 200, probe


def test_a_misnamed_identity_cluster_answers_nobody(tmp_path):
    """--authn-cluster naming no cluster of the file (serve refuses that at start; a file
    changed later can do it): 503 for every caller, never the data."""
    fakes = {"a": _fake("in-a"), "b": _fake("in-b")}
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml", reviewers=_reviewers("a", "b"),
                           authz="kubernetes", authn_cluster="typo") as gw:
        wait_until(lambda: set(gw.gateway.clusters) == {"a", "b"}, 10, message="both served")
        _refused_everywhere(gw.url, "the identity cluster 'typo' is not served")


def test_an_identity_cluster_that_cannot_be_connected_answers_nobody(tmp_path):
    fakes = {"a": _fake("in-a"), "b": _fake("in-b")}

    class Unreachable(dict):
        def __getitem__(self, name):
            if name == "a":
                raise ConnectionError("the kubeconfig of a cannot be read")
            return super().__getitem__(name)

    with run_fake_clusters(Unreachable(fakes), tmp_path / "clusters.yaml",
                           reviewers=_reviewers("a", "b"), authz="kubernetes",
                           default="b", authn_cluster="a") as gw:
        wait_until(lambda: "b" in gw.gateway.clusters and "a" in gw.gateway.unavailable, 10,
                   message="b served, a not")
        _refused_everywhere(gw.url, "the identity cluster 'a' cannot be connected")


def test_while_the_identity_cluster_is_being_connected_nobody_is_answered(tmp_path):
    fakes = {"a": _fake("in-a"), "b": _fake("in-b")}
    held, asked = threading.Event(), threading.Event()

    class Slow(dict):
        def __getitem__(self, name):
            if name == "a" and not held.is_set():
                asked.set()
                held.wait(20)
            return super().__getitem__(name)

    path = tmp_path / "clusters.yaml"
    slow = Slow({"b": fakes["b"]})
    with run_fake_clusters(slow, path, reviewers=_reviewers("a", "b"), authz="kubernetes",
                           authn_cluster="a") as gw:
        gw.gateway  # started, with b alone: a is not configured yet
        _refused_everywhere(gw.url, "the identity cluster 'a' is not served")
        slow["a"] = fakes["a"]
        clusters_file(path, ["b", "a"])
        assert asked.wait(10), "a is being connected"
        _refused_everywhere(gw.url, "the identity cluster 'a' is being connected")
        held.set()
        wait_until(lambda: httpx.get(gw.url + CM, headers={"Authorization": "Bearer t-alice"})
                   .status_code == 200, 10, message="a connected: alice is known")
        assert httpx.get(gw.url + CM).status_code == 401


def test_a_removed_identity_cluster_reviews_nothing_and_the_default_never_takes_its_place(
        tmp_path):
    """Identity a (the first default); a removed from the file, b the new default: a token
    known to b — minted there — is not reviewed by b, and a's reviewer is asked nothing more;
    a back: callers are known again."""
    fakes = {"a": _fake("in-a"), "b": _fake("in-b")}
    reviewers = _reviewers("a", "b")
    reviewers["b"].tokens["t-bob"] = {"username": "bob", "groups": []}
    path = tmp_path / "clusters.yaml"
    with run_fake_clusters(fakes, path, reviewers=reviewers, authz="kubernetes") as gw, \
            httpx.Client(base_url=gw.url, headers={"Authorization": "Bearer t-alice"}) as http:
        assert http.get("/clusters/b" + CM).status_code == 200
        assert httpx.get(gw.url + "/clusters/b" + CM,
                         headers={"Authorization": "Bearer t-bob"}).status_code == 401
        clusters_file(path, ["b"], default="b")
        wait_until(lambda: set(gw.gateway.clusters) == {"b"}, 10, message="a removed")
        asked = len(reviewers["a"].token_reviews)
        _refused_everywhere(gw.url, "the identity cluster 'a' is not served")
        for token in ("t-bob", "t-new"):
            answer = httpx.get(gw.url + CM, headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 503, answer.text
        assert len(reviewers["a"].token_reviews) == asked, "a removed reviews nothing"
        assert [t for t, _ in reviewers["b"].token_reviews] == [], "b never became the identity"
        clusters_file(path, ["a", "b"], default="b")
        wait_until(lambda: http.get("/clusters/b" + CM).status_code == 200, 10,
                   message="a back: alice known again")


def test_failing_token_reviews_are_503_never_an_allow(tmp_path):
    fakes = {"a": _fake("in-a"), "b": _fake("in-b")}
    reviewers = _reviewers("a", "b")
    reviewers["a"].failing = True
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml", reviewers=reviewers,
                           authz="kubernetes") as gw:
        for path in PATHS:
            answer = httpx.get(gw.url + path, headers={"Authorization": "Bearer t-alice"})
            assert answer.status_code == 503, (path, answer.text[:200])
        assert httpx.get(gw.url + CM).status_code == 401, "no token: 401 before anything"


def test_one_cluster_that_cannot_be_asked_never_stops_a_prewarming_gateway(tmp_path, monkeypatch):
    """--prewarm with clusters whose API servers do not answer (connection refused), refuse the
    credentials (401), answer too slowly, or whose credentials cannot be had: the gateway
    starts (it exited 1, 'Application startup failed'), the cluster that answers serves and is
    ready, and the others are not ready until they can be asked."""
    import time

    import app.cache.resources as resources
    from app.process.kubeconfig import CredentialsError

    monkeypatch.setattr(resources, "PREWARM_RESOLVE_WAIT", 0.5)
    fakes = {"a": _fake("in-a"), "refused": _fake(), "unauthorized": _fake(), "slow": _fake()}

    def refuse(path, timeout=30.0):
        raise ConnectionError("connection refused")

    def slow(path, timeout=30.0):
        time.sleep(1)  # each of discovery's requests: longer than start-up waits for them all
        return fakes["a"].fetch(path)

    fakes["refused"].fetch = refuse
    fakes["unauthorized"].fetch = lambda path, timeout=30.0: (401, None)
    fakes["slow"].fetch = slow

    class PluginFailing(dict):
        def __getitem__(self, name):
            if name == "plugin":
                raise CredentialsError("the exec plugin exited 1")
            return super().__getitem__(name)

    clusters = PluginFailing({**fakes, "plugin": None})
    with run_fake_clusters(clusters, tmp_path / "clusters.yaml", default="a",
                           prewarm=("configmaps",)) as gw:
        wait_until(lambda: set(gw.gateway.clusters) == set(fakes), 10,
                   message="every cluster that could be connected is served")
        assert "plugin" in gw.gateway.unavailable
        assert [i["metadata"]["name"] for i in httpx.get(gw.url + CM).json()["items"]] == ["in-a"]
        wait_until(lambda: httpx.get(gw.url + "/readyz").status_code == 200, 10,
                   message="ready: the default synced, the others excluded")
        for name in ("refused", "unauthorized"):
            assert not gw.gateway.clusters[name].caches.prewarm_ready(), name
        wait_until(lambda: gw.gateway.clusters["slow"].caches.prewarm_ready(), 30,
                   message="the slow cluster resolved and synced in the background")


def test_clusters_sharing_the_identity_clusters_names_are_named_once_at_start(tmp_path, caplog):
    """Without prefixes a ServiceAccount token of the identity cluster stands for the
    same-named ServiceAccount everywhere, and system:authenticated for every caller of it."""
    import logging

    caplog.set_level(logging.WARNING, logger="kube-cache-gateway")
    path = tmp_path / "clusters.yaml"
    fakes = {"a": _fake(), "b": _fake(), "c": _fake(), "d": _fake()}
    with run_fake_clusters(fakes, path, reviewers=_reviewers(*fakes), authz="kubernetes") as gw:
        clusters_file(path, list(fakes), c={"userPrefix": "c:", "groupPrefix": "c:"},
                      d={"groupPrefix": "d:"})
        wait_until(lambda: gw.gateway.specs.get("c") and gw.gateway.specs["c"].user_prefix, 10,
                   message="the prefixes applied")
    said = [r.getMessage() for r in caplog.records if "know callers by the names" in r.getMessage()]
    assert said[0].startswith("clusters b, c, d know callers by the names the identity cluster a")
    assert said[1].startswith("clusters b know callers by the names the identity cluster a")
    assert len(said) == 2, "once per configuration"


def test_access_reviews_are_one_budget_for_every_cluster(tmp_path):
    """A merged read costs a review per cluster (and per namespace with partitions): those
    were outside any budget. Now every review a caller causes, in any cluster, is taken from
    one budget of the gateway's; past it 429 with Retry-After, and kept decisions still answer."""
    from app.auth.review_budget import Buckets

    names = ["a", "b", "c", "d", "e"]
    fakes = {n: _fake(f"in-{n}") for n in names}
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml", reviewers=_reviewers(*names),
                           authz="kubernetes") as gw, \
            httpx.Client(base_url=gw.url, headers={"Authorization": "Bearer t-alice"}) as http:
        budget = gw.gateway.review_budget
        assert all(c.authorization.budget is budget for c in gw.gateway.clusters.values())
        budget.per_user = Buckets(0.001, 3.0)  # three reviews, then (almost) none
        merged = http.get("/clusters/*" + CM)
        assert merged.status_code == 429 and merged.headers["retry-after"], merged.text
        assert "more access reviews than this gateway makes for now" in merged.json()["message"]
        decided = [n for n in names if http.get(f"/clusters/{n}" + CM).status_code == 200]
        assert len(decided) == 3, "the three reviews made are kept; the others are refused"
        assert http.get(f"/clusters/{decided[0]}" + CM).status_code == 200, "kept: no review"


def test_a_client_certificate_is_refused_too_while_callers_cannot_be_authenticated(tmp_path):
    """A caller with a certificate of a CA the gateway trusts, serving TLS with the identity
    cluster misnamed: 503 like every caller, never the data — the certificate's subject is not
    an identity the gateway may act on without the cluster that reviews access."""
    import ssl

    from control_plane.certs import certificate_authority, client_certificate, self_signed_cert

    serving = self_signed_cert(tmp_path / "serving")
    ca = certificate_authority(tmp_path / "ca")
    carol = client_certificate(tmp_path / "carol", ca, "carol", ("system:masters",))
    fakes = {"a": _fake("in-a"), "b": _fake("in-b")}
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml", reviewers=_reviewers("a", "b"),
                           authz="kubernetes", authn_cluster="typo",
                           tls_cert_file=str(serving[0]), tls_private_key_file=str(serving[1]),
                           client_ca_file=str(ca[0])) as gw:
        wait_until(lambda: set(gw.gateway.clusters) == {"a", "b"}, 10, message="both served")
        context = ssl.create_default_context(cafile=str(serving[0]))
        context.load_cert_chain(str(carol[0]), str(carol[1]))
        with httpx.Client(base_url=gw.url, verify=context, timeout=10) as client:
            for path in ("/clusters/b" + CM, CM, "/clusters/*" + CM, "/api"):
                answer = client.get(path)
                assert answer.status_code == 503, (path, answer.text[:200])
                assert "the identity cluster 'typo' is not served" in answer.json()["message"]
