"""Merged lists under /clusters/*/: every cluster's objects in one list, in a stated order,
tagged on a copy, paged without skipping or repeating, with an opaque version token."""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from control_plane.fake import FakeCluster
from control_plane.kubeapi import widget_crd
from tests.app.conftest import run_fake_clusters
from tests.helpers import wait_until

ANNOTATION = "kube-cache-gateway.io/cluster"
CM = "/api/v1/namespaces/{ns}/configmaps"


def _fake(**namespaces: list[str]) -> FakeCluster:
    fake = FakeCluster()
    for ns, names in namespaces.items():
        fake.ensure_namespace(ns)
        for name in names:
            fake.create(CM.format(ns=ns), {"metadata": {"name": name, "labels": {"size": str(len(name))}},
                                           "data": {"n": str(len(name))}})
    return fake


@pytest.fixture
def three(tmp_path):
    fakes = {"b": _fake(apps=["b2", "b1"], ops=["b3"]), "a": _fake(apps=["a1"]),
             "c": _fake(apps=["c-long"])}
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml", default="b") as gw:
        gw.fakes = fakes
        yield gw


def _items(answer: httpx.Response) -> list[tuple[str, str, str]]:
    assert answer.status_code == 200, answer.text
    return [(i["metadata"]["annotations"][ANNOTATION], i["metadata"].get("namespace", ""),
             i["metadata"]["name"]) for i in answer.json()["items"]]


def test_every_cluster_in_name_order_then_namespace_then_name_each_item_tagged(three):
    answer = httpx.get(three.url + "/clusters/*/api/v1/configmaps")
    assert _items(answer) == [("a", "apps", "a1"), ("b", "apps", "b1"), ("b", "apps", "b2"),
                              ("b", "ops", "b3"), ("c", "apps", "c-long")]
    assert answer.json()["kind"] == "ConfigMapList"
    # tagged on a copy: what each cluster serves on its own path carries no annotation
    own = httpx.get(three.url + "/clusters/b" + CM.format(ns="apps") + "/b1").json()
    assert ANNOTATION not in (own["metadata"].get("annotations") or {})
    short = httpx.get(three.url + "/clusters/*/core/v1/namespaces/apps/configmaps")
    assert [n for _, _, n in _items(short)] == ["a1", "b1", "b2", "c-long"]


def test_the_version_is_an_opaque_token_naming_each_clusters_version(three):
    meta = httpx.get(three.url + "/clusters/*/api/v1/configmaps").json()["metadata"]
    token = meta["resourceVersion"]
    assert token.startswith("kcg1.") and not token.isdigit()
    body = token[5:]
    versions = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    assert sorted(versions) == ["a", "b", "c"] and all(v.isdigit() for v in versions.values())
    again = httpx.get(three.url + "/clusters/*/api/v1/configmaps", params={"resourceVersion": token})
    assert again.status_code == 200, "a list not older than the token's versions"
    bad = httpx.get(three.url + "/clusters/*/api/v1/configmaps", params={"resourceVersion": "42"})
    assert bad.status_code == 400 and bad.json()["reason"] == "BadRequest"


def test_clusters_narrows_the_star_whatever_its_order(three):
    answer = httpx.get(three.url + "/clusters/*/api/v1/configmaps", params={"clusters": "c,a"})
    assert [c for c, _, _ in _items(answer)] == ["a", "c"]
    unknown = httpx.get(three.url + "/clusters/*/api/v1/configmaps", params={"clusters": "a,zz"})
    assert unknown.status_code == 404 and "'zz'" in unknown.json()["message"]


def test_pages_of_two_return_every_lasting_object_once_while_the_clusters_churn(three):
    url = three.url + "/clusters/*/api/v1/configmaps"
    seen: list[tuple] = []
    page = httpx.get(url, params={"limit": 2})
    fakes = three.fakes
    churned = False
    while True:
        seen += _items(page)
        token = page.json()["metadata"].get("continue")
        if not token:
            break
        if not churned:  # between pages: one created before the place, one after, one deleted
            fakes["a"].create(CM.format(ns="apps"), {"metadata": {"name": "a0"}})
            fakes["c"].create(CM.format(ns="apps"), {"metadata": {"name": "c-new"}})
            fakes["b"].delete(CM.format(ns="ops") + "/b3")
            churned = True
            import time
            time.sleep(0.5)  # the caches follow
        page = httpx.get(url, params={"limit": 2, "continue": token})
    lasting = {("a", "apps", "a1"), ("b", "apps", "b1"), ("b", "apps", "b2"), ("c", "apps", "c-long")}
    assert lasting <= set(seen) and len(seen) == len(set(seen)), seen
    assert ("a", "apps", "a0") not in seen, "created before the place: after it, never"


def test_sort_by_its_keys_then_cluster_namespace_and_name(three):
    answer = httpx.get(three.url + "/clusters/*/api/v1/configmaps",
                       params={"sortBy": "-data.n", "limit": 3})
    first = _items(answer)
    assert first == [("c", "apps", "c-long"), ("a", "apps", "a1"), ("b", "apps", "b1")]
    rest = httpx.get(three.url + "/clusters/*/api/v1/configmaps",
                     params={"sortBy": "-data.n", "continue": answer.json()["metadata"]["continue"]})
    assert _items(rest) == [("b", "apps", "b2"), ("b", "ops", "b3")]


def test_filters_fields_and_summary_across_clusters(three):
    url = three.url + "/clusters/*/api/v1/configmaps"
    filtered = httpx.get(url, params={"filter": "data.n=2"})
    assert [n for _, _, n in _items(filtered)] == ["a1", "b1", "b2", "b3"]
    (projected,) = httpx.get(url, params={"fields": "data.n", "clusters": "c"}).json()["items"]
    assert projected["data"] == {"n": "6"}, "only the fields asked for (and identity)"
    assert projected["metadata"]["annotations"] == {ANNOTATION: "c"}, "the cluster, kept"
    summary = httpx.get(url, params={
        "summary": f"data.n,metadata.annotations[{ANNOTATION}]"}).json()
    assert summary["kind"] == "Summary" and summary["total"] == 5
    assert summary["counts"]["data.n"] == {"2": 4, "6": 1}
    assert summary["counts"][f"metadata.annotations[{ANNOTATION}]"] == {"a": 1, "b": 3, "c": 1}


def test_a_resource_some_clusters_serve_is_merged_from_those_with_a_warning(three):
    three.fakes["a"].create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", widget_crd())
    three.fakes["a"].ensure_namespace("apps")
    three.fakes["a"].create("/apis/example.com/v1/namespaces/apps/widgets",
                            {"apiVersion": "example.com/v1", "kind": "Widget",
                             "metadata": {"name": "w"}})
    answer = httpx.get(three.url + "/clusters/*/apis/example.com/v1/widgets")
    assert _items(answer) == [("a", "apps", "w")]
    warning = answer.headers["warning"]
    assert "cluster b:" in warning and "cluster c:" in warning
    none = httpx.get(three.url + "/clusters/*/apis/example.com/v1/gadgets")
    assert none.status_code == 404


@pytest.mark.parametrize("path,params,code", [
    ("/clusters/*/api/v1/namespaces/apps/configmaps/b1", {}, 400),  # names are per cluster
    ("/clusters/*/api/v1", {}, 404),  # discovery is each cluster's
    ("/clusters/*/api/v1/configmaps", {"continue": "not-a-token"}, 400),
    ("/clusters/*/api/v1/configmaps", {"labelSelector": "a in (b"}, 400),
])
def test_bad_merged_reads_are_a_status_with_the_right_code(three, path, params, code):
    answer = httpx.get(three.url + path, params=params)
    assert answer.status_code == code
    assert answer.json()["kind"] == "Status" and answer.json()["code"] == code


def test_kubectl_tables_merge_too(three):
    answer = httpx.get(three.url + "/clusters/*/api/v1/namespaces/apps/configmaps", headers={
        "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"})
    rows = answer.json()["rows"]
    assert [r["cells"][0] for r in rows] == ["a1", "b1", "b2", "c-long"]


def test_each_clusters_own_rights_decide_what_a_merged_list_holds(tmp_path):
    from tests.app.fake_reviewer import TableReviewer

    alice = {"username": "alice", "groups": ["system:authenticated"]}
    reviewers = {
        "a": TableReviewer({"t-alice": alice}, {("alice", "list", "configmaps", "apps")}),
        "b": TableReviewer(),  # she may read nothing in b
        "c": TableReviewer(),  # c cannot be asked
    }
    reviewers["c"].failing = True
    fakes = {"a": _fake(apps=["a1"]), "b": _fake(apps=["b1"]), "c": _fake(apps=["c1"])}
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml", reviewers=reviewers,
                           authz="kubernetes") as gw, \
            httpx.Client(base_url=gw.url, headers={"Authorization": "Bearer t-alice"}) as http:
        url = "/clusters/*" + CM.format(ns="apps")
        answer = http.get(url)
        assert _items(answer) == [("a", "apps", "a1")], "b left out without a word"
        assert "cluster c:" in answer.headers["warning"] and "cluster b" not in answer.headers["warning"]
        assert http.get(url, params={"clusters": "b"}).status_code == 403
        assert http.get(url, params={"clusters": "b,c"}).status_code == 503
        assert http.get(url, headers={"Authorization": "Bearer nope"}).status_code == 401
        # the token was reviewed once, by the identity cluster (the default: a)
        assert [t for t, _ in reviewers["a"].token_reviews] == ["t-alice", "nope"]
        assert not reviewers["b"].token_reviews and not reviewers["c"].token_reviews
        # refused in every cluster it can ask, one configured cluster not connected: 403,
        # not a 503 (with Retry-After) that would have clients retry a refusal
        from tests.app.conftest import clusters_file
        from tests.helpers import wait_until

        clusters_file(tmp_path / "clusters.yaml", ["a", "b", "late"])
        wait_until(lambda: "late" in gw.gateway.unavailable and "c" not in gw.gateway.clusters,
                   10, message="c removed, late not connected")
        secrets = http.get("/clusters/*/api/v1/namespaces/apps/secrets")
        assert secrets.status_code == 403, secrets.text


def test_a_cluster_whose_api_server_never_answered_is_left_out_at_once(tmp_path):
    import time

    from tests.helpers import wait_until

    dead = FakeCluster()

    def refuse(path, timeout=30.0):
        raise ConnectionError("connection refused")

    dead.fetch = refuse
    fakes = {"a": _fake(apps=["a1"]), "dead": dead}
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml") as gw:
        wait_until(lambda: gw.gateway.clusters["dead"].caches.api_server_away(), 10,
                   message="the heartbeat found it away")
        began = time.monotonic()
        answer = httpx.get(gw.url + "/clusters/*/api/v1/namespaces/apps/configmaps")
        took = time.monotonic() - began
        assert _items(answer) == [("a", "apps", "a1")]
        assert "cluster dead: left out: its API server does not answer" in answer.headers["warning"]
        assert took < 1.0, f"{took:.2f} s: a dead cluster must not slow the others"
        alone = httpx.get(gw.url + "/clusters/*/api/v1/namespaces/apps/configmaps",
                          params={"clusters": "dead"})
        assert alone.status_code == 503 and alone.json()["reason"] == "ServiceUnavailable"


def test_a_configured_cluster_not_connected_is_named_and_a_stream_takes_it_in_when_it_connects(
        tmp_path):
    """'late' is in the clusters file but cannot be connected yet: a merged list leaves it
    out with a Warning naming it; a resource only it might serve is 503, not 404 (nobody
    knows yet); a merged watch of that resource opens and takes 'late' in once it connects."""
    from tests.app.conftest import clusters_file
    from tests.app.readers import LineReader, events
    from tests.helpers import wait_until

    fakes = {"a": _fake(apps=["a1"])}
    path = tmp_path / "clusters.yaml"
    with run_fake_clusters(fakes, path) as gw:
        gw.gateway.retry_every = 0.5
        clusters_file(path, ["a", "late"])  # no fake named 'late' yet: it cannot be connected
        wait_until(lambda: "late" in gw.gateway.unavailable, 10, message="late unavailable")
        answer = httpx.get(gw.url + "/clusters/*/api/v1/namespaces/apps/configmaps")
        assert _items(answer) == [("a", "apps", "a1")]
        assert "cluster late: left out: it cannot be connected" in answer.headers["warning"]
        widgets = "/clusters/*/apis/example.com/v1/namespaces/apps/widgets"
        unknown = httpx.get(gw.url + widgets)
        assert unknown.status_code == 503 and unknown.json()["reason"] == "ServiceUnavailable"
        assert "cluster late: left out: it cannot be connected" in unknown.json()["message"]
        watch = LineReader(gw.url + widgets + "?watch=true")
        try:
            wait_until(lambda: watch.status is not None, 10, message="the watch to open")
            assert watch.status == 200
            late = _fake(apps=[])
            late.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", widget_crd())
            late.create("/apis/example.com/v1/namespaces/apps/widgets",
                        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})
            fakes["late"] = late
            watch.wait_for(lambda lines: events(lines) == [("ADDED", "w")], 20)
            tag = json.loads(watch.lines[0])["object"]["metadata"]["annotations"][ANNOTATION]
            assert tag == "late"
        finally:
            watch.close()


def test_a_merged_list_names_a_cluster_whose_cache_is_not_following(tmp_path):
    """As the cluster's own path does (``Age`` and a ``Warning`` naming it), in the same moment:
    a merged list served b's cached objects for 20 s without a word."""
    import time

    fakes = {"a": _fake(apps=["a1"]), "b": _fake(apps=["b1"])}
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml") as gw:
        url = "/clusters/*" + CM.format(ns="apps")
        assert "warning" not in httpx.get(gw.url + url).headers
        since = time.time() - 42  # one moment: both answers name the same second
        gw.gateway.clusters["b"].caches.stale_since = lambda entry: since
        own = httpx.get(gw.url + "/clusters/b" + CM.format(ns="apps"))
        merged = httpx.get(gw.url + url)
        assert _items(merged) == [("a", "apps", "a1"), ("b", "apps", "b1")]
        said = own.headers["warning"].split("; this answer")[0]  # its age may tick meanwhile
        assert said in merged.headers["warning"]
        assert '"cluster b: the cache of configmaps has not followed' in merged.headers["warning"]
        assert int(merged.headers["age"]) >= 42


def test_metadata_only_reads_merge_too(tmp_path):
    """client-go's metadata client under /clusters/*/: PartialObjectMetadataList of every
    cluster's items, each tagged with its cluster and nothing but metadata; a watch's events
    PartialObjectMetadata; the list form asked of a watch is 406."""
    import json

    list_form = ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;"
                 "g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;"
                 "g=meta.k8s.io;v=v1,application/json")
    one_form = list_form.replace("PartialObjectMetadataList", "PartialObjectMetadata")
    fakes = {"a": _fake(apps=["a1"]), "b": _fake(apps=["b1"])}
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml") as gw:
        url = gw.url + "/clusters/*" + CM.format(ns="apps")
        listed = httpx.get(url, headers={"Accept": list_form}).json()
        assert (listed["kind"], listed["apiVersion"]) == ("PartialObjectMetadataList",
                                                          "meta.k8s.io/v1")
        assert [(i["kind"], i["metadata"]["name"],
                 i["metadata"]["annotations"]["kube-cache-gateway.io/cluster"])
                for i in listed["items"]] == [("PartialObjectMetadata", "a1", "a"),
                                              ("PartialObjectMetadata", "b1", "b")]
        assert all(set(i) == {"kind", "apiVersion", "metadata"} for i in listed["items"])
        with httpx.stream("GET", url + "?watch=1", headers={"Accept": one_form}) as stream:
            first = json.loads(next(stream.iter_lines()))
        assert first["type"] == "ADDED" and set(first["object"]) == {"kind", "apiVersion",
                                                                     "metadata"}
        assert first["object"]["kind"] == "PartialObjectMetadata"
        assert httpx.get(url + "?watch=1", headers={"Accept": list_form}).status_code == 406
        assert httpx.get(url, headers={"Accept": one_form}).status_code == 406


def _kept_hits(gw) -> int:
    return gw.gateway.merged_lists.hits


def _fresh_merged(gw, url: str, **params) -> bytes:
    """What the gateway answers with no merged answer kept."""
    gw.gateway.merged_lists.clear()
    return httpx.get(url, params=params).content


def test_a_merged_list_the_budget_cannot_keep_is_made_a_slice_at_a_time(tmp_path):
    """With no room to keep the answer, its items are tagged as the client takes them, never
    all at once: sent chunked (its length is not known before), the same items in order, and
    nothing kept."""
    names = [f"cm-{i:03}" for i in range(150)]
    fakes = {"a": _fake(apps=names), "b": _fake(apps=names)}
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml", default="a",
                           query_memory_bytes=1) as gw:
        url = gw.url + "/clusters/*" + CM.format(ns="apps")
        for _ in range(2):  # asked again: still nothing to keep it in
            answer = httpx.get(url, headers={"Accept-Encoding": "identity"})
            assert _items(answer) == [(c, "apps", n) for c in "ab" for n in names]
            assert "content-length" not in answer.headers
            assert len(gw.gateway.merged_lists) == 0
        # a slice or less: joined once, sent with its length
        small = httpx.get(url, params={"limit": 5}, headers={"Accept-Encoding": "identity"})
        assert _items(small) == [("a", "apps", n) for n in names[:5]]
        assert int(small.headers["content-length"]) == len(small.content)


def test_a_merged_list_asked_again_is_the_kept_answer_until_a_cluster_writes_under_it(three):
    """Whole answers kept (app.cache.kept_lists): the same bytes while no cluster's buckets
    changed; a write in one cluster under them is in the next answer, and one outside them
    only renews that cluster's version in the token."""
    url = three.url + "/clusters/*" + CM.format(ns="apps")
    first = httpx.get(url)
    hits = _kept_hits(three)
    again = httpx.get(url)
    assert _kept_hits(three) == hits + 1 and again.content == first.content
    assert again.headers["content-type"] == "application/json"
    assert "no-cache" in again.headers["cache-control"]
    # a write outside the buckets (another namespace): the items kept, the version renewed
    three.fakes["b"].patch(CM.format(ns="ops") + "/b3", {"data": {"n": "9"}})
    own = three.url + "/clusters/b" + CM.format(ns="ops") + "/b3"
    _wait(lambda: httpx.get(own).json()["data"]["n"] == "9")
    renewed = httpx.get(url)
    assert _kept_hits(three) == hits + 2
    assert renewed.json()["items"] == first.json()["items"]
    assert renewed.json()["metadata"]["resourceVersion"] != first.json()["metadata"]["resourceVersion"]
    assert renewed.content == _fresh_merged(three, url)
    # a write under them: read again, the change in it
    httpx.get(url)
    three.fakes["a"].patch(CM.format(ns="apps") + "/a1", {"data": {"n": "7"}})
    _wait(lambda: httpx.get(three.url + "/clusters/a" + CM.format(ns="apps") + "/a1")
          .json()["data"]["n"] == "7")
    hits = _kept_hits(three)
    changed = httpx.get(url)
    assert _kept_hits(three) == hits, "not the kept answer"
    assert [i["data"]["n"] for i in changed.json()["items"]
            if i["metadata"]["name"] == "a1"] == ["7"]
    assert changed.content == _fresh_merged(three, url)
    # pages kept each with their token; other clusters asked, another answer
    for params in ({"limit": 2}, {"clusters": "a,c"}, {"labelSelector": "size=2"}):
        once = httpx.get(url, params=params)
        assert httpx.get(url, params=params).content == once.content
        assert once.content == _fresh_merged(three, url, **params), params


def test_a_kept_merged_answer_holds_only_the_clusters_each_caller_may_read(tmp_path):
    """Kept per the clusters that authorized the caller: alice (a and b) and bob (a alone)
    never get each other's answer; a caller with no token or no rights gets 401 or 403 and
    never the kept bytes."""
    from tests.app.fake_reviewer import TableReviewer

    users = {"t-alice": {"username": "alice", "groups": []},
             "t-bob": {"username": "bob", "groups": []},
             "t-carol": {"username": "carol", "groups": []}}
    rows = {("alice", "*", "configmaps", "apps"), ("bob", "*", "configmaps", "apps")}
    reviewers = {"a": TableReviewer(users, rows),
                 "b": TableReviewer(users, {("alice", "*", "configmaps", "apps")})}
    fakes = {"a": _fake(apps=["a1"]), "b": _fake(apps=["b1"])}
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml", reviewers=reviewers,
                           authz="kubernetes") as gw:
        url = gw.url + "/clusters/*" + CM.format(ns="apps")

        def ask(token: str | None) -> httpx.Response:
            return httpx.get(url, headers={"Authorization": f"Bearer {token}"} if token else {})

        for _ in range(2):
            assert [c for c, _, _ in _items(ask("t-alice"))] == ["a", "b"]
        hits = _kept_hits(gw)
        assert hits >= 1
        for _ in range(2):
            assert [c for c, _, _ in _items(ask("t-bob"))] == ["a"]
        assert _kept_hits(gw) == hits + 1, "bob's own answer, kept apart from alice's"
        hits = _kept_hits(gw)
        for token, code in ((None, 401), ("t-mallory", 401), ("t-carol", 403)):
            answer = ask(token)
            assert answer.status_code == code, (token, answer.text[:200])
            assert "a1" not in answer.text
        assert _kept_hits(gw) == hits


def _wait(condition) -> None:
    from tests.helpers import wait_until

    wait_until(condition, 10, message="the cache to reach the write")


def test_the_clusters_lists_in_order_read_like_the_list_of_their_items():
    """``_InClusterOrder`` makes each item as it is read; every index, slice (of a slice)
    and walk gives what the list of all items would, empty clusters and bounds included."""
    import bisect
    import itertools
    import random
    from types import SimpleNamespace

    from app.http.merged import _InClusterOrder

    lists = [(name, [SimpleNamespace(key=f"{name}/{i}") for i in range(size)])
             for name, size in (("a", 3), ("b", 0), ("c", 5), ("d", 1))]
    whole = [((n, o.key), n, o) for n, objects in lists for o in objects]
    lazy = _InClusterOrder(lists)
    assert len(lazy) == len(whole) and list(lazy) == whole
    assert [lazy[i] for i in range(-len(whole), len(whole))] == whole + whole
    for bad in (len(whole), -len(whole) - 1):
        with pytest.raises(IndexError):
            lazy[bad]
    rng = random.Random(7)
    for _ in range(200):
        a, b = sorted(rng.randrange(-2, len(whole) + 3) for _ in range(2))
        view = lazy[a:b]
        assert list(view) == whole[a:b] and len(view) == len(whole[a:b])
        c, d = sorted(rng.randrange(-2, len(view) + 3) for _ in range(2))
        assert list(view[c:d]) == whole[a:b][c:d]
    for place in (("c", "c/2"), ("a", "a/0"), ("zz", ""), ("", "")):
        assert bisect.bisect_right(lazy, place, key=lambda item: item[0]) == \
            bisect.bisect_right(whole, place, key=lambda item: item[0])
    assert [c for c, _ in itertools.groupby(lazy[2:5], key=lambda item: item[1])] == ["a", "c"]


def test_an_exact_merged_list_at_a_past_token_is_each_clusters_history_paged_at_it(tmp_path):
    fakes = {name: FakeCluster() for name in ("a", "b")}
    for fake in fakes.values():
        fake.ensure_namespace("kube-system")  # each cluster's identity in the store
        fake.ensure_namespace("shop")
    base = "/api/v1/namespaces/shop/configmaps"
    for name, fake in fakes.items():
        for i in range(2):
            fake.create(base, {"metadata": {"name": f"{name}-{i}"}, "data": {"v": "0"}})
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml", default="a",
                           history=f"sqlite:///{tmp_path}/h.db") as gw, \
            httpx.Client(base_url=gw.url, timeout=30) as http:
        then = http.get(f"/clusters/*{base}").json()
        token = then["metadata"]["resourceVersion"]
        for name, fake in fakes.items():
            fake.patch(f"{base}/{name}-0", {"data": {"v": "1"}})
            fake.delete(f"{base}/{name}-1")
            made = fake.create(base, {"metadata": {"name": f"{name}-9"}, "data": {}})
            gw_cluster = gw.gateway.clusters[name]
            wait_until(lambda c=gw_cluster, m=made: c.history.writer.flushed(1) and any(
                hi >= int(m["metadata"]["resourceVersion"]) for _, hi in
                c.history.store.spans(name, "core/v1/configmaps")), 10, message="kept")
        now = http.get(f"/clusters/*{base}").json()
        assert [o["metadata"]["name"] for o in now["items"]] == ["a-0", "a-9", "b-0", "b-9"]
        past = http.get(f"/clusters/*{base}", params={"resourceVersion": token,
                                                      "resourceVersionMatch": "Exact"})
        assert past.status_code == 200, past.text
        assert [(o["metadata"]["name"], o["data"]) for o in past.json()["items"]] == [
            (o["metadata"]["name"], o["data"]) for o in then["items"]]
        assert past.json()["metadata"]["resourceVersion"] == token
        pages, cont = [], None
        while True:
            params = {"limit": "1"} | ({"continue": cont} if cont else {
                "resourceVersion": token, "resourceVersionMatch": "Exact"})
            page = http.get(f"/clusters/*{base}", params=params).json()
            pages += [o["metadata"]["name"] for o in page["items"]]
            cont = page["metadata"].get("continue")
            if not cont:
                break
        assert pages == ["a-0", "a-1", "b-0", "b-1"]  # every page at the token's versions
