"""The resource endpoint's HTTP semantics over an in-memory cluster: loading, selection, paging,
policy, bad input, negotiation, ETags, gzip, CORS (sameness with the real server: ``_live``)."""

from __future__ import annotations

import threading
import time

import httpx
import orjson
import pytest

from informer_core.store import object_key
from tests.app.conftest import run_gateway
from tests.helpers import wait_until

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def strip(obj: dict) -> dict:
    obj = dict(obj)
    obj["metadata"] = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    return obj


def same_objects(gateway_items: list[dict], api_items: list[dict]) -> None:
    """The same objects: (namespace, name, resourceVersion) and content, as docs/http-api.md says."""
    def key(o):
        m = o["metadata"]
        return (m.get("namespace", ""), m["name"], m["resourceVersion"])

    assert sorted(map(key, gateway_items)) == sorted(map(key, api_items))
    by_key = {key(o): strip(o) for o in api_items}
    for item in gateway_items:
        expected = by_key[key(item)]
        assert "managedFields" not in item["metadata"]
        assert {k: v for k, v in item.items() if k not in ("apiVersion", "kind")} == \
            {k: v for k, v in expected.items() if k not in ("apiVersion", "kind")}
        assert item["apiVersion"] and item["kind"]


@pytest.mark.parametrize("query,expected_names", [
    ("labelSelector=app%3Dweb", {"web-1", "web-2", "old-web"}),
    ("labelSelector=app+in+(web,api),tier!=front", {"api-1", "api-2"}),
    ("labelSelector=app%3Dweb&fieldSelector=metadata.name!%3Dold-web", {"web-1", "web-2"}),
    ("fieldSelector=status.phase%3DSucceeded", {"migrate-7x2k"}),
    ("fieldSelector=spec.containers.0.image%3Dshop/api:9.9-typo", {"api-2"}),
    ("labels[app]=api&labels[tier]=back", {"api-1", "api-2"}),
    ("labelSelector=tier%3Dback&labels[app]=api", {"api-1", "api-2"}),
    ("labelSelector=!tier", {"migrate-7x2k", "report-1"}),
])
def test_selectors(http, query, expected_names):
    got = http.get(f"/core/v1/namespaces/demo-shop/pods?{query}")
    assert got.status_code == 200, got.text
    assert {o["metadata"]["name"] for o in got.json()["items"]} == expected_names


def test_get_returns_the_object_and_404_names_what_is_missing(http, kube):
    got = http.get("/core/v1/namespaces/demo-shop/configmaps/settings")
    assert got.status_code == 200
    expected = strip(kube.get("/api/v1/namespaces/demo-shop/configmaps/settings"))
    assert got.json() == expected
    node = http.get("/core/v1/nodes/node-a")
    assert node.status_code == 200 and node.json()["metadata"]["name"] == "node-a"
    missing = http.get("/core/v1/namespaces/demo-shop/configmaps/nope")
    assert missing.status_code == 404
    status = missing.json()
    assert status["kind"] == "Status" and status["reason"] == "NotFound"
    assert status["details"] == {"name": "nope", "kind": "configmaps"}
    assert 'configmaps "nope" not found' == status["message"]


def test_pagination_walks_every_object_exactly_once_in_key_order(http, kube):
    expected = [o["metadata"]["name"] for o in kube.get("/api/v1/namespaces/demo-shop/pods")["items"]]
    seen, token, pages = [], None, 0
    while True:
        url = "/core/v1/namespaces/demo-shop/pods?limit=2" + (f"&continue={token}" if token else "")
        body = http.get(url).json()
        pages += 1
        seen += [o["metadata"]["name"] for o in body["items"]]
        token = body["metadata"].get("continue")
        if not token:
            break
        assert body["metadata"]["remainingItemCount"] == len(expected) - len(seen)
    assert seen == sorted(expected) and pages == (len(expected) + 1) // 2


def test_pagination_survives_changes_during_the_walk(gateway, http, kube):
    base = "/api/v1/namespaces/demo-shop/configmaps"
    first = http.get("/core/v1/namespaces/demo-shop/configmaps?limit=1").json()
    gateway.wait_seen(kube.create(base, {"metadata": {"name": "zz-added-during-walk"}}))
    names = [o["metadata"]["name"] for o in first["items"]]
    token = first["metadata"]["continue"]
    while token:
        body = http.get(f"/core/v1/namespaces/demo-shop/configmaps?limit=1&continue={token}").json()
        names += [o["metadata"]["name"] for o in body["items"]]
        token = body["metadata"].get("continue")
    kube.delete(f"{base}/zz-added-during-walk")
    assert len(names) == len(set(names)), "no object twice"
    assert {"feature-flags", "settings", "ticker"} <= set(names)


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_write_verbs_answer_405_status(http, method):
    got = http.request(method, "/core/v1/namespaces/demo-shop/configmaps/settings", content=b"{}")
    assert got.status_code == 405
    assert got.json()["reason"] == "MethodNotAllowed"
    assert "GET" in got.headers["allow"]


def test_405_comes_before_404_for_an_unknown_resource(http):
    assert http.post("/core/v1/nosuchthings").status_code == 405


def test_secrets_are_denied_but_listed_in_discovery(http, kube):
    for path in ("/core/v1/secrets", "/api/v1/namespaces/default/secrets",
                 "/api/v1/namespaces/default/secrets/x", "/api/v1/secrets?watch=true"):
        got = http.get(path)
        assert got.status_code == 403, path
        assert got.json()["reason"] == "Forbidden"
    names = [r["name"] for r in http.get("/api/v1").json()["resources"]]
    assert "secrets" in names


def test_status_codes_come_in_the_contract_order(http):
    # 405 before 404 (unknown resource) before 403 (denied) before 400 (bad parameter)
    # before 404 (unknown object).
    assert http.post("/core/v1/nosuchthings?labelSelector=a%3D%3D%3Db").status_code == 405
    assert http.get("/core/v1/nosuchthings?labelSelector=a%3D%3D%3Db").status_code == 404
    assert http.get("/core/v1/secrets?labelSelector=a%3D%3D%3Db&limit=x").status_code == 403
    assert http.get("/core/v1/namespaces/Bad_NS/secrets").status_code == 403
    assert http.get("/core/v1/namespaces/Bad_NS/configmaps/x?limit=-1").status_code == 400
    assert http.get("/core/v1/namespaces/demo-shop/configmaps/nope?limit=-1").status_code == 400
    assert http.get("/core/v1/namespaces/demo-shop/configmaps/nope").status_code == 404


def test_a_denied_resource_never_gets_an_informer(gateway, http):
    http.get("/core/v1/secrets")
    assert all(gvr.resource != "secrets" for gvr in gateway.gateway.default.factory.informers())


@pytest.mark.parametrize("path,code,needle", [
    ("/core/v1/nosuchthings", 404, "could not find the requested resource"),
    ("/nosuch.example.com/v1/things", 404, "could not find"),
    ("/core/v9/pods", 404, "could not find"),
    ("/api/v1/bindings", 405, "cannot be listed and watched"),
    ("/core/v1/pods?labelSelector=app%3D%3D%3Dweb", 400, "column"),
    ("/core/v1/pods?labelSelector=in+(x", 400, "labelSelector"),
    ("/core/v1/pods?fieldSelector=metadata.name", 400, "fieldSelector"),
    ("/core/v1/pods?fieldSelector=a%3Db\\x", 400, "escape"),
    ("/core/v1/pods?labels[bad%20key]=1", 400, "labelSelector"),
    ("/core/v1/pods?limit=ten", 400, "limit"),
    ("/core/v1/pods?limit=-1", 400, "negative"),
    ("/core/v1/pods?limit=1&continue=garbage!!", 400, "continue"),
    ("/core/v1/pods?watch=maybe", 400, "watch"),
    ("/core/v1/pods?watch=true&timeoutSeconds=soon", 400, "timeoutSeconds"),
    ("/core/v1/pods?watch=true&resourceVersion=abc", 400, "resourceVersion"),
    ("/core/v1/pods?includeObject=Everything", 400, "includeObject"),
    ("/core/v1/namespaces/Bad_NS/pods", 400, "namespace"),
    ("/core/v1/namespaces/demo-shop/pods/a%25b", 400, "name"),
    ("/core/v1/namespaces/demo-shop/pods/" + "x" * 300, 400, "name"),
    ("/core/v1/namespaces/demo-shop/pods/web-1/log", 404, "subresource"),
    ("/core/v1/namespaces/demo-shop/nodes", 404, "not namespaced"),
    ("/core/v1/pods/web-1", 404, "namespaced"),
])
def test_bad_input_gets_a_4xx_status_that_says_what_was_wrong(http, path, code, needle):
    got = http.get(path)
    assert got.status_code == code, (path, got.text)
    body = got.json()
    assert body["kind"] == "Status" and body["code"] == code and body["status"] == "Failure"
    assert needle.lower() in body["message"].lower()
    assert "Traceback" not in got.text


def test_over_long_query_is_414(http):
    got = http.get("/core/v1/pods?labelSelector=" + "a" * 9000)
    assert got.status_code == 414 and got.json()["reason"] == "RequestURITooLong"


@pytest.mark.parametrize("accept,code", [
    ("application/json", 200), ("*/*", 200), ("application/json, text/plain", 200),
    ("application/vnd.kubernetes.protobuf", 406), ("text/html", 406), ("application/yaml", 406),
    ("application/vnd.kubernetes.protobuf, application/json", 200),
    (TABLE, 200), ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", 200),
    ("application/json;as=Table;v=v9;g=meta.k8s.io", 406),
])
def test_accept_negotiation(http, accept, code):
    got = http.get("/core/v1/namespaces/demo-shop/configmaps", headers={"Accept": accept})
    assert got.status_code == code, got.text
    if code == 406:
        assert got.json()["reason"] == "NotAcceptable"


def test_etag_and_if_none_match(http, kube):
    first = http.get("/core/v1/namespaces/demo-shop/configmaps?labelSelector=demo%3Dyes")
    etag = first.headers["etag"]
    again = http.get("/core/v1/namespaces/demo-shop/configmaps?labelSelector=demo%3Dyes",
                     headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    kube.patch("/api/v1/namespaces/demo-shop/configmaps/settings", {"data": {"touched": str(time.time())}})
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        changed = http.get("/core/v1/namespaces/demo-shop/configmaps?labelSelector=demo%3Dyes",
                           headers={"If-None-Match": etag})
        if changed.status_code == 200:
            break
        time.sleep(0.05)
    assert changed.status_code == 200 and changed.headers["etag"] != etag


def test_large_answers_are_gzipped_when_asked(http, kube, namespace):
    kube.create_many(f"/api/v1/namespaces/{namespace}/configmaps",
                     [{"metadata": {"name": f"big-{i}"}, "data": {"blob": "x" * 4000}} for i in range(60)])
    url = f"/core/v1/namespaces/{namespace}/configmaps"
    deadline = time.monotonic() + 10
    while len(http.get(url).json()["items"]) < 60 and time.monotonic() < deadline:
        time.sleep(0.05)
    raw = httpx.get(http.base_url.join(url), headers={"Accept-Encoding": "gzip"})
    assert raw.headers.get("content-encoding") == "gzip"
    assert len(raw.json()["items"]) == 60  # httpx decompressed it
    small = http.get("/core/v1/namespaces/demo-shop/configmaps", headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in small.headers


def test_table_answers_for_lists_gets_and_include_object(http):
    table = http.get("/core/v1/namespaces/demo-shop/pods", headers={"Accept": TABLE}).json()
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"]][:5] == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert all(r["object"]["kind"] == "PartialObjectMetadata" for r in table["rows"])
    full = http.get("/core/v1/namespaces/demo-shop/pods?includeObject=Object", headers={"Accept": TABLE}).json()
    assert full["rows"][0]["object"]["kind"] == "Pod"
    none = http.get("/core/v1/namespaces/demo-shop/pods?includeObject=None", headers={"Accept": TABLE}).json()
    assert "object" not in none["rows"][0]
    one = http.get("/core/v1/namespaces/demo-shop/pods/api-1", headers={"Accept": TABLE}).json()
    assert one["rows"][0]["cells"][:4] == ["api-1", "1/2", "CrashLoopBackOff", 7]


def test_concurrent_first_requests_share_one_informer_and_one_wait(backend, kube, namespace):
    kube.create(f"/api/v1/namespaces/{namespace}/services",
                {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}})
    with run_gateway(backend) as gw:
        results: list[int] = []
        barrier = threading.Barrier(20)

        def ask():
            barrier.wait()
            results.append(httpx.get(f"{gw.url}/core/v1/namespaces/{namespace}/services", timeout=30).status_code)

        threads = [threading.Thread(target=ask) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [200] * 20
        informers = gw.gateway.default.factory.informers()
        assert [str(g) for g in informers] == ["services.v1"]
        stats = next(iter(informers.values())).informer().reflector_stats()
        assert stats.lists == 1


def test_sync_timeout_answers_503_with_retry_after_then_serves(backend):
    with run_gateway(backend, sync_timeout=0.001) as gw:
        first = httpx.get(f"{gw.url}/core/v1/serviceaccounts", timeout=30)
        assert first.status_code == 503
        assert first.headers["retry-after"] == "1" and first.json()["reason"] == "ServiceUnavailable"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            later = httpx.get(f"{gw.url}/core/v1/serviceaccounts", timeout=30)
            if later.status_code == 200:
                break
            time.sleep(0.05)
        assert later.status_code == 200


def test_allow_list_and_custom_deny(backend):
    with run_gateway(backend, allow=("configmaps", "deployments.apps"), deny=()) as gw:
        assert httpx.get(f"{gw.url}/core/v1/configmaps").status_code == 200
        assert httpx.get(f"{gw.url}/apps/v1/deployments").status_code == 200
        assert httpx.get(f"{gw.url}/core/v1/pods").status_code == 403
        assert httpx.get(f"{gw.url}/core/v1/secrets").status_code == 403


def test_cors_for_configured_origins_only(backend):
    with run_gateway(backend, cors_origins=("https://dash.example.com",)) as gw:
        allowed = httpx.get(f"{gw.url}/core/v1/namespaces/demo-shop/configmaps",
                            headers={"Origin": "https://dash.example.com"})
        assert allowed.headers["access-control-allow-origin"] == "https://dash.example.com"
        other = httpx.get(f"{gw.url}/core/v1/namespaces/demo-shop/configmaps",
                          headers={"Origin": "https://evil.example.com"})
        assert "access-control-allow-origin" not in other.headers
        preflight = httpx.options(f"{gw.url}/core/v1/configmaps", headers={
            "Origin": "https://dash.example.com", "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "Last-Event-ID"})
        assert preflight.status_code == 200
        assert "GET" in preflight.headers["access-control-allow-methods"]


def test_no_cors_headers_by_default(http):
    got = http.get("/core/v1/namespaces/demo-shop/configmaps", headers={"Origin": "https://x.example.com"})
    assert "access-control-allow-origin" not in got.headers


def test_namespace_scoped_gateway(backend):
    with run_gateway(backend, namespace="demo-shop") as gw:
        pods = httpx.get(f"{gw.url}/core/v1/pods").json()["items"]
        assert pods and {p["metadata"]["namespace"] for p in pods} == {"demo-shop"}
        other = httpx.get(f"{gw.url}/core/v1/namespaces/default/pods")
        assert other.status_code == 403


def test_a_gateway_stops_every_thread_it_started(backend):
    before = set(threading.enumerate())
    with run_gateway(backend, prewarm=("configmaps", "pods")) as gw:
        deadline = time.monotonic() + 20
        while httpx.get(f"{gw.url}/readyz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        with httpx.stream("GET", f"{gw.url}/core/v1/configmaps?watch=true") as stream:
            next(stream.iter_lines())
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not left:
            break
        time.sleep(0.1)
    assert not left, [t.name for t in left]


def test_operations_endpoints(http):
    assert http.get("/healthz").text == "ok"
    assert http.get("/readyz").status_code == 200
    http.get("/core/v1/namespaces/demo-shop/configmaps")
    metrics = http.get("/metrics").text
    for name in ("kcg_cache_objects", "kcg_informer_synced", "kcg_informer_relists_total",
                 "kcg_informer_watch_errors_total", "kcg_informer_last_event_age_seconds",
                 "kcg_http_request_duration_seconds_bucket", "kcg_open_streams"):
        assert name in metrics, name
    assert 'kcg_cache_objects{cluster="default",resource="configmaps.v1"}' in metrics


def _late_hub(monkeypatch, *names: str):
    """A cluster with ConfigMaps ``names`` in namespace ``late``, and every hub hearing of
    changes 0.3 s after its indexer; returns (cluster, the collection's path)."""
    import asyncio

    from app.cache.hub import EventHub
    from control_plane.fake import FakeCluster

    cluster = FakeCluster()
    cluster.ensure_namespace("late")
    path = "/api/v1/namespaces/late/configmaps"
    for name in names:
        cluster.create(path, {"metadata": {"name": name}, "data": {"n": "0"}})
    original = EventHub.apply

    def late(self, kind, obj, old, settled=""):
        asyncio.get_running_loop().call_later(0.3, original, self, kind, obj, old, settled)

    monkeypatch.setattr(EventHub, "apply", late)
    return cluster, path


def test_a_list_never_holds_an_object_newer_than_its_version(monkeypatch):
    """The indexer hears of a change a moment before the hub: a list taken in that moment
    waits for the hub, so a watch from the list's version does not bring the change again
    (found by the soak: twenty watchers each got one MODIFIED twice)."""
    cluster, path = _late_hub(monkeypatch, "a")
    with run_gateway(cluster) as gw:
        assert httpx.get(gw.url + path).status_code == 200
        changed = cluster.patch(f"{path}/a", {"data": {"n": "1"}})
        entry = next(iter(gw.gateway.default.caches.entries().values()))
        deadline = time.monotonic() + 5
        while entry.indexer.get_encoded_by_key(object_key("late", "a")).resource_version != \
                changed["metadata"]["resourceVersion"]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        answer = httpx.get(gw.url + path).json()
        (item,) = answer["items"]
        assert item["data"] == {"n": "1"}
        assert int(answer["metadata"]["resourceVersion"]) >= int(item["metadata"]["resourceVersion"])


def test_a_list_never_lacks_an_object_deleted_after_its_version(monkeypatch):
    """The other side of the same moment: the indexer has applied a deletion the hub has not
    heard of. A list then lacks the object; stamped with the hub's older version, a watch
    from it would bring the deletion of an object the client never had (found by the soak:
    four watchers, 'DELETED o072 of nothing'). The list carries the indexer's own version."""
    cluster, path = _late_hub(monkeypatch, "a", "b")
    with run_gateway(cluster) as gw:
        assert httpx.get(gw.url + path).status_code == 200
        entry = next(iter(gw.gateway.default.caches.entries().values()))
        wait_until(lambda: len(entry.hub.view) == 2, 5, message="the hub to hear of both")
        cluster.delete(f"{path}/a")
        deadline = time.monotonic() + 5
        while entry.indexer.get_encoded_by_key(object_key("late", "a")) is not None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert "late/a" in entry.hub.view, "the moment: the hub has not heard yet"
        answer = httpx.get(gw.url + path).json()
        assert [o["metadata"]["name"] for o in answer["items"]] == ["b"]
        version = answer["metadata"]["resourceVersion"]
        with httpx.stream("GET", gw.url + path, params={
                "watch": "true", "resourceVersion": version, "timeoutSeconds": "1"}) as watch:
            events = [orjson.loads(line) for line in watch.iter_lines() if line]
        assert events == [], "nothing after the list's version: the deletion is in the list"
