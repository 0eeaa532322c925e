"""Merged streams under /clusters/*/: a watch and an event stream of several clusters at once,
each event tagged with its cluster and carrying a token that resumes every cluster exactly;
clusters taken in and let go while open (over in-memory clusters; three real API servers:
``tests/app/clusters/test_cluster_several_live.py``)."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import httpx
import orjson
import pytest

from app.cache.hub import EventHub
from app.query.selection import Selection
from app.streams.merged import Member, MergedStream
from control_plane.fake import FakeCluster
from informer_core.encoded import EncodedObject
from tests.app.conftest import clusters_file, run_fake_clusters
from tests.app.readers import LineReader, sse_events
from tests.helpers import wait_until

ANNOTATION = "kube-cache-gateway.io/cluster"
CM = "/api/v1/namespaces/{ns}/configmaps"
MERGED = "/clusters/*" + CM.format(ns="apps")


def _fake(*names: str) -> FakeCluster:
    fake = FakeCluster()
    fake.ensure_namespace("apps")
    for name in names:
        fake.create(CM.format(ns="apps"), {"metadata": {"name": name}})
    return fake


@pytest.fixture
def three(tmp_path):
    fakes = {"a": _fake("a1"), "b": _fake("b1", "b2"), "c": _fake("c1")}
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml", default="a") as gw:
        gw.fakes = fakes
        gw.path = tmp_path / "clusters.yaml"
        yield gw


def _versions(token: str) -> dict[str, str]:
    assert token.startswith("kcg1."), token
    body = token[5:]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


def _watch_events(lines: list[str]) -> list[tuple[str, str, str]]:
    out = []
    for line in lines:
        if line.strip():
            doc = orjson.loads(line)
            meta = doc["object"].get("metadata", {})
            out.append((doc["type"], (meta.get("annotations") or {}).get(ANNOTATION, ""),
                        meta.get("name", "")))
    return out


def _sse_changes(lines: list[str]) -> list[tuple[str, str, str]]:
    out = []
    for e in sse_events(lines):
        if e.get("event") in ("ADDED", "MODIFIED", "DELETED"):
            meta = orjson.loads(e["data"])["metadata"]
            out.append((e["event"], meta["annotations"][ANNOTATION], meta["name"]))
    return out


def _seen(gw, cluster: str, obj: dict) -> None:
    """Wait until ``cluster``'s cache holds ``obj`` at its version (or, deleted, not at all)."""
    meta = obj["metadata"]
    url = f"{gw.url}/clusters/{cluster}{CM.format(ns=meta['namespace'])}"

    def there() -> bool:
        names = {i["metadata"]["name"]: i["metadata"]["resourceVersion"]
                 for i in httpx.get(url).json()["items"]}
        return int(names.get(meta["name"], 0)) >= int(meta["resourceVersion"])

    wait_until(there, 10, message=f"{cluster} to see {meta['name']}")


def test_a_merged_watch_starts_with_every_clusters_objects_then_follows_all_of_them(three):
    reader = LineReader(three.url + MERGED + "?watch=true")
    try:
        reader.wait_for(lambda l: len(l) == 4)
        assert sorted(_watch_events(reader.lines)) == [
            ("ADDED", "a", "a1"), ("ADDED", "b", "b1"), ("ADDED", "b", "b2"), ("ADDED", "c", "c1")]
        three.fakes["c"].create(CM.format(ns="apps"), {"metadata": {"name": "c2"}})
        reader.wait_for(lambda l: len(l) == 5)
        three.fakes["a"].patch(CM.format(ns="apps") + "/a1", {"data": {"x": "1"}})
        reader.wait_for(lambda l: len(l) == 6)
        three.fakes["b"].delete(CM.format(ns="apps") + "/b2")
        reader.wait_for(lambda l: len(l) == 7)
        assert _watch_events(reader.lines)[4:] == [
            ("ADDED", "c", "c2"), ("MODIFIED", "a", "a1"), ("DELETED", "b", "b2")]
        last = orjson.loads(reader.lines[-1])["object"]["metadata"]["resourceVersion"]
        assert sorted(_versions(last)) == ["a", "b", "c"], "every object's version names them all"
    finally:
        reader.close()


def test_a_merged_watch_resumes_every_cluster_exactly_from_a_token(three):
    listed = httpx.get(three.url + MERGED).json()
    token = listed["metadata"]["resourceVersion"]
    fakes = three.fakes
    made = [("a", fakes["a"].create(CM.format(ns="apps"), {"metadata": {"name": "a2"}})),
            ("b", fakes["b"].patch(CM.format(ns="apps") + "/b1", {"data": {"y": "2"}})),
            ("c", fakes["c"].create(CM.format(ns="apps"), {"metadata": {"name": "c2"}}))]
    fakes["c"].delete(CM.format(ns="apps") + "/c1")
    for cluster, obj in made:
        _seen(three, cluster, obj)
    reader = LineReader(three.url + MERGED + f"?watch=true&resourceVersion={token}")
    try:
        reader.wait_for(lambda l: len(l) >= 4)
        time.sleep(0.3)  # room for anything that should not come
        got = _watch_events(reader.lines)
        assert sorted(got) == [("ADDED", "a", "a2"), ("ADDED", "c", "c2"), ("DELETED", "c", "c1"),
                               ("MODIFIED", "b", "b1")], "exactly the missed events, none twice"
        last = orjson.loads(reader.lines[-1])["object"]["metadata"]["resourceVersion"]
    finally:
        reader.close()
    fakes["b"].create(CM.format(ns="apps"), {"metadata": {"name": "b3"}})
    after = LineReader(three.url + MERGED + f"?watch=true&resourceVersion={last}")
    try:
        after.wait_for(lambda l: len(l) >= 1)
        time.sleep(0.3)
        assert _watch_events(after.lines) == [("ADDED", "b", "b3")], "from an event's token: the rest"
    finally:
        after.close()


def test_a_token_too_old_for_one_cluster_is_410_and_a_token_not_ours_400(three):
    token = httpx.get(three.url + MERGED).json()["metadata"]["resourceVersion"]
    versions = _versions(token)
    versions["b"] = "1"  # older than anything b can resume from
    old = "kcg1." + base64.urlsafe_b64encode(json.dumps(versions).encode()).decode().rstrip("=")
    reader = LineReader(three.url + MERGED + f"?watch=true&resourceVersion={old}")
    try:
        assert reader.ended(), "the watch ends after its ERROR"
        (line,) = [l for l in reader.lines if l.strip()]
        doc = orjson.loads(line)
        assert doc["type"] == "ERROR" and doc["object"]["code"] == 410
        assert "cluster b" in doc["object"]["message"]
    finally:
        reader.close()
    bad = httpx.get(three.url + MERGED, params={"watch": "true", "resourceVersion": "42"})
    assert bad.status_code == 400


def _token(versions: dict[str, str]) -> str:
    return "kcg1." + base64.urlsafe_b64encode(json.dumps(versions).encode()).decode().rstrip("=")


def test_a_forged_token_is_refused_or_dropped_never_echoed_on_every_event(three):
    """A token naming thousands of made-up clusters was kept and echoed on every event (a watch's
    events grew to its ~64 KB; an SSE stream over 601 objects sent 576 MB in 20 s): one naming
    more clusters than the gateway could is 400, a few unknown ones (removed since) are dropped,
    and an SSE id that is no token of ours starts afresh, echoing at most 128 characters."""
    token = httpx.get(three.url + MERGED).json()["metadata"]["resourceVersion"]
    versions = _versions(token)
    forged = _token({**versions, **{f"made-up-{i}": "1" for i in range(3000)}})  # 64 KB
    in_a_query = _token({**versions, **{f"m-{i}": "1" for i in range(200)}})  # within 8 KB
    for params in ({"resourceVersion": in_a_query}, {"watch": "true", "resourceVersion": in_a_query}):
        refused = httpx.get(three.url + MERGED, params=params)
        assert refused.status_code == 400, refused.text[:200]
        assert len(refused.content) < 1000
    few = _token({**versions, **{f"gone-{i}": "1" for i in range(5)}})
    reader = LineReader(three.url + MERGED + f"?watch=true&resourceVersion={few}")
    try:
        three.fakes["b"].create(CM.format(ns="apps"), {"metadata": {"name": "b-new"}})
        reader.wait_for(lambda l: len(l) >= 1)
        event = orjson.loads(reader.lines[0])
        assert event["object"]["metadata"]["name"] == "b-new"
        assert set(_versions(event["object"]["metadata"]["resourceVersion"])) == {"a", "b", "c"}
    finally:
        reader.close()
    reader = LineReader(three.url + MERGED, headers={"Accept": "text/event-stream",
                                                     "Last-Event-ID": forged})
    try:
        reader.wait_for(lambda l: any(x.startswith("id:") for x in l))
        ids = [x[3:].strip() for x in reader.lines if x.startswith("id:")]
        assert all(len(i) < 1000 for i in ids), "no id carries the forged token"
        assert sum(len(x) for x in reader.lines) < 5000, "a fresh state of four objects"
    finally:
        reader.close()


def test_a_merged_event_stream_resumes_from_last_event_id_with_exactly_the_missed_events(three):
    headers = {"Accept": "text/event-stream"}
    reader = LineReader(three.url + MERGED, headers)
    try:
        reader.wait_for(lambda l: any(e.get("event") == "SYNCED" for e in sse_events(l)))
        kinds = [e["event"] for e in sse_events(reader.lines) if "event" in e]
        assert kinds == ["ADDED"] * 4 + ["SYNCED"]
        synced = [e for e in sse_events(reader.lines) if e.get("event") == "SYNCED"][0]
        assert sorted(_versions(synced["id"])) == ["a", "b", "c"]
        three.fakes["b"].create(CM.format(ns="apps"), {"metadata": {"name": "b3"}})
        reader.wait_for(lambda l: ("ADDED", "b", "b3") in _sse_changes(l))
        last_id = [e for e in sse_events(reader.lines) if "id" in e][-1]["id"]
    finally:
        reader.close()
    fakes = three.fakes
    fakes["a"].delete(CM.format(ns="apps") + "/a1")
    fakes["c"].patch(CM.format(ns="apps") + "/c1", {"data": {"z": "1"}})
    fakes["b"].create(CM.format(ns="apps"), {"metadata": {"name": "b4"}})
    resumed = LineReader(three.url + MERGED, {**headers, "Last-Event-ID": last_id})
    try:
        resumed.wait_for(lambda l: len(_sse_changes(l)) >= 3)
        time.sleep(0.3)
        assert sorted(_sse_changes(resumed.lines)) == [
            ("ADDED", "b", "b4"), ("DELETED", "a", "a1"), ("MODIFIED", "c", "c1")]
        assert not any(e.get("event") in ("RESET", "SYNCED") for e in sse_events(resumed.lines))
    finally:
        resumed.close()
    unknown = LineReader(three.url + MERGED, {**headers, "Last-Event-ID": "deadbeef.12"})
    try:
        unknown.wait_for(lambda l: any(e.get("event") == "SYNCED" for e in sse_events(l)))
        kinds = [e["event"] for e in sse_events(unknown.lines) if "event" in e]
        assert kinds[0] == "RESET" and kinds[-1] == "SYNCED" and kinds.count("ADDED") == 5
    finally:
        unknown.close()


def test_the_id_on_synced_resumes_every_cluster_exactly(three):
    """An EventSource that reconnects before the first live event sends SYNCED's id: it once
    named "" for every cluster (made before the state was sent), so the resume was RESET and
    the whole state again. Now it names each cluster's position and resumes exactly."""
    headers = {"Accept": "text/event-stream"}
    reader = LineReader(three.url + MERGED, headers)
    try:
        reader.wait_for(lambda l: any(e.get("event") == "SYNCED" for e in sse_events(l)))
        synced = [e for e in sse_events(reader.lines) if e.get("event") == "SYNCED"][0]
    finally:
        reader.close()
    assert all(_versions(synced["id"]).values()), synced["id"]
    three.fakes["c"].create(CM.format(ns="apps"), {"metadata": {"name": "c-after"}})
    resumed = LineReader(three.url + MERGED, {**headers, "Last-Event-ID": synced["id"]})
    try:
        resumed.wait_for(lambda l: _sse_changes(l))
        time.sleep(0.3)
        assert _sse_changes(resumed.lines) == [("ADDED", "c", "c-after")]
        assert not any(e.get("event") in ("RESET", "SYNCED") for e in sse_events(resumed.lines))
    finally:
        resumed.close()


def test_a_merged_watch_list_sends_every_clusters_state_then_its_end_then_live_events(three):
    """client-go's watch-list under /clusters/*/: the state of every cluster as ADDED, one
    BOOKMARK annotated k8s.io/initial-events-end at the stream's token, then live events; the
    token resumes every cluster exactly."""
    params = "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan" \
             "&allowWatchBookmarks=true"
    reader = LineReader(three.url + MERGED + params)
    try:
        reader.wait_for(lambda l: any('"BOOKMARK"' in x for x in l))
        events = [orjson.loads(x) for x in reader.lines if x.strip()]
        assert [e["type"] for e in events] == ["ADDED"] * 4 + ["BOOKMARK"]
        assert all(e["object"]["kind"] == "ConfigMap" for e in events)
        mark = events[-1]["object"]["metadata"]
        assert mark["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert sorted(_versions(mark["resourceVersion"])) == ["a", "b", "c"]
        assert all(_versions(mark["resourceVersion"]).values())
        three.fakes["b"].create(CM.format(ns="apps"), {"metadata": {"name": "b-live"}})
        reader.wait_for(lambda l: ("ADDED", "b", "b-live") in _watch_events(l))
    finally:
        reader.close()
    three.fakes["c"].create(CM.format(ns="apps"), {"metadata": {"name": "c-later"}})
    resumed = LineReader(three.url + MERGED + f"?watch=true&resourceVersion={mark['resourceVersion']}")
    try:
        resumed.wait_for(lambda l: len(l) >= 2)
        time.sleep(0.3)
        assert sorted(_watch_events(resumed.lines)) == [("ADDED", "b", "b-live"),
                                                        ("ADDED", "c", "c-later")]
    finally:
        resumed.close()
    refused = httpx.get(three.url + MERGED, params={"watch": "true", "sendInitialEvents": "true"})
    assert refused.status_code == 422


def test_a_cluster_added_while_open_comes_as_added_and_one_removed_as_deleted(three):
    three.fakes["d"] = _fake("d1", "d2")
    reader = LineReader(three.url + MERGED, {"Accept": "text/event-stream"})
    watch = LineReader(three.url + MERGED + "?watch=true")
    try:
        reader.wait_for(lambda l: any(e.get("event") == "SYNCED" for e in sse_events(l)))
        watch.wait_for(lambda l: len(l) == 4)
        clusters_file(three.path, ["a", "b", "c", "d"], default="a")
        reader.wait_for(lambda l: ("ADDED", "d", "d2") in _sse_changes(l))
        watch.wait_for(lambda l: ("ADDED", "d", "d2") in _watch_events(l))
        named = [orjson.loads(e["data"]) for e in sse_events(reader.lines)
                 if e.get("event") == "SYNCED"]
        assert [n.get("cluster") for n in named] == [None, "d"], "d's state, then SYNCED naming it"
        clusters_file(three.path, ["a", "c", "d"], default="a")
        reader.wait_for(lambda l: ("DELETED", "b", "b2") in _sse_changes(l))
        watch.wait_for(lambda l: ("DELETED", "b", "b2") in _watch_events(l))
        deleted = [orjson.loads(e["data"]) for e in sse_events(reader.lines)
                   if e.get("event") == "DELETED"]
        assert sorted(d["metadata"]["name"] for d in deleted) == ["b1", "b2"]
        assert all(set(d) == {"apiVersion", "kind", "metadata"} and "data" not in d
                   for d in deleted), "only what names the objects of a cluster let go"
        last_id = [e for e in sse_events(reader.lines) if "id" in e][-1]["id"]
        assert sorted(_versions(last_id)) == ["a", "c", "d"]
        three.fakes["c"].create(CM.format(ns="apps"), {"metadata": {"name": "c9"}})
        reader.wait_for(lambda l: ("ADDED", "c", "c9") in _sse_changes(l))
        assert not reader.ended(0.1), "the stream goes on"
    finally:
        reader.close()
        watch.close()


def test_fields_and_selectors_apply_to_every_cluster_and_keep_the_cluster(three):
    three.fakes["b"].patch(CM.format(ns="apps") + "/b1", {"metadata": {"labels": {"app": "x"}},
                                                          "data": {"k": "v"}})
    url = three.url + MERGED + "?watch=true&labelSelector=app%3Dx&fields=data.k"
    reader = LineReader(url)
    try:
        reader.wait_for(lambda l: len(l) >= 1)
        three.fakes["c"].patch(CM.format(ns="apps") + "/c1", {"metadata": {"labels": {"app": "x"}},
                                                              "data": {"k": "w"}})
        reader.wait_for(lambda l: len(l) >= 2)
        objects = [orjson.loads(l)["object"] for l in reader.lines if l.strip()]
        assert [(o["metadata"]["annotations"][ANNOTATION], o["data"]) for o in objects] == [
            ("b", {"k": "v"}), ("c", {"k": "w"})]
    finally:
        reader.close()


def test_a_cluster_that_serves_no_such_resource_and_a_get_by_name_are_refused(three):
    assert httpx.get(three.url + "/clusters/*/apis/example.com/v1/widgets",
                     params={"watch": "true"}).status_code == 404
    assert httpx.get(three.url + MERGED + "/a1", params={"watch": "true"}).status_code == 400
    assert httpx.get(three.url + MERGED, params={"watch": "true", "clusters": "zz"}).status_code == 404


# -- what the client holds of a cluster let go ------------------------------------------

def _obj(name: str, rv: int, labels: dict | None = None) -> EncodedObject:
    return EncodedObject.from_dict({"metadata": {"name": name, "namespace": "ns",
                                                 "resourceVersion": str(rv),
                                                 "labels": labels or {}}})


def test_holding_rewinds_the_view_to_the_last_event_sent():
    async def scenario():
        hub = EventHub(100)
        for i, name in enumerate(["x", "y", "z"], start=1):
            hub.apply("add", _obj(name, i), None, str(i))
        hub.mark_ready()

        class Entry:
            pass

        entry = Entry()
        entry.hub = hub
        member = Member.__new__(Member)
        member.entry = entry
        member.subscriber = type("S", (), {"selection": Selection(None)})()
        member.sent_seq = hub.seq
        # after the last event sent: y changed, z deleted, w added — none sent yet
        hub.apply("update", _obj("y", 4), hub.view["ns/y"], "4")
        hub.apply("delete", hub.view["ns/z"], None, "5")
        hub.apply("add", _obj("w", 6), None, "6")
        held = MergedStream.holding(None, member)
        assert [(o.name, o.resource_version) for o in held] == [("x", "1"), ("y", "2"), ("z", "3")]
        member.sent_seq = hub.seq
        assert [o.name for o in MergedStream.holding(None, member)] == ["w", "x", "y"]

    asyncio.run(scenario())


def test_rights_lost_in_one_cluster_let_it_go_and_rights_regained_take_it_back(tmp_path):
    """alice watches every cluster; her rights in b are withdrawn: b's objects come as DELETED
    carrying only their names, a goes on; granted again, b comes back as ADDED. A review in
    c that takes seconds holds back none of a's events."""
    from tests.app.fake_reviewer import TableReviewer

    alice = {"username": "alice", "groups": ["system:authenticated"]}
    every = {("alice", "watch", "configmaps", "apps")}
    reviewers = {"a": TableReviewer({"t-alice": alice}, every), "b": TableReviewer({}, every),
                 "c": TableReviewer({}, every)}
    fakes = {"a": _fake("a1"), "b": _fake("b1", "b2"), "c": _fake("c1")}
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml", default="a", reviewers=reviewers,
                           authz="kubernetes", authz_cache_ttl=0.0,
                           authz_deny_cache_ttl=0.0) as gw:
        reader = LineReader(gw.url + MERGED, {"Accept": "text/event-stream",
                                              "Authorization": "Bearer t-alice"})
        try:
            reader.wait_for(lambda l: any(e.get("event") == "SYNCED" for e in sse_events(l)))
            assert len(_sse_changes(reader.lines)) == 4
            reviewers["b"].allowed = set()
            reader.wait_for(lambda l: ("DELETED", "b", "b2") in _sse_changes(l))
            deleted = [orjson.loads(e["data"]) for e in sse_events(reader.lines)
                       if e.get("event") == "DELETED"]
            assert sorted(d["metadata"]["name"] for d in deleted) == ["b1", "b2"]
            assert all("data" not in d and "resourceVersion" not in d["metadata"] for d in deleted)
            reviewers["c"].delay = 3.0  # c's reviews now take seconds
            asked = len(reviewers["c"].access_reviews)
            wait_until(lambda: len(reviewers["c"].access_reviews) > asked, 10,
                       message="c's next check under way")
            fakes["a"].create(CM.format(ns="apps"), {"metadata": {"name": "a2"}})
            began = time.monotonic()
            reader.wait_for(lambda l: ("ADDED", "a", "a2") in _sse_changes(l))
            assert time.monotonic() - began < 1.5, "a's event did not wait for c's review"
            reviewers["c"].delay = 0.0
            reviewers["b"].allowed = every
            reader.wait_for(lambda l: _sse_changes(l).count(("ADDED", "b", "b1")) == 2, 15)
            assert not reader.ended(0.1)
        finally:
            reader.close()


def test_a_merged_stream_ends_when_its_client_goes_with_no_heartbeat_due(tmp_path):
    """As a cluster's own stream: the gateway's protocol tells it (``StreamBody``); no task
    listens for the client, and no heartbeat comes to find the connection gone."""
    import socket

    fakes = {"a": _fake("a1"), "b": _fake("b1")}
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml", heartbeat_interval=3600.0,
                           bookmark_interval=3600.0) as gw:
        host, port = gw.url.removeprefix("http://").split(":")
        conn = socket.create_connection((host, int(port)), timeout=10)
        conn.sendall(f"GET {MERGED}?watch=true HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        data = b""
        while data.count(b'"ADDED"') < 2:
            more = conn.recv(65536)
            assert more, data
            data += more
        assert gw.gateway.limiter.open == 1
        conn.close()
        wait_until(lambda: gw.gateway.limiter.open == 0, 3, message="the merged stream to end")
        assert not any(e.hub.subscribers for c in gw.gateway.clusters.values()
                       for e in c.caches.entries().values())
