"""Tagged copies kept while their objects are unchanged: made once, made again for what
changed, and let go as the budget says."""

from __future__ import annotations

import time

import httpx

from app.cache.tagged_copies import TaggedCopies
from app.clusters.merging import tagged
from app.query.budget import QueryMemory
from control_plane.fake import FakeCluster
from informer_core.store import encode
from tests.app.conftest import run_fake_clusters

ANNOTATION = "kube-cache-gateway.io/cluster"


def _objects(n: int, version: int = 1) -> list:
    return [encode({"metadata": {"namespace": "ns", "name": f"o-{i}",
                                 "resourceVersion": str(version)}, "data": {"i": str(i)}})
            for i in range(n)]


def test_a_copy_is_made_once_per_object_version():
    copies = TaggedCopies(QueryMemory())
    objects = _objects(5)
    first = copies.of(objects, "east", tagged)
    assert first == [tagged(o.raw, "east") for o in objects]
    assert copies.made == 5
    assert copies.of(objects, "east", tagged) == first
    assert copies.made == 5
    changed = objects[:2] + _objects(5, version=2)[2:]  # three objects changed: new objects
    assert copies.of(changed, "east", tagged)[2:] == [tagged(o.raw, "east") for o in changed[2:]]
    assert copies.made == 8


def test_the_budget_lets_every_copy_go_and_they_are_made_again():
    memory = QueryMemory(limit=10_000_000)
    copies = TaggedCopies(memory)
    objects = _objects(50)
    copies.of(objects, "east", tagged)
    assert memory.used >= sum(len(tagged(o.raw, "east")) for o in objects)
    memory.charge("someone else", 10_000_000, lambda: None)  # past the limit: the oldest go
    assert len(copies) == 0 and memory.used <= 10_000_000
    copies.of(objects, "east", tagged)
    assert copies.made == 100
    assert ("tagged", id(copies)) in memory._items
    copies.clear()
    assert len(copies) == 0 and ("tagged", id(copies)) not in memory._items  # given back


def test_copies_past_half_the_budget_are_made_for_the_answer_and_not_kept():
    objects = _objects(50)
    each = len(tagged(objects[0].raw, "east")) + 120  # a copy and its entry, as charged
    memory = QueryMemory(limit=2 * 10 * each + 1)  # half of it holds ten copies
    copies = TaggedCopies(memory)
    assert copies.of(objects, "east", tagged) == [tagged(o.raw, "east") for o in objects]
    assert len(copies) == 10 and memory.used <= memory.limit // 2
    assert copies.of(objects, "east", tagged) == [tagged(o.raw, "east") for o in objects]
    assert copies.made == 50 + 40  # the ten kept ones reused, the rest made again
    changed = _objects(10, version=2)  # the kept ten changed: their old copies go
    assert copies.of(changed, "east", tagged) == [tagged(o.raw, "east") for o in changed]
    assert len(copies) == 10 and memory.used <= memory.limit // 2


def test_under_a_budget_of_one_byte_no_copy_is_kept():
    memory = QueryMemory(limit=1)
    copies = TaggedCopies(memory)
    objects = _objects(20)
    assert copies.of(objects, "east", tagged) == [tagged(o.raw, "east") for o in objects]
    assert len(copies) == 0 and memory.used == 0


def test_a_merged_list_asked_again_makes_copies_only_of_what_changed(tmp_path):
    path = "/api/v1/namespaces/apps/configmaps"
    fakes = {}
    for name in ("a", "b"):
        fake = fakes[name] = FakeCluster()
        fake.ensure_namespace("apps")
        for i in range(200):
            fake.create(path, {"metadata": {"name": f"{name}-{i}"}, "data": {"i": str(i)}})
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml", default="a") as gw:
        url = gw.url + "/clusters/*" + path
        first = httpx.get(url).json()
        entries = {n: next(iter(gw.gateway.clusters[n].caches.entries().values()))
                   for n in fakes}
        made = {n: e.tagged.made for n, e in entries.items()}
        assert made == {"a": 200, "b": 200}
        assert httpx.get(url).json()["items"] == first["items"]
        assert {n: e.tagged.made for n, e in entries.items()} == made
        changed = fakes["b"].patch(f"{path}/b-7", {"data": {"i": "changed"}})
        deadline = time.monotonic() + 5
        while True:
            items = httpx.get(url).json()["items"]
            found = next(i for i in items if i["metadata"]["name"] == "b-7")
            if found["metadata"]["resourceVersion"] == changed["metadata"]["resourceVersion"]:
                break
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert found["data"] == {"i": "changed"}
        assert found["metadata"]["annotations"] == {ANNOTATION: "b"}
        assert {n: e.tagged.made for n, e in entries.items()} == {"a": 200, "b": 201}
        assert [i for i in items if i["metadata"]["name"] != "b-7"] == \
            [i for i in first["items"] if i["metadata"]["name"] != "b-7"]
