"""Dotted paths: parsing (brackets, indexes, wildcards) and reading values."""

from __future__ import annotations

import pytest

from app.query.fieldpath import PathError, parse_path, scalar_text

POD = {"metadata": {"name": "web-1", "labels": {"app.kubernetes.io/name": "web", "tier": "fe"}},
       "spec": {"containers": [{"image": "nginx:1"}, {"image": "envoy:2"}]},
       "status": {"phase": "Running", "ready": True, "count": 3}}


@pytest.mark.parametrize("text,segments", [
    ("status.phase", ("status", "phase")),
    ("metadata.labels[app.kubernetes.io/name]", ("metadata", "labels", "app.kubernetes.io/name")),
    ("metadata.labels[a.b].x", ("metadata", "labels", "a.b", "x")),
    ("[a.b][c]", ("a.b", "c")),
    ("spec.containers.0.image", ("spec", "containers", "0", "image")),
])
def test_paths_split_on_dots_and_keep_bracketed_keys_whole(text, segments):
    assert parse_path(text).segments == segments


@pytest.mark.parametrize("text", ["", "a..b", ".a", "a.", "a[b", "a]b", "a[]", "a[b]c",
                                  "x" * 600, ".".join("a" * 40)])
def test_malformed_paths_are_refused_with_a_reason(text):
    with pytest.raises(PathError):
        parse_path(text)


def test_a_wildcard_only_where_allowed():
    with pytest.raises(PathError, match=r"\*"):
        parse_path("spec.containers.*.image")
    assert parse_path("spec.containers.*.image", wildcard=True).wild


def test_values_follow_maps_lists_and_wildcards():
    assert parse_path("status.phase").values(POD) == ["Running"]
    assert parse_path("metadata.labels[app.kubernetes.io/name]").value(POD) == "web"
    assert parse_path("spec.containers.1.image").value(POD) == "envoy:2"
    assert parse_path("spec.containers.5.image").values(POD) == []
    assert parse_path("spec.containers.*.image", wildcard=True).values(POD) == ["nginx:1", "envoy:2"]
    assert parse_path("status.nothing.deeper").values(POD) == []
    assert parse_path("status.phase.deeper").values(POD) == []
    assert parse_path("0").values({"0": "a map key"}) == ["a map key"]


def test_scalars_compare_as_json_spells_them():
    assert [scalar_text(v) for v in (None, True, False, 3, 2.5, "x")] == \
        ["", "true", "false", "3", "2.5", "x"]
    assert scalar_text({"b": 1, "a": 2}) == '{"a":2,"b":1}'
