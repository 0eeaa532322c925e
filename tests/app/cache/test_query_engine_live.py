"""Dashboard queries on the real API server: every answer compared with a brute-force
evaluation over the API server's own list, written here independently of the gateway's
code; a sorted walk under churn; streams that filter with transitions."""

from __future__ import annotations

import random
import re
import threading
import urllib.parse
from datetime import datetime

import orjson
import pytest

from tests.app.readers import LineReader, sse_events
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster

_UNITS = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}


def _segments(path: str) -> list[str]:
    return [a or b for a, b in re.findall(r"\[([^\]]+)\]|([^.\[\]]+)", path)]


def _reach(obj, segments):
    nodes = [obj]
    for s in segments:
        nxt = []
        for n in nodes:
            if s == "*":
                nxt += list(n.values()) if isinstance(n, dict) else n if isinstance(n, list) else []
            elif isinstance(n, dict) and s in n:
                nxt.append(n[s])
            elif isinstance(n, list) and s.isdigit() and int(s) < len(n):
                nxt.append(n[int(s)])
        nodes = nxt
    return nodes


def _text(v) -> str:
    return "" if v is None else ("true" if v is True else "false" if v is False else str(v))


def _value(v):
    """(kind, value): 0 empty, 1 number or quantity, 2 time, 3 bool, 4 text."""
    if v is None or v == "":
        return (0, 0)
    if isinstance(v, bool):
        return (3, v)
    if isinstance(v, (int, float)):
        return (1, v)
    m = re.fullmatch(r"([0-9.]+)(m|k|M|G|Ki|Mi|Gi)?", v)
    if m and m.group(1).count(".") <= 1 and m.group(1) != ".":
        return (1, float(m.group(1)) * _UNITS[m.group(2) or ""])
    try:
        if "T" in v and v[:4].isdigit():
            return (2, datetime.fromisoformat(v).timestamp())
    except ValueError:
        pass
    return (4, v)


def _passes(obj, flt: str) -> bool:
    m = re.fullmatch(r"([^=!~<> ]+) ?(!=|!~|=|~|<|>| in | notin )(.*)", flt)
    path, op, operand = m.group(1), m.group(2).strip(), m.group(3)
    values = _reach(obj, _segments(path)) or [None]
    if op in ("in", "notin"):
        members = {x.strip() for x in operand.strip("()").split(",")}
        hit = any(_text(v) in members for v in values)
    elif op in ("=", "!="):
        hit = any(_text(v) == operand for v in values)
    elif op in ("~", "!~"):
        hit = any(operand.lower() in _text(v).lower() for v in values)
    else:
        bound = _value(operand)
        hit = False
        for v in values:
            kv = _value(v)
            if kv[0] == 0:
                continue
            a, b = (kv[1], bound[1]) if kv[0] == bound[0] else (_text(v), operand)
            hit |= a < b if op == "<" else a > b
    return hit != op.startswith(("!", "notin"))


def _expected(items, filters=(), sort=""):
    kept = [o for o in items if all(_passes(o, f) for f in filters)]
    kept.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
    for part in reversed([p for p in sort.split(",") if p]):
        path = _segments(part.lstrip("-"))
        kept.sort(key=lambda o: _value((_reach(o, path) or [None])[0]), reverse=part.startswith("-"))
    return [(o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in kept]


def _keys(items):
    return [(o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in items]


@pytest.fixture(scope="module")
def workload(kube):
    """Pods of varied phases, images, restarts, requests and ages in two namespaces."""
    rng = random.Random(14)
    made = []
    for ns in ("dash-a", "dash-b"):
        kube.ensure_namespace(ns)
        for i in range(30):
            name = f"pod-{i:03d}"
            memory = rng.choice(["64Mi", "256Mi", "1Gi", "1500M", "100m"])
            kube.create(f"/api/v1/namespaces/{ns}/pods", {"metadata": {
                "name": name, "labels": {"app": rng.choice(["web", "api", "db"]),
                                         "app.kubernetes.io/part-of": rng.choice(["shop", "blog"])}},
                "spec": {"containers": [{"name": "main", "image": rng.choice(["nginx:1.25", "envoy:2", "shop/api:3"]),
                                         "resources": {"requests": {"memory": memory}}}]}})
            kube.patch(f"/api/v1/namespaces/{ns}/pods/{name}/status", {"status": {
                "phase": rng.choice(["Running", "Pending", "Failed", "Succeeded"]),
                "startTime": f"2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T1{rng.randint(0, 9)}:00:00Z",
                "containerStatuses": [{"name": "main", "image": "x", "imageID": "", "ready": rng.random() < .5,
                                       "restartCount": rng.randint(0, 12), "state": {}}]}})
            made.append((ns, name))
    return made


QUERIES = [
    {"filter": ["status.phase=Running"]},
    {"filter": ["status.phase!=Running", "metadata.name~POD-01"]},
    {"filter": ["spec.containers.*.image!~nginx"]},
    {"filter": ["status.containerStatuses.0.restartCount>6"]},
    {"filter": ["spec.containers.0.resources.requests.memory<1Gi"]},
    {"filter": ["status.startTime>2024-05-01T00:00:00Z"]},
    {"filter": ["metadata.labels[app.kubernetes.io/part-of] in (blog)"]},
    {"filter": ["status.containerStatuses.0.ready=true", "metadata.labels.app notin (db)"]},
    {"sortBy": "-status.containerStatuses.0.restartCount"},
    {"sortBy": "spec.containers.0.resources.requests.memory,-metadata.name"},
    {"sortBy": "status.phase,-status.startTime", "filter": ["metadata.namespace=dash-b"]},
    {"sortBy": "metadata.labels.app", "labelSelector": "app!=db"},
]


@pytest.mark.parametrize("params", QUERIES)
def test_queries_agree_with_a_brute_force_evaluation_of_the_apiservers_list(http, kube, workload, params):
    items = [o for o in kube.get("/api/v1/pods")["items"]
             if o["metadata"]["namespace"] in ("dash-a", "dash-b")]
    if "labelSelector" in params:
        items = [o for o in items if o["metadata"]["labels"]["app"] != "db"]
    query = urllib.parse.urlencode(params, doseq=True)
    got = http.get(f"/core/v1/pods?{query}&filter=metadata.namespace+in+(dash-a,dash-b)")
    assert got.status_code == 200, got.text
    want = _expected(items, params.get("filter", ()), params.get("sortBy", ""))
    assert want, "the query selects something"
    if "sortBy" in params:
        assert _keys(got.json()["items"]) == want
    else:
        assert sorted(_keys(got.json()["items"])) == sorted(want)


def test_fields_and_summary_agree_with_the_apiserver(http, kube, workload):
    items = kube.get("/api/v1/namespaces/dash-a/pods")["items"]
    got = http.get("/core/v1/namespaces/dash-a/pods?fields=status.phase,spec.containers.0.image").json()
    by_name = {o["metadata"]["name"]: o for o in items}
    for item in got["items"]:
        source = by_name[item["metadata"]["name"]]
        assert item["metadata"] == {k: source["metadata"][k] for k in ("name", "namespace", "resourceVersion")}
        assert item["status"] == {"phase": source["status"]["phase"]}
        assert item["spec"] == {"containers": [{"image": source["spec"]["containers"][0]["image"]}]}
    summary = http.get("/core/v1/pods?summary=status.phase,metadata.namespace"
                       "&filter=metadata.namespace+in+(dash-a,dash-b)").json()
    all_items = [o for o in kube.get("/api/v1/pods")["items"]
                 if o["metadata"]["namespace"] in ("dash-a", "dash-b")]
    phases: dict[str, int] = {}
    for o in all_items:
        phases[o["status"]["phase"]] = phases.get(o["status"]["phase"], 0) + 1
    assert summary["total"] == len(all_items) == 60
    assert summary["counts"]["status.phase"] == phases
    assert summary["counts"]["metadata.namespace"] == {"dash-a": 30, "dash-b": 30}


def test_a_sorted_walk_under_churn_returns_each_lasting_object_once(http, kube, workload):
    """Pods created and deleted, others modified, while a walk sorted by creation time
    descending pages through: every pod present throughout comes exactly once."""
    ns = "dash-churn"
    kube.ensure_namespace(ns)
    base = f"/api/v1/namespaces/{ns}/configmaps"
    for i in range(40):
        kube.create(base, {"metadata": {"name": f"keep-{i:02d}"}, "data": {"n": str(i)}})
    stop = threading.Event()

    def churn():
        n = 0
        while not stop.is_set():
            kube.create(base, {"metadata": {"name": f"tmp-{n}"}})
            kube.patch(f"{base}/keep-{n % 40:02d}", {"data": {"n": f"x{n}"}})
            if n >= 2:
                kube.delete(f"{base}/tmp-{n - 2}")
            n += 1

    worker = threading.Thread(target=churn)
    worker.start()
    try:
        seen, token = [], ""
        while True:
            params = {"sortBy": "-metadata.creationTimestamp,metadata.name", "limit": 5}
            if token:
                params["continue"] = token
            body = http.get(f"/core/v1/namespaces/{ns}/configmaps?{urllib.parse.urlencode(params)}").json()
            seen += [o["metadata"]["name"] for o in body["items"]]
            token = body["metadata"].get("continue", "")
            if not token:
                break
    finally:
        stop.set()
        worker.join(30)
    kept = [n for n in seen if n.startswith("keep-")]
    assert sorted(kept) == [f"keep-{i:02d}" for i in range(40)], "each lasting object exactly once"


def test_an_sse_stream_with_a_filter_follows_objects_in_and_out(gateway, kube, workload):
    path = "/core/v1/namespaces/dash-a/pods?filter=status.phase%3DFailed&fields=status.phase"
    reader = LineReader(gateway.url + path, headers={"Accept": "text/event-stream"})
    try:
        reader.wait_for(lambda lines: "event: SYNCED" in lines)
        failed = {o["metadata"]["name"] for o in kube.get("/api/v1/namespaces/dash-a/pods")["items"]
                  if o["status"]["phase"] == "Failed"}
        first = {orjson.loads(e["data"])["metadata"]["name"] for e in sse_events(reader.lines)
                 if e.get("event") == "ADDED"}
        assert first == failed
        target = next(n for ns, n in workload if ns == "dash-a" and n not in failed)
        kube.patch(f"/api/v1/namespaces/dash-a/pods/{target}/status", {"status": {"phase": "Failed"}})
        kube.patch(f"/api/v1/namespaces/dash-a/pods/{target}/status", {"status": {"phase": "Running"}})
        def moves():
            return [(e["event"], orjson.loads(e["data"])["metadata"]["name"])
                    for e in sse_events(reader.lines) if e.get("event") in ("ADDED", "DELETED", "MODIFIED")]
        wait_until(lambda: ("DELETED", target) in moves(), 15, message="the pod to leave the filter")
        assert moves()[-2:] == [("ADDED", target), ("DELETED", target)]
    finally:
        reader.close()
