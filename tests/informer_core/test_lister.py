"""Listers select through the namespace and label indexes and agree with a brute-force scan."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from informer_core.errors import NotFoundError
from informer_core.labels import parse_selector
from informer_core.lister import GenericLister, select_encoded
from informer_core.store import LABEL_INDEX, Indexer, label_index_func
from tests.informer_core.fakes import obj


def make_indexer(objects):
    indexer = Indexer(indexers={LABEL_INDEX: label_index_func})
    for o in objects:
        indexer.add(o)
    return indexer


def test_list_get_and_by_namespace():
    indexer = make_indexer([obj("a", "n1", {"app": "web"}), obj("b", "n1", {"app": "db"}),
                            obj("c", "n2", {"app": "web"})])
    lister = GenericLister(indexer, "configmaps")
    assert sorted(o["metadata"]["name"] for o in lister.list()) == ["a", "b", "c"]
    assert sorted(o["metadata"]["name"] for o in lister.list(parse_selector("app=web"))) == ["a", "c"]
    assert [o["metadata"]["name"] for o in lister.by_namespace("n1").list(parse_selector("app=web"))] == ["a"]
    assert lister.get("n2/c")["metadata"]["name"] == "c"
    assert lister.by_namespace("n1").get("b")["metadata"]["name"] == "b"
    with pytest.raises(NotFoundError):
        lister.get("n1/zzz")
    with pytest.raises(LookupError):
        lister.by_namespace("n2").get("a")
    assert lister.by_namespace("empty").list() == []


def test_equality_selection_touches_only_the_matching_bucket():
    indexer = make_indexer([obj(f"o{i}", "ns", {"app": f"app-{i % 100}"}) for i in range(2000)])
    store = indexer.thread_safe_store
    touched = []
    original = store.by_index_values

    def counting(*args, **kwargs):
        found = original(*args, **kwargs)
        touched.extend(found)
        return found

    store.by_index_values = counting
    store.list = store.get_many = None  # a scan or a key-by-key fetch would fail
    found = select_encoded(indexer, parse_selector("app=app-7"))
    assert len(found) == 20 and len(touched) == 20


_NS = st.sampled_from(["n1", "n2", "n3"])
_LABELS = st.dictionaries(st.sampled_from(["app", "tier", "track"]),
                          st.sampled_from(["a", "b", "c"]), max_size=3)
_SELECTORS = st.sampled_from([
    "", "app=a", "app==b", "app!=a", "app in (a,b)", "app notin (a)", "app", "!app",
    "app=a,tier=b", "app in (a,c),tier!=b", "tier in (b),track", "app=a,app=b", "track=c,!tier",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_NS, _LABELS), max_size=25), _SELECTORS,
       st.one_of(st.none(), _NS))
def test_selection_agrees_with_brute_force(specs, text, namespace):
    objects = [obj(f"o{i}", ns, labels) for i, (ns, labels) in enumerate(specs)]
    indexer = make_indexer(objects)
    selector = parse_selector(text)
    got = sorted(o.key for o in select_encoded(indexer, selector, namespace))
    expected = sorted(
        f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in objects
        if (namespace is None or o["metadata"]["namespace"] == namespace)
        and selector.matches(o["metadata"].get("labels")))
    assert got == expected
    assert [o.key for o in select_encoded(indexer, selector, namespace, ordered=True)] == expected
