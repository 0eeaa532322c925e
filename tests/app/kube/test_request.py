"""Paths, queries, continue tokens and Accept negotiation."""

from __future__ import annotations

import pytest

from app.kube.request import (
    ResourcePath,
    check_names,
    decode_continue,
    encode_continue,
    negotiate,
    parse_path,
    parse_query,
)
from app.kube.status import StatusError


@pytest.mark.parametrize("path,expected", [
    ("/api/v1/pods", ResourcePath("", "v1", "pods")),
    ("/api/v1/namespaces", ResourcePath("", "v1", "namespaces")),
    ("/api/v1/namespaces/default", ResourcePath("", "v1", "namespaces", None, "default")),
    ("/api/v1/namespaces/ns/pods", ResourcePath("", "v1", "pods", "ns")),
    ("/api/v1/namespaces/ns/pods/p", ResourcePath("", "v1", "pods", "ns", "p")),
    ("/api/v1/namespaces/ns/pods/p/log", ResourcePath("", "v1", "pods", "ns", "p", "log")),
    ("/api/v1/nodes/n1", ResourcePath("", "v1", "nodes", None, "n1")),
    ("/apis/apps/v1/deployments", ResourcePath("apps", "v1", "deployments")),
    ("/apis/apps/v1/namespaces/ns/deployments/d", ResourcePath("apps", "v1", "deployments", "ns", "d")),
    ("/core/v1/pods", ResourcePath("", "v1", "pods")),
    ("/core/v1/namespaces/ns/pods/p", ResourcePath("", "v1", "pods", "ns", "p")),
    ("/apps/v1/deployments", ResourcePath("apps", "v1", "deployments")),
    ("/example.com/v1/namespaces/ns/widgets", ResourcePath("example.com", "v1", "widgets", "ns")),
    # as the API server reads them: trailing slashes mean nothing, an empty namespace is all
    ("/api/v1/namespaces/ns/pods/", ResourcePath("", "v1", "pods", "ns")),
    ("/api/v1/namespaces/ns/pods///", ResourcePath("", "v1", "pods", "ns")),
    ("/api/v1/nodes/n1/", ResourcePath("", "v1", "nodes", None, "n1")),
    ("/api/v1/namespaces//pods", ResourcePath("", "v1", "pods")),
])
def test_parse_path(path, expected):
    assert parse_path(path) == expected


@pytest.mark.parametrize("path", ["/", "/api", "/api/v1", "/apis/apps", "/apis/apps/v1", "/core/v1",
                                  "/api/v1/namespaces/ns/pods/p/log/extra", "//api/v1/pods",
                                  "/api//v1/pods", "/api/v1/namespaces/ns//pods",
                                  "/apis//apps/v1/deployments", "/api/v1/namespaces//pods//x"])
def test_paths_that_name_no_resource_are_404(path):
    with pytest.raises(StatusError) as info:
        parse_path(path)
    assert info.value.code == 404


@pytest.mark.parametrize("target", [
    ResourcePath("", "v1", "pods", "Bad_Name"), ResourcePath("", "v1", "pods", "ns", "a/b"),
    ResourcePath("", "v1", "pods", "ns", "x" * 254), ResourcePath("", "v1", "pods", "ns", "%"),
    ResourcePath("", "v1", "pods", "-ns"),
])
def test_invalid_names_are_400(target):
    with pytest.raises(StatusError) as info:
        check_names(target)
    assert info.value.code == 400


def test_query_parses_everything_it_understands():
    q = parse_query(b"labelSelector=app%3Dweb&fieldSelector=status.phase%3DRunning&limit=5&"
                    b"watch=1&resourceVersion=42&timeoutSeconds=30&allowWatchBookmarks=True&"
                    b"labels[tier]=front&includeObject=Object&pretty=true", 8192)
    assert str(q.labels) == "app=web,tier=front"
    assert str(q.fields) == "status.phase=Running"
    assert (q.limit, q.watch, q.resource_version, q.timeout_seconds, q.allow_bookmarks) == (5, True, "42", 30, True)
    assert q.include_object == "Object"


@pytest.mark.parametrize("value,expected", [
    ("1", True), ("t", True), ("T", True), ("true", True), ("True", True), ("TRUE", True),
    ("0", False), ("f", False), ("F", False), ("false", False), ("False", False), ("FALSE", False),
])
def test_booleans_parse_as_go(value, expected):
    assert parse_query(f"watch={value}", 100).watch is expected


@pytest.mark.parametrize("query", [
    "watch=yes", "limit=1.5", "limit=-2", "timeoutSeconds=x", "labelSelector=a%3D%3D%3Db",
    "fieldSelector=x", "resourceVersion=abc", "includeObject=All", "labels[%20]=1",
    "allowWatchBookmarks=maybe",
])
def test_bad_queries_are_400(query):
    with pytest.raises(StatusError) as info:
        parse_query(query, 8192)
    assert info.value.code == 400


def test_continue_tokens_round_trip_and_are_bound_to_their_query():
    token = encode_continue("ns/name", "fp1")
    assert decode_continue(token, "fp1") == ("ns/name", None)
    placed = encode_continue("ns/name", "fp1", ((1, 2.5), "ns", "name"))
    assert decode_continue(placed, "fp1") == ("ns/name", [[1, 2.5], "ns", "name"])
    with pytest.raises(StatusError, match="different query"):
        decode_continue(token, "fp2")
    for garbage in ("!!!", "aGVsbG8", encode_continue("k", "fp1")[:-3]):
        with pytest.raises(StatusError) as info:
            decode_continue(garbage, "fp1")
        assert info.value.code == 400


@pytest.mark.parametrize("header,sse,kind", [
    (None, False, "json"), ("", False, "json"), ("application/json", False, "json"),
    ("*/*", False, "json"), ("text/event-stream", True, "sse"),
    ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json", False, "table"),
    ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", False, "table"),
    ("application/vnd.kubernetes.protobuf,application/json", False, "json"),
    ("text/event-stream;q=0.5, application/json", True, "json"),
    # client-go's metadata client: the JSON metadata form, protobuf first or not
    ("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json", False, "meta"),
    ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
     "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json", False, "meta"),
    ("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v9,application/json", False, "json"),
])
def test_negotiate(header, sse, kind):
    assert negotiate(header, allow_sse=sse).kind == kind


@pytest.mark.parametrize("header,sse", [
    ("text/html", False), ("application/yaml", False), ("text/event-stream", False),
    ("application/json;as=Table;v=v2;g=meta.k8s.io", False), ("application/json;q=0", False),
])
def test_negotiate_refuses_with_406(header, sse):
    with pytest.raises(StatusError) as info:
        negotiate(header, allow_sse=sse)
    assert info.value.code == 406


def test_a_long_path_is_parsed_but_never_kept():
    from app.kube.request import CACHED_UP_TO, _parse_path_cached

    before = _parse_path_cached.cache_info().currsize
    for i in range(50):
        name = f"{i}-" + "n" * 250
        long_path = f"/api/v1/namespaces/{'x' * 60}/pods/{name}" + "/" * CACHED_UP_TO
        assert parse_path(long_path).name == name
    assert _parse_path_cached.cache_info().currsize == before


@pytest.mark.parametrize("segment_at", [2, 3, 5, 6])
def test_a_segment_no_name_can_be_is_refused_before_it_is_parsed_or_kept(segment_at):
    from app.kube.request import _parse_path_cached

    parts = ["", "api", "v1", "namespaces", "a", "pods", "p"]
    parts[segment_at] = "y" * 63_000
    before = _parse_path_cached.cache_info().currsize
    with pytest.raises(StatusError) as info:
        parse_path("/".join(parts))
    assert info.value.code == 404 and len(info.value.message) < 400
    assert _parse_path_cached.cache_info().currsize == before


def test_long_names_and_accept_headers_are_judged_but_not_kept():
    from app.kube.request import _name_problem_cached, _negotiate_cached

    names, offers = _name_problem_cached.cache_info().currsize, _negotiate_cached.cache_info().currsize
    for i in range(20):
        with pytest.raises(StatusError) as info:
            check_names(ResourcePath("", "v1", "pods", "a", f"{i}" + "n" * 5000))
        assert info.value.code == 400 and len(info.value.message) <= 1024
        assert negotiate("application/json;q=0.9," + f"x/y{i};" * 2000, False).kind == "json"
    assert _name_problem_cached.cache_info().currsize == names
    assert _negotiate_cached.cache_info().currsize == offers
