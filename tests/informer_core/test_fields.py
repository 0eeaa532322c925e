"""Field selectors behave as apimachinery's ``fields`` package, over any dotted path."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from informer_core.errors import SelectorError
from informer_core.fields import (
    escape_value,
    everything,
    field_value,
    parse_field_selector,
    unescape_value,
)


@pytest.mark.parametrize("text,canonical", [
    ("a=b", "a=b"),
    ("a==b", "a=b"),
    ("a!=b", "a!=b"),
    ("b=1,a=2", "a=2,b=1"),
    ("", ""),
    ("a=", "a="),
    ("x=a\\,b", "x=a\\,b"),
    ("x=a\\=b", "x=a\\=b"),
    ("x=a\\\\b", "x=a\\\\b"),
    ("a=b,,c=d", "a=b,c=d"),
])
def test_parse_and_canonical_string(text, canonical):
    assert str(parse_field_selector(text)) == canonical


@pytest.mark.parametrize("text", [
    "a", "a,b=c", "a=b=c", "a=b,c", "x=a\\b", "x=\\", "x=a,b", "=b", "!=b",
])
def test_bad_field_selectors_raise_selector_error(text):
    with pytest.raises(SelectorError):
        parse_field_selector(text)


@pytest.mark.parametrize("escaped,raw", [
    ("", ""), ("a", "a"), ("\\\\", "\\"), ("\\,", ","), ("\\=", "="),
    ("a\\\\b\\,c\\=d", "a\\b,c=d"),
])
def test_escape_round_trip(escaped, raw):
    assert unescape_value(escaped) == raw
    assert escape_value(raw) == escaped


@pytest.mark.parametrize("bad,message", [
    ("\\", "invalid escape sequence: \\"),
    ("a\\b", "invalid escape sequence: \\b"),
    ("a,b", "unescaped character in value: ,"),
    ("a=b", "unescaped character in value: ="),
])
def test_unescape_errors_say_what_is_wrong(bad, message):
    with pytest.raises(SelectorError, match=message.replace("\\", "\\\\")):
        unescape_value(bad)


POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "web-1", "namespace": "prod",
                 "labels": {"app.kubernetes.io/name": "web", "tier": "front"}},
    "spec": {"nodeName": "node-a", "containers": [{"name": "main", "image": "nginx"}],
             "priority": 3, "enableServiceLinks": False},
    "status": {"phase": "Running", "ratio": 0.5, "count": 2.0},
}


@pytest.mark.parametrize("path,expected", [
    ("metadata.name", "web-1"),
    ("metadata.namespace", "prod"),
    ("spec.nodeName", "node-a"),
    ("status.phase", "Running"),
    ("spec.priority", "3"),
    ("spec.enableServiceLinks", "false"),
    ("spec.hostNetwork", "false"),  # the API server's value for an absent field
    ("status.ratio", "0.5"),
    ("status.count", "2"),
    ("spec.containers.0.image", "nginx"),
    ("spec.containers.1.image", ""),
    ("metadata.labels.app.kubernetes.io/name", "web"),
    ("metadata.labels.tier", "front"),
    ("spec.missing", ""),
    ("nothing.at.all", ""),
])
def test_field_value_reads_dotted_paths(path, expected):
    assert field_value(POD, path) == expected


def test_server_defined_fields_follow_the_api_server():
    node = {"kind": "Node", "metadata": {"name": "n"}, "spec": {}}
    assert field_value(node, "spec.unschedulable") == "false"
    node["spec"]["unschedulable"] = True
    assert field_value(node, "spec.unschedulable") == "true"
    event = {"kind": "Event", "metadata": {"name": "e"}, "source": {"component": "kubelet"}}
    assert field_value(event, "source") == "kubelet"


@pytest.mark.parametrize("text,expected", [
    ("metadata.name=web-1", True),
    ("metadata.name==web-1", True),
    ("metadata.name!=web-1", False),
    ("metadata.name=web-1,status.phase=Running", True),
    ("metadata.name=web-1,status.phase!=Running", False),
    ("spec.nodeName=", False),
    ("spec.schedulerName=", True),  # a missing path compares as ""
    ("spec.hostNetwork=false", True),
    ("spec.priority=3", True),
    ("", True),
])
def test_matches(text, expected):
    assert parse_field_selector(text).matches(POD) is expected


def test_everything_is_empty_and_matches():
    assert everything().empty()
    assert everything().matches(POD)
    assert parse_field_selector("") == everything()


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab.=!,\\ 1")), max_size=25))
def test_fuzz_only_selector_error_and_canonical_round_trip(text):
    try:
        selector = parse_field_selector(text)
    except SelectorError:
        return
    assert parse_field_selector(str(selector)) == selector
