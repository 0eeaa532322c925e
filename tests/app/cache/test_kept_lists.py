"""List answers kept while their buckets are unchanged: asked again, the same bytes with only
the version made new; after any write under their buckets, read again — never a stale item."""

from __future__ import annotations

import time

import httpx
import orjson
import pytest

from app.query.budget import QueryMemory
from control_plane.fake import FakeCluster
from tests.app.conftest import run_gateway
from tests.app.fake_reviewer import TableReviewer
from tests.helpers import wait_until

NS, OTHER = "kept", "elsewhere"


@pytest.fixture
def cluster():
    cluster = FakeCluster()
    for namespace in (NS, OTHER):
        cluster.ensure_namespace(namespace)
        for n in range(6):
            cluster.create(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {
                "name": f"cm-{n}", "labels": {"app": "web" if n % 2 else "db"}},
                "data": {"n": "0"}})
    return cluster


def _entry(gw):
    return next(iter(gw.gateway.default.caches.entries().values()))


def _fresh(gw, path: str) -> dict:
    """What the gateway answers with nothing kept (its kept answers let go first)."""
    _entry(gw).lists.clear()
    return httpx.get(gw.url + path).json()


def _seen(gw, obj: dict) -> None:
    version = int(obj["metadata"]["resourceVersion"])

    def reached() -> bool:
        settled = _entry(gw).generic.informer().settled_version()
        return bool(settled) and int(settled) >= version

    wait_until(reached, 5, message="the cache to reach the write")


LISTS = (f"/api/v1/namespaces/{NS}/configmaps?labelSelector=app%3Dweb",
         f"/api/v1/namespaces/{NS}/configmaps",
         "/api/v1/configmaps?labelSelector=app+in+(web,db),app!%3Ddb",
         "/api/v1/configmaps?limit=4",
         f"/api/v1/namespaces/{NS}/configmaps?fieldSelector=metadata.name!%3Dcm-1")


def test_asked_again_the_kept_bytes_are_sent(cluster):
    with run_gateway(cluster) as gw:
        for path in LISTS:
            first = httpx.get(gw.url + path)
            hits = _entry(gw).lists.hits
            again = httpx.get(gw.url + path)
            assert _entry(gw).lists.hits == hits + 1, path
            assert again.content == first.content, path
            assert again.headers["etag"] == first.headers["etag"]


def test_a_write_elsewhere_keeps_the_items_and_renews_the_version(cluster):
    path = LISTS[0]
    with run_gateway(cluster) as gw:
        first = httpx.get(gw.url + path).json()
        _seen(gw, cluster.patch(f"/api/v1/namespaces/{OTHER}/configmaps/cm-1",
                                {"data": {"n": "1"}}))  # app=web, but in another namespace
        hits = _entry(gw).lists.hits
        again = httpx.get(gw.url + path).json()
        assert _entry(gw).lists.hits == hits + 1
        assert again["items"] == first["items"]
        assert int(again["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
        assert again == _fresh(gw, path)


@pytest.mark.parametrize("write", ["change", "relabel in", "relabel out", "add", "delete"])
def test_a_write_under_its_buckets_is_in_the_next_answer(cluster, write):
    base = f"/api/v1/namespaces/{NS}/configmaps"
    with run_gateway(cluster) as gw:
        for path in LISTS:
            httpx.get(gw.url + path)
        if write == "change":
            done = cluster.patch(f"{base}/cm-1", {"data": {"n": "changed"}})
        elif write == "relabel in":
            done = cluster.patch(f"{base}/cm-0", {"metadata": {"labels": {"app": "web"}}})
        elif write == "relabel out":
            done = cluster.patch(f"{base}/cm-3", {"metadata": {"labels": {"app": "job"}}})
        elif write == "add":
            done = cluster.create(base, {"metadata": {"name": "cm-00", "labels": {"app": "web"}}})
        else:
            cluster.delete(f"{base}/cm-5")
            done = cluster.create(f"/api/v1/namespaces/{OTHER}/configmaps",
                                  {"metadata": {"name": "marker"}})
        _seen(gw, done)
        for path in LISTS:
            answer = httpx.get(gw.url + path).json()
            assert answer == _fresh(gw, path), (write, path)


def test_kinds_of_answer_are_kept_apart(cluster):
    """The same path as JSON, as object metadata and projected: three answers."""
    path = LISTS[1]
    meta = {"Accept": "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"}
    with run_gateway(cluster) as gw:
        plain = httpx.get(gw.url + path).json()
        partial = httpx.get(gw.url + path, headers=meta).json()
        projected = httpx.get(gw.url + path + "?fields=metadata.name").json()
        assert httpx.get(gw.url + path).json() == plain
        assert httpx.get(gw.url + path, headers=meta).json() == partial
        assert httpx.get(gw.url + path + "?fields=metadata.name").json() == projected
        assert partial["kind"] == "PartialObjectMetadataList" and plain["kind"] == "ConfigMapList"
        assert "labels" in plain["items"][0]["metadata"]
        assert "labels" not in projected["items"][0]["metadata"]
        assert "data" not in projected["items"][0]


def test_pages_are_kept_each_with_its_token(cluster):
    with run_gateway(cluster) as gw:
        def walk() -> list[tuple[list[str], int | None]]:
            pages, token = [], ""
            while True:
                answer = httpx.get(gw.url + "/api/v1/configmaps?limit=5"
                                   + (f"&continue={token}" if token else "")).json()
                pages.append(([o["metadata"]["name"] for o in answer["items"]],
                              answer["metadata"].get("remainingItemCount")))
                token = answer["metadata"].get("continue", "")
                if not token:
                    return pages

        first = walk()
        hits = _entry(gw).lists.hits
        assert walk() == first
        assert _entry(gw).lists.hits == hits + len(first)


def test_every_kept_answer_is_charged_to_the_budget_and_let_go_past_it(cluster):
    with run_gateway(cluster) as gw:
        memory: QueryMemory = gw.gateway.query_memory
        lists = None
        for n in range(40):
            httpx.get(gw.url + f"/api/v1/configmaps?labelSelector=n{n}!%3Dx")
            lists = _entry(gw).lists
        assert len(lists) == 40
        used = memory.used
        assert used >= sum(len(k.whole) for k in lists._kept.values())
        memory.limit = used // 2
        httpx.get(gw.url + "/api/v1/configmaps?labelSelector=last!%3Dx")
        assert memory.used <= memory.limit
        assert len(lists) < 40


def test_a_large_answer_is_kept_only_when_asked_again_unchanged(cluster, monkeypatch):
    import app.cache.kept_lists as kept_lists

    monkeypatch.setattr(kept_lists, "JOIN_BELOW", 100)  # every answer here is "large"
    path = LISTS[1]
    with run_gateway(cluster) as gw:
        first = httpx.get(gw.url + path)
        assert len(_entry(gw).lists) == 0  # asked once: not kept
        assert httpx.get(gw.url + path).content == first.content
        assert len(_entry(gw).lists) == 1  # asked again, nothing changed between: kept
        hits = _entry(gw).lists.hits
        assert httpx.get(gw.url + path).content == first.content
        assert _entry(gw).lists.hits == hits + 1


def test_a_large_kept_answer_renewed_is_sent_from_the_kept_bytes(cluster, monkeypatch):
    """Over ``JOIN_BELOW`` a renewed version is sent as envelope plus a view of the kept
    items, in pieces, never joined again: the bytes still equal a fresh read."""
    import app.cache.kept_lists as kept_lists
    import app.kube.envelope as envelope

    monkeypatch.setattr(envelope, "JOIN_BELOW", 100)
    monkeypatch.setattr(envelope, "CHUNK", 64)
    path = LISTS[1]
    with run_gateway(cluster) as gw:
        first = httpx.get(gw.url + path).json()  # kept at once (small then)
        monkeypatch.setattr(kept_lists, "JOIN_BELOW", 100)  # large from now on
        _seen(gw, cluster.patch(f"/api/v1/namespaces/{OTHER}/configmaps/cm-2",
                                {"data": {"n": "1"}}))
        hits = _entry(gw).lists.hits
        raw = httpx.get(gw.url + path)
        assert _entry(gw).lists.hits == hits + 1
        again = orjson.loads(raw.content)
        assert int(raw.headers["content-length"]) == len(raw.content)
        assert again["items"] == first["items"]
        assert again == _fresh(gw, path)


def test_a_list_from_the_hubs_view_is_not_kept(monkeypatch):
    """In a burst the indexer may be at no version and the list comes from the hub's view,
    which may be behind the store's marks: such an answer is never kept."""
    from informer_core.informer import SharedIndexInformer

    monkeypatch.setattr(SharedIndexInformer, "read_consistently",
                        lambda self, read: (read(), ""))
    cluster = FakeCluster()
    cluster.ensure_namespace(NS)
    cluster.create(f"/api/v1/namespaces/{NS}/configmaps", {"metadata": {"name": "a"}})
    with run_gateway(cluster) as gw:
        started = time.monotonic()
        assert httpx.get(gw.url + LISTS[1]).status_code == 200
        assert httpx.get(gw.url + LISTS[1]).status_code == 200
        assert len(_entry(gw).lists) == 0 and _entry(gw).lists.hits == 0
        assert time.monotonic() - started < 5


def test_a_kept_answer_is_refused_to_callers_who_may_not_read_it(cluster):
    """A kept answer is looked up only after the caller is known and allowed: no token,
    a token nobody knows, and a caller allowed elsewhere get 401, 401, 403, and not one of
    them is given the kept bytes (no hit is counted)."""
    reviewer = TableReviewer({"t-alice": {"username": "alice", "groups": []},
                              "t-carol": {"username": "carol", "groups": []}},
                             {("alice", "*", "configmaps", NS), ("carol", "*", "configmaps", OTHER)})
    path = LISTS[0]
    with run_gateway(cluster, reviewer=reviewer, authz="kubernetes") as gw:
        alice = {"Authorization": "Bearer t-alice"}
        first = httpx.get(gw.url + path, headers=alice)
        assert first.status_code == 200
        assert httpx.get(gw.url + path, headers=alice).content == first.content
        hits = _entry(gw).lists.hits
        assert hits >= 1, "alice's second ask is the kept answer"
        for headers, code in (({}, 401), ({"Authorization": "Bearer t-mallory"}, 401),
                              ({"Authorization": "Bearer t-carol"}, 403)):
            answer = httpx.get(gw.url + path, headers=headers)
            assert answer.status_code == code, (headers, answer.text[:200])
            assert answer.json()["kind"] == "Status" and "cm-" not in answer.text
        assert _entry(gw).lists.hits == hits, "no refused caller reached the kept answer"


def test_an_answer_kept_again_is_charged_once():
    """Made again (after a write under it, or asked again), an answer replaces the one before
    it in the budget: the budget counts each kept answer once, however often it is made."""
    from app.cache.kept_lists import KeptList, KeptLists

    memory = QueryMemory(limit=10 * 1024 * 1024)
    lists = KeptLists(memory)
    for n in range(20):
        lists.keep("key", KeptList((), str(n), b"x" * 1000, (0, 1000), "", None))
    assert len(lists) == 1 and 1000 <= memory.used < 2000
    lists.keep("other", KeptList((), "0", b"y" * 500, (0, 500), "", None))
    assert 1500 <= memory.used < 2500
    lists.clear()
    assert memory.used == 0


# Dashboards' answers: kept by the same marks (before, per resourceVersion: made anew after
# any change anywhere in the resource).
DASHBOARDS = (f"/api/v1/namespaces/{NS}/configmaps?summary=metadata.labels.app,data.n",
              f"/api/v1/namespaces/{NS}/configmaps?sortBy=-metadata.name&limit=2",
              f"/api/v1/namespaces/{NS}/configmaps?filter=data.n=0&labelSelector=app%3Dweb",
              f"/api/v1/namespaces/{NS}/configmaps?fields=data.n&sortBy=metadata.name")


@pytest.mark.parametrize("path", DASHBOARDS)
def test_a_dashboards_answer_is_kept_through_writes_elsewhere_and_renewed(cluster, path):
    with run_gateway(cluster) as gw:
        first = httpx.get(gw.url + path).json()
        _seen(gw, cluster.patch(f"/api/v1/namespaces/{OTHER}/configmaps/cm-1",
                                {"data": {"n": "1"}}))
        hits = _entry(gw).lists.hits
        again = httpx.get(gw.url + path).json()
        assert _entry(gw).lists.hits == hits + 1, "sent from the kept answer"
        assert int(again["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
        assert again == _fresh(gw, path)
        first.pop("metadata"), again.pop("metadata")
        assert again == first


@pytest.mark.parametrize("path", DASHBOARDS)
def test_a_write_under_a_dashboards_buckets_is_in_its_next_answer(cluster, path):
    with run_gateway(cluster) as gw:
        httpx.get(gw.url + path)
        _seen(gw, cluster.patch(f"/api/v1/namespaces/{NS}/configmaps/cm-3",
                                {"data": {"n": "7"}}))
        answer = httpx.get(gw.url + path).json()
        assert answer == _fresh(gw, path)
        assert "7" in orjson.dumps(answer).decode() or "filter" in path


def test_a_large_answer_to_a_caller_that_accepts_gzip_is_sent_compressed_from_the_kept_one(
        cluster):
    for n in range(40):
        cluster.create(f"/api/v1/namespaces/{NS}/configmaps", {"metadata": {
            "name": f"big-{n}", "labels": {"app": "big"}}, "data": {"blob": "x" * 4000}})
    path = f"/api/v1/namespaces/{NS}/configmaps?labelSelector=app%3Dbig"
    gzip = {"Accept-Encoding": "gzip"}
    with run_gateway(cluster) as gw:
        plain = httpx.get(gw.url + path, headers={"Accept-Encoding": "identity"})
        assert len(plain.content) > 128 * 1024 and "content-encoding" not in plain.headers
        hits = _entry(gw).lists.hits
        first = httpx.get(gw.url + path, headers=gzip)
        assert _entry(gw).lists.hits == hits + 1
        assert first.headers["content-encoding"] == "gzip" and first.headers["vary"] == "Accept-Encoding"
        assert first.json() == plain.json()  # (httpx decompresses)
        again = httpx.get(gw.url + path, headers=gzip)
        assert _entry(gw).lists.hits == hits + 2
        assert again.json() == plain.json()
        kept = _entry(gw).lists.get(next(k for k in _entry(gw).lists._kept))
        assert kept.gzipped is not None and kept.gzipped[0] == plain.json()["metadata"]["resourceVersion"]
        _seen(gw, cluster.patch(f"/api/v1/namespaces/{NS}/configmaps/big-3",
                                {"data": {"blob": "y"}}))
        changed = httpx.get(gw.url + path, headers=gzip).json()
        assert changed == _fresh(gw, path)
        assert changed["items"][next(i for i, o in enumerate(changed["items"])
                                     if o["metadata"]["name"] == "big-3")]["data"] == {"blob": "y"}


def test_callers_asking_at_once_for_a_kept_answer_compressed_wait_for_one_compression(monkeypatch):
    """Fifty gzip callers at once each compressed the whole answer themselves (+1.36 GiB for a
    27 MiB answer); now the first makes it and the others wait for it."""
    import asyncio
    import gzip as gzip_module

    from app.cache import kept_lists
    from app.cache.kept_lists import KeptList, KeptLists

    made = []
    real = gzip_module.compress

    def counted(data, level=9):
        made.append(len(data))
        return real(data, level)

    monkeypatch.setattr(kept_lists.gzip, "compress", counted)
    lists = KeptLists(QueryMemory())
    head, whole = b'{"items":[', b'{"items":[' + b"x" * 200_000 + b"]}"
    kept = KeptList.of((), "7", head, whole, "", None)
    lists.keep("k", kept)

    async def scenario():
        first = await asyncio.gather(*(lists.compressed("k", kept, "7", (whole,))
                                       for _ in range(50)))
        later = await lists.compressed("k", kept, "8", (whole,))  # the version moved: made again
        return first, later

    first, later = asyncio.run(scenario())
    assert made == [len(whole), len(whole)]
    assert len({id(body) for body in first}) == 1 and kept.gzipped == ("8", later)
    assert gzip_module.decompress(first[0]) == whole
    assert not KeptLists.compresses(kept_lists.JOIN_BELOW + 1)
