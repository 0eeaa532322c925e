"""Selection: what one request asks for, and whether it asks for more than a namespace."""

from __future__ import annotations

import pytest

from app.query.filters import parse_filter
from app.query.selection import Selection
from informer_core.encoded import EncodedObject
from informer_core.fields import parse_field_selector
from informer_core.labels import parse_selector


def obj(name, ns="n", labels=None, phase="Running"):
    return EncodedObject.from_dict({"metadata": {"name": name, "namespace": ns, "labels": labels or {}},
                                    "status": {"phase": phase}})


@pytest.mark.parametrize("selection", [Selection(), Selection(namespace="n")])
def test_a_namespace_alone_filters_nothing_else(selection):
    assert selection.namespace_only
    assert selection.matches(obj("a", labels={"team": "red"}))


@pytest.mark.parametrize("selection", [
    Selection(labels=parse_selector("team=red")),
    Selection(fields=parse_field_selector("metadata.name=a")),
    Selection(fields=parse_field_selector("status.phase=Running")),
    Selection(namespaces=frozenset({"n"})),
    Selection(filters=(parse_filter("status.phase=Running"),)),
])
def test_any_other_term_is_more_than_a_namespace(selection):
    assert not selection.namespace_only


def test_a_namespace_given_drops_the_callers_namespaces():
    """A namespace asked for replaces the caller's set of namespaces, which narrows only
    lists of all namespaces; the request's authorization decides the one namespace."""
    selection = Selection(namespace="n", namespaces=frozenset({"m"}))
    assert selection.namespaces is None and selection.namespace_only


def test_matches_checks_each_term():
    red_running = obj("a", labels={"team": "red"})
    assert Selection(labels=parse_selector("team=red")).matches(red_running)
    assert not Selection(labels=parse_selector("team=blue")).matches(red_running)
    assert not Selection(namespace="m").matches(red_running)
    assert not Selection(namespaces=frozenset({"m"})).matches(red_running)
    assert not Selection(fields=parse_field_selector("metadata.name!=a")).matches(red_running)
    assert Selection(fields=parse_field_selector("status.phase=Running")).matches(red_running)
    assert not Selection(fields=parse_field_selector("status.phase=Pending")).matches(red_running)
