"""Dashboard queries over HTTP (in-memory cluster): filter, sortBy, fields, summary, their
paging, errors and streams (sameness with the real API server's objects: ``_live``)."""

from __future__ import annotations

import urllib.parse

import httpx
import orjson
import pytest

from tests.app.readers import LineReader, sse_events

PODS = "/core/v1/namespaces/demo-shop/pods"


def q(**params) -> str:
    return urllib.parse.urlencode(params, doseq=True)


def names(body: dict) -> list[str]:
    return [o["metadata"]["name"] for o in body["items"]]


@pytest.mark.parametrize("filters,expected", [
    (["status.phase=Running"], {"web-1", "web-2", "old-web", "api-1"}),
    (["status.phase!=Running", "metadata.name~API"], {"api-2"}),
    (["spec.containers.*.image~api:2"], {"api-1"}),
    (["status.containerStatuses.0.restartCount>1"], {"web-2", "api-1"}),
    (["metadata.labels[app] in (web,migrate)"], {"web-1", "web-2", "old-web", "migrate-7x2k"}),
])
def test_filters_after_selectors(http, filters, expected):
    got = http.get(f"{PODS}?{q(filter=filters)}")
    assert got.status_code == 200, got.text
    assert set(names(got.json())) == expected
    both = http.get(f"{PODS}?{q(filter=filters, labelSelector='app=web')}").json()
    assert set(names(both)) == expected & {"web-1", "web-2", "old-web"}


def test_sorted_pages_walk_every_object_once(http):
    everything = names(http.get(f"{PODS}?{q(sortBy='-metadata.name')}").json())
    assert everything == sorted(everything, reverse=True) and len(everything) > 4
    seen, token, remaining = [], "", []
    while True:
        body = http.get(f"{PODS}?{q(sortBy='-metadata.name', limit=2, **({'continue': token} if token else {}))}").json()
        seen += names(body)
        remaining.append(body["metadata"].get("remainingItemCount"))
        token = body["metadata"].get("continue", "")
        if not token:
            break
    assert seen == everything
    assert remaining[0] == len(everything) - 2 and remaining[-1] is None


def test_projection_keeps_identity_and_the_named_fields(http):
    body = http.get(f"{PODS}?{q(fields='status.phase,spec.containers.0.image')}").json()
    item = next(o for o in body["items"] if o["metadata"]["name"] == "api-1")
    assert item == {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "api-1", "namespace": "demo-shop",
                                 "resourceVersion": item["metadata"]["resourceVersion"]},
                    "spec": {"containers": [{"image": "shop/api:2.1"}]},
                    "status": {"phase": "Running"}}


def test_summary_counts_the_selected_objects(http):
    body = http.get(f"{PODS}?{q(summary='status.phase,metadata.labels.app', labelSelector='tier')}")
    doc = body.json()
    assert doc["kind"] == "Summary" and doc["apiVersion"] == "v1"
    assert doc["total"] == sum(doc["counts"]["status.phase"].values())
    full = http.get(f"{PODS}?labelSelector=tier").json()["items"]
    assert doc["total"] == len(full)
    phases: dict[str, int] = {}
    for o in full:
        phases[o["status"].get("phase", "")] = phases.get(o["status"].get("phase", ""), 0) + 1
    assert doc["counts"]["status.phase"] == phases


@pytest.mark.parametrize("params,word", [
    ({"filter": "status.phase"}, "filter"),
    ({"filter": "status.phase in Running"}, "filter"),
    ({"sortBy": "a,,b"}, "sortBy"),
    ({"fields": "spec.*.x"}, "fields"),
    ({"summary": "status..phase"}, "summary"),
    ({"filter": ["a=b"] * 33}, "filter"),
    ({"sortBy": "metadata.name", "limit": "1", "continue": "eyJ2IjoxLCJrIjoiYSIsInEiOiJ4In0"},
     "continue"),
])
def test_malformed_queries_are_400_status(http, params, word):
    got = http.get(f"{PODS}?{q(**params)}")
    assert got.status_code == 400, got.text
    body = got.json()
    assert body["kind"] == "Status" and body["reason"] == "BadRequest" and word in body["message"]


def test_a_forged_place_in_a_continue_token_is_400(http):
    first = http.get(f"{PODS}?{q(sortBy='status.phase', limit=1)}").json()
    import base64

    token = first["metadata"]["continue"]
    doc = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    doc["p"] = [["x"], 1]
    forged = base64.urlsafe_b64encode(orjson.dumps(doc)).decode()
    got = http.get(f"{PODS}?{q(sortBy='status.phase', limit=1, **{'continue': forged})}")
    assert got.status_code == 400 and "sort order" in got.json()["message"]


def test_empty_parameters_mean_none(http):
    plain = names(http.get(PODS).json())
    assert names(http.get(f"{PODS}?sortBy=&fields=&filter=&summary=").json()) == plain


def _sse(reader: LineReader) -> list[dict]:
    return [e for e in sse_events(reader.lines) if e.get("event") in ("ADDED", "MODIFIED", "DELETED")]


def test_streams_filter_with_transitions_and_project(gateway, kube):
    path = f"{PODS}?{q(filter='status.phase=Pending', fields='status.phase')}"
    reader = LineReader(gateway.url + path, headers={"Accept": "text/event-stream"})
    try:
        reader.wait_for(lambda lines: "event: SYNCED" in lines)
        initial = _sse(reader)
        assert {orjson.loads(e["data"])["metadata"]["name"] for e in initial} == {"api-2"}
        assert all(set(orjson.loads(e["data"])) == {"apiVersion", "kind", "metadata", "status"}
                   for e in initial)
        kube.patch("/api/v1/namespaces/demo-shop/pods/web-1/status", {"status": {"phase": "Pending"}})
        kube.patch("/api/v1/namespaces/demo-shop/pods/web-1/status", {"status": {"phase": "Running"}})
        reader.wait_for(lambda lines: [e["event"] for e in _sse(reader)][-2:] == ["ADDED", "DELETED"])
        came, went = _sse(reader)[-2:]
        assert orjson.loads(came["data"])["status"] == {"phase": "Pending"}
        assert orjson.loads(came["data"])["metadata"]["name"] == "web-1"
        assert set(orjson.loads(went["data"])) == {"apiVersion", "kind", "metadata", "status"}
        assert orjson.loads(went["data"])["metadata"]["name"] == "web-1"
    finally:
        reader.close()


def test_watch_filters_and_projects(gateway, kube):
    url = f"{gateway.url}{PODS}?{q(watch='true', filter='metadata.name~web-', fields='status.phase', timeoutSeconds='2')}"
    with httpx.stream("GET", url, timeout=10) as response:
        lines = [orjson.loads(line) for line in response.iter_lines() if line]
    assert {e["object"]["metadata"]["name"] for e in lines} == {"web-1", "web-2"}
    assert all(e["type"] == "ADDED" for e in lines)
    assert all(set(e["object"]) <= {"apiVersion", "kind", "metadata", "status"} for e in lines)


def test_a_kept_answer_follows_every_change(http, kube):
    """A kept answer is let go with any write under its buckets: the first request after a
    change sees it."""
    path = "/api/v1/namespaces/demo-shop/pods/report-1/status"
    for phase in ("Running", "Failed"):
        written = kube.patch(path, {"status": {"phase": phase}})["metadata"]["resourceVersion"]
        for query in ("summary=status.phase", "fields=status.phase", "sortBy=status.phase"):
            body = http.get(f"{PODS}?{query}&resourceVersion={written}").json()
            if "counts" in body:
                before = 5 if phase == "Running" else 4  # report-1 is the one Failed pod
                assert body["counts"]["status.phase"].get("Running") == before, query
            else:
                report = next(o for o in body["items"] if o["metadata"]["name"] == "report-1")
                assert report["status"]["phase"] == phase, query


def test_fifty_distinct_queries_keep_at_most_a_few_times_what_the_objects_cost():
    """Before: 50 distinct queries (half over ``*`` paths) on 2,000 Pods kept +189 MiB, where
    the Pods cost +24 MiB (decoded subtrees kept per path, no budget across paths)."""
    import gc
    import tracemalloc

    import httpx

    from bench.seed import pod
    from control_plane.fake import FakeCluster
    from tests.app.conftest import run_gateway

    fake = FakeCluster()
    for i in range(100):
        fake.ensure_namespace(f"bench-{i:03d}")
    for i in range(2000):
        body = pod(i)
        fake.create(f"/api/v1/namespaces/{body['metadata']['namespace']}/pods", body)
    queries = []
    for i in range(25):
        queries.append(f"filter=spec.containers.*.image~{i}&filter=status.*~{i}")
        queries.append([f"filter=spec~{i}", f"sortBy=-status.startTime,spec.nodeName&filter=metadata.name~{i}",
                        f"fields=spec.containers.{i % 2}.image,status.phase&limit={i + 1}",
                        f"summary=spec.nodeName,status.phase&filter=metadata.uid~{i}",
                        f"filter=metadata.labels.app={i}"][i % 5])
    tracemalloc.start()
    try:
        gc.collect()
        base = tracemalloc.get_traced_memory()[0]
        with run_gateway(fake) as gateway, httpx.Client(base_url=gateway.url, timeout=60) as http:
            assert http.get("/api/v1/pods?limit=1").status_code == 200  # loaded
            gc.collect()
            loaded = tracemalloc.get_traced_memory()[0]
            for query in queries:
                assert http.get(f"/api/v1/pods?{query}").status_code == 200, query
            assert http.get("/api/v1/pods?filter=*~x").status_code == 400  # no field named
            gc.collect()
            queried = tracemalloc.get_traced_memory()[0]
            memory = gateway.gateway.query_memory
            assert memory.used <= memory.limit
    finally:
        tracemalloc.stop()
    objects, kept = loaded - base, queried - loaded
    print(f"\nqueries kept {kept / 2**20:.1f} MiB; the objects cost {objects / 2**20:.1f} MiB")
    assert kept < 3 * objects, f"queries kept {kept / 2**20:.1f} MiB; the objects cost {objects / 2**20:.1f}"


@pytest.mark.parametrize("params", ["summary=metadata.namespace,status.phase",
                                    "sortBy=metadata.name&filter=metadata.namespace=ns-1"])
def test_work_over_many_objects_sets_off_no_collection(params):
    """Left to the collector, a column read without parsing (a list per object) set off full
    collections that walk the whole cache: 47-63 ms each at 50,000 Pods."""
    import asyncio
    import gc

    from app.cache.query_engine import QueryEngine
    from app.kube.request import parse_query
    from informer_core.encoded import EncodedObject

    objects = [EncodedObject.from_dict({"metadata": {"namespace": f"ns-{i % 3}", "name": f"p-{i:05d}",
                                                     "resourceVersion": str(i + 1)},
                                        "status": {"phase": "Running"}}) for i in range(20_000)]
    query = parse_query(params, 4096)
    engine = QueryEngine()
    collections, working = [], []
    evaluate = engine.evaluate

    def watched(*args):
        working.append(True)
        try:
            return evaluate(*args)
        finally:
            working.pop()

    def seen(phase, info):
        if phase == "start" and working:
            collections.append(info["generation"])

    engine.evaluate = watched

    async def answer(version):
        return await engine.result(objects, query, params, version)

    gc.callbacks.append(seen)
    try:
        for version in ("1", "2"):  # the first read fills the columns; the second reads them
            result = asyncio.run(answer(version))
    finally:
        gc.callbacks.remove(seen)
    if query.summary is not None:
        counts = orjson.loads(result.summary)["counts"]
        assert counts["metadata.namespace"] == {"ns-0": 6667, "ns-1": 6667, "ns-2": 6666}
    else:
        assert len(result.objects) == 6667
    assert collections == [], f"collections of generations {sorted(set(collections))} ran"
