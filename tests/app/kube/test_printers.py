"""Printers agree with kube-apiserver 1.20's: durations, pod statuses, selectors, JSONPath."""

from __future__ import annotations

import datetime as dt

import pytest

from app.kube.printers import (
    crd_columns,
    deployment_row,
    human_duration,
    jsonpath_first,
    node_row,
    pod_row,
)

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("seconds,expected", [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (59, "59s"), (119, "119s"), (120, "2m"),
    (121, "2m1s"), (599, "9m59s"), (600, "10m"), (3599, "59m"), (10799, "179m"), (10800, "3h"),
    (3 * 3600 + 60, "3h1m"), (8 * 3600, "8h"), (47 * 3600, "47h"), (48 * 3600, "2d"),
    (49 * 3600, "2d1h"), (8 * 86400, "8d"), (800 * 86400, "2y70d"), (365 * 2 * 86400, "2y"),
    (9 * 365 * 86400, "9y"),
])
def test_human_duration(seconds, expected):
    assert human_duration(seconds) == expected


def _pod(status, spec=None, meta=None):
    return {"metadata": {"name": "p", "creationTimestamp": "2025-12-31T23:59:00Z", **(meta or {})},
            "spec": spec or {"containers": [{"name": "a"}]}, "status": status}


def _cs(state, ready=False, restarts=0):
    return {"name": "a", "ready": ready, "restartCount": restarts, "state": state}


@pytest.mark.parametrize("status,meta,expected", [
    ({"phase": "Pending"}, None, ("0/1", "Pending", 0)),
    ({"phase": "Running", "containerStatuses": [_cs({"running": {}}, True)]}, None, ("1/1", "Running", 0)),
    ({"phase": "Running", "containerStatuses": [_cs({"waiting": {"reason": "CrashLoopBackOff"}}, False, 4)]},
     None, ("0/1", "CrashLoopBackOff", 4)),
    ({"phase": "Succeeded", "containerStatuses": [_cs({"terminated": {"reason": "Completed", "exitCode": 0}})]},
     None, ("0/1", "Completed", 0)),
    ({"phase": "Failed", "containerStatuses": [_cs({"terminated": {"exitCode": 137}})]},
     None, ("0/1", "ExitCode:137", 0)),
    ({"phase": "Failed", "containerStatuses": [_cs({"terminated": {"exitCode": 1, "signal": 9}})]},
     None, ("0/1", "Signal:9", 0)),
    ({"phase": "Running", "containerStatuses": [_cs({"running": {}}, True)]},
     {"deletionTimestamp": "2026-01-01T00:00:00Z"}, ("1/1", "Terminating", 0)),
    ({"phase": "Running", "reason": "NodeLost"}, {"deletionTimestamp": "2026-01-01T00:00:00Z"},
     ("0/1", "Unknown", 0)),
    ({"phase": "Failed", "reason": "Evicted"}, None, ("0/1", "Evicted", 0)),
])
def test_pod_status_column(status, meta, expected):
    cells, _ = pod_row(_pod(status, meta=meta), NOW)
    assert (cells[1], cells[2], cells[3]) == expected
    assert cells[4] == "60s"


def test_init_containers_and_completed_with_running_sidecar():
    spec = {"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "a"}]}
    cells, _ = pod_row(_pod({"phase": "Pending", "initContainerStatuses": [
        {"name": "i1", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
        {"name": "i2", "restartCount": 1, "state": {"running": {}}}]}, spec), NOW)
    assert cells[2] == "Init:1/2" and cells[3] == 1
    cells, _ = pod_row(_pod({"phase": "Pending", "initContainerStatuses": [
        {"name": "i1", "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}, spec), NOW)
    assert cells[2] == "Init:CrashLoopBackOff"
    spec2 = {"containers": [{"name": "a"}, {"name": "b"}]}
    cells, _ = pod_row(_pod({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
                              "containerStatuses": [
                                  {"name": "a", "ready": True, "restartCount": 0, "state": {"running": {}}},
                                  {"name": "b", "ready": False, "restartCount": 0,
                                   "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}]},
                             spec2), NOW)
    assert cells[2] == "NotReady"


def test_deployment_selector_and_node_roles():
    cells, _ = deployment_row({"metadata": {"name": "d"}, "spec": {"replicas": 3, "selector": {
        "matchLabels": {"b": "2", "a": "1"}, "matchExpressions": [
            {"key": "c", "operator": "In", "values": ["y", "x"]},
            {"key": "d", "operator": "DoesNotExist"}]}}, "status": {"readyReplicas": 1}}, NOW)
    assert cells[1] == "1/3" and cells[-1] == "a=1,b=2,c in (x,y),!d"
    cells, _ = node_row({"metadata": {"name": "n", "labels": {
        "node-role.kubernetes.io/master": "", "kubernetes.io/role": "edge"}},
        "spec": {"unschedulable": True}, "status": {}}, NOW)
    assert cells[1:3] == ["Unknown,SchedulingDisabled", "edge,master"]


@pytest.mark.parametrize("path,expected", [
    (".spec.size", "M"), ("{.spec.size}", "M"), (".spec.replicas", 3), (".spec.items[1]", "b"),
    (".spec.items[*]", "a"), (".status.conditions[?(@.type==\"Ready\")].status", "True"),
    (".status.conditions[?(@.type=='Other')].reason", "R"), (".spec.missing", None),
    (".metadata.labels.app\\.kubernetes\\.io/name", None),
])
def test_jsonpath_subset(path, expected):
    obj = {"spec": {"size": "M", "replicas": 3, "items": ["a", "b"]},
           "status": {"conditions": [{"type": "Ready", "status": "True"},
                                     {"type": "Other", "status": "False", "reason": "R"}]}}
    assert jsonpath_first(obj, path) == expected


def test_crd_columns_follow_their_types():
    columns, row = crd_columns([
        {"name": "Size", "type": "string", "jsonPath": ".spec.size"},
        {"name": "Count", "type": "integer", "jsonPath": ".spec.count"},
        {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio", "priority": 1},
        {"name": "On", "type": "boolean", "jsonPath": ".spec.on"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ])
    assert [c["name"] for c in columns] == ["Name", "Size", "Count", "Ratio", "On", "Age"]
    assert columns[3]["priority"] == 1
    cells, _ = row({"metadata": {"name": "w", "creationTimestamp": "2025-12-31T22:00:00Z"},
                    "spec": {"size": 5, "count": 2.0, "ratio": 1, "on": "yes"}}, NOW)
    assert cells == ["w", "5", 2, 1.0, None, "120m"]
    default_columns, _ = crd_columns([])
    assert [c["name"] for c in default_columns] == ["Name", "Age"]
