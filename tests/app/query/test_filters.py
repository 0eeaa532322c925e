"""``filter=PATH OP VALUE``: every operator, missing fields, wildcards, and errors that point."""

from __future__ import annotations

import pytest

from app.query.filters import FilterError, parse_filter

POD = {"metadata": {"name": "Web-001", "labels": {"app.kubernetes.io/name": "web"},
                    "creationTimestamp": "2024-05-01T10:00:00Z"},
       "spec": {"containers": [{"image": "nginx:1.25", "resources": {"requests": {"memory": "256Mi"}}},
                               {"image": "envoy:2"}]},
       "status": {"phase": "Running", "restarts": 4}}


@pytest.mark.parametrize("text,expected", [
    ("status.phase=Running", True),
    ("status.phase==Running", True),
    ("status.phase = Running", True),
    ("status.phase!=Running", False),
    ("metadata.name~web-0", True),  # case-insensitive
    ("metadata.name!~WEB", False),
    ("status.restarts>3", True),
    ("status.restarts<4", False),
    ("status.restarts>10", False),
    ("spec.containers.0.resources.requests.memory>1Gi", False),
    ("spec.containers.0.resources.requests.memory>200Mi", True),
    ("metadata.creationTimestamp<2024-05-01T11:00:00+00:00", True),
    ("metadata.creationTimestamp>2024-05-02T00:00:00Z", False),
    ("status.phase in (Pending,Running)", True),
    ("status.phase in(Pending, Failed)", False),
    ("status.phase notin (Pending,Failed)", True),
    ("metadata.labels[app.kubernetes.io/name]=web", True),
    ("spec.containers.*.image~envoy", True),
    ("spec.containers.*.image!~envoy", False),  # no container may match
    ("spec.containers.*.image!~redis", True),
    ("status.missing=", True),  # a missing field is the empty value
    ("status.missing!=x", True),
    ("status.missing=x", False),
    ("status.missing<5", False),  # neither less nor greater
    ("status.missing>5", False),
    ("metadata.name>Web-000", True),  # text as text
])
def test_each_operator(text, expected):
    assert parse_filter(text).matches(POD) is expected


def test_negation_is_always_the_opposite():
    for op, neg in (("=", "!="), ("~", "!~"), (" in ", " notin ")):
        for value in ("Running", "(Running)", "x", "nginx", "(nginx:1.25,x)"):
            if (op == " in ") != value.startswith("("):
                continue
            for path in ("status.phase", "spec.containers.*.image", "nope"):
                positive, negative = parse_filter(path + op + value), parse_filter(path + neg + value)
                assert positive.matches(POD) != negative.matches(POD), (path, op, value)


@pytest.mark.parametrize("text,pointing", [
    ("status.phase", "expected an operator"),
    ("=Running", "expected a field path"),
    ("status..phase=x", "empty segment"),
    ("status.phase in Running", "parentheses"),
    ("status.phase in ()", "empty"),
    ("status.phase<", "needs a value"),
    ("status.phase ?? x", "found '?? x'"),
    ("metadata.labels[a=b", "unclosed"),
])
def test_malformed_filters_say_where(text, pointing):
    with pytest.raises(FilterError, match=pointing.replace("?", r"\?").replace("(", r"\(")):
        parse_filter(text)
