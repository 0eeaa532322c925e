"""Indexer behaves as client-go's cache.Indexer (its store and index tests, translated)."""

from __future__ import annotations

import threading

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from informer_core.delta_fifo import DeletedFinalStateUnknown
from informer_core.encoded import EncodedObject
from informer_core.store import (
    LABEL_INDEX,
    NAMESPACE_INDEX,
    Indexer,
    deletion_handling_meta_namespace_key,
    label_index_func,
    meta_namespace_index_func,
    meta_namespace_key,
    split_meta_namespace_key,
)


def pod(name, namespace="ns", labels=None, annotations=None, rv="1"):
    meta = {"name": name, "namespace": namespace, "resourceVersion": rv}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta}


def users_index_func(obj):
    return obj["metadata"]["annotations"]["users"].split(",")


# -- keys ----------------------------------------------------------------------

def test_meta_namespace_key():
    assert meta_namespace_key(pod("a", "ns")) == "ns/a"
    assert meta_namespace_key({"metadata": {"name": "node-1"}}) == "node-1"
    assert meta_namespace_key("explicit/key") == "explicit/key"
    assert meta_namespace_key(EncodedObject.from_dict(pod("a", "ns"))) == "ns/a"
    with pytest.raises(ValueError, match="no meta"):
        meta_namespace_key({"spec": {}})


@pytest.mark.parametrize("key,expected", [
    ("ns/name", ("ns", "name")), ("name", ("", "name")), ("/name", ("", "name")),
])
def test_split_meta_namespace_key(key, expected):
    assert split_meta_namespace_key(key) == expected


def test_split_meta_namespace_key_rejects_extra_slashes():
    with pytest.raises(ValueError, match="unexpected key format"):
        split_meta_namespace_key("a/b/c")


def test_deletion_handling_key_accepts_tombstones():
    assert deletion_handling_meta_namespace_key(DeletedFinalStateUnknown("ns/x", None)) == "ns/x"
    assert deletion_handling_meta_namespace_key(pod("y")) == "ns/y"


def test_index_funcs_read_dicts_and_encoded_objects_alike():
    obj = pod("a", "ns", labels={"app": "web"})
    assert meta_namespace_index_func(obj) == ["ns"]
    assert meta_namespace_index_func(EncodedObject.from_dict(obj)) == ["ns"]
    assert meta_namespace_index_func({"metadata": {"name": "n"}}) == [""]
    assert label_index_func(obj) == label_index_func(EncodedObject.from_dict(obj)) == ["app=web"]


# -- store basics (client-go doTestStore) -------------------------------------

def test_store_add_update_get_delete_list():
    store = Indexer()
    store.add(pod("foo", rv="1"))
    assert store.get(pod("foo")) == pod("foo", rv="1")
    store.update(pod("foo", rv="2"))
    assert store.get_by_key("ns/foo") == pod("foo", rv="2")
    store.delete(pod("foo"))
    assert store.get(pod("foo")) is None
    assert store.get_by_key("ns/foo") is None

    for name in ("a", "b", "c"):
        store.add(pod(name))
    assert sorted(o["metadata"]["name"] for o in store.list()) == ["a", "b", "c"]
    assert sorted(store.list_keys()) == ["ns/a", "ns/b", "ns/c"]

    store.replace([pod("foo"), pod("bar")], "0")
    assert sorted(store.list_keys()) == ["ns/bar", "ns/foo"]
    assert sorted(store.index_keys(NAMESPACE_INDEX, "ns")) == ["ns/bar", "ns/foo"]


def test_a_list_in_key_order_is_a_copy_that_later_updates_leave_alone():
    store = Indexer()
    for name in ("c", "a", "b"):
        store.add(pod(name, rv="1"))
    first = store.thread_safe_store.list_sorted()
    store.update(pod("b", rv="2"))
    second = store.thread_safe_store.list_sorted()
    assert [o.key for o in first] == [o.key for o in second] == ["ns/a", "ns/b", "ns/c"]
    assert first[1].resource_version == "1", "an update changed a list already handed out"
    assert second[1].resource_version == "2", "the kept order did not take the update"
    second.clear()  # a caller's list is its own
    assert len(store.thread_safe_store.list_sorted()) == 3


def test_deleting_a_missing_key_is_not_an_error():
    store = Indexer()
    store.delete(pod("ghost"))
    store.delete(DeletedFinalStateUnknown("ns/ghost", None))
    assert store.list() == []


def test_tombstone_delete_removes_by_key():
    store = Indexer()
    store.add(pod("x"))
    store.delete(DeletedFinalStateUnknown("ns/x", pod("x")))
    assert store.list_keys() == []


def test_returned_objects_are_equal_fresh_copies():
    store = Indexer()
    original = pod("a", labels={"app": "web"})
    store.add(original)
    got = store.get_by_key("ns/a")
    assert got == original
    got["metadata"]["name"] = "mutated"
    assert store.get_by_key("ns/a") == original


def test_resync_is_a_no_op():
    store = Indexer()
    store.add(pod("a"))
    store.resync()
    assert store.list_keys() == ["ns/a"]


# -- indexes (client-go index_test.go, thread_safe_store_test.go) -------------

def test_get_index_func_values():
    store = Indexer(indexers={"testmodes": lambda o: [o["metadata"]["labels"]["foo"]]})
    store.add(pod("one", labels={"foo": "bar"}))
    store.add(pod("two", labels={"foo": "bar"}))
    store.add(pod("tre", labels={"foo": "biz"}))
    assert sorted(store.list_index_func_values("testmodes")) == ["bar", "biz"]


def test_multi_index_keys():
    store = Indexer(indexers={"byUser": users_index_func})
    store.add(pod("one", annotations={"users": "ernie,bert"}))
    store.add(pod("two", annotations={"users": "bert,oscar"}))
    store.add(pod("tre", annotations={"users": "ernie,elmo"}))

    def names(user):
        return sorted(o["metadata"]["name"] for o in store.by_index("byUser", user))

    assert names("ernie") == ["one", "tre"]
    assert names("bert") == ["one", "two"]
    assert names("elmo") == ["tre"]
    assert names("oscar") == ["two"]
    assert names("nobody") == []

    store.delete(pod("tre"))
    assert names("elmo") == []
    assert "elmo" not in store.list_index_func_values("byUser")

    store.update(pod("two", annotations={"users": "oscar"}))
    assert names("bert") == ["one"]
    assert sorted(store.index_keys("byUser", "oscar")) == ["ns/two"]


def test_delete_removes_empty_buckets_from_the_index():
    store = Indexer(indexers={"byUser": users_index_func})
    store.add(pod("one", annotations={"users": "ernie"}))
    store.delete(pod("one"))
    assert store.list_index_func_values("byUser") == []
    assert store.list_index_func_values(NAMESPACE_INDEX) == []


def test_update_keeps_a_non_empty_bucket_after_moving_one_key_out():
    store = Indexer(indexers={"byUser": users_index_func})
    store.add(pod("one", annotations={"users": "ernie"}))
    store.add(pod("two", annotations={"users": "ernie"}))
    store.update(pod("one", annotations={"users": "bert"}))
    assert store.index_keys("byUser", "ernie") == ["ns/two"]
    assert store.index_keys("byUser", "bert") == ["ns/one"]


def test_index_function_with_repeated_values():
    store = Indexer(indexers={"byUser": users_index_func})
    store.add(pod("one", annotations={"users": "ernie,ernie"}))
    store.update(pod("one", annotations={"users": "ernie"}))
    assert store.index_keys("byUser", "ernie") == ["ns/one"]
    store.delete(pod("one"))
    assert store.list_index_func_values("byUser") == []


def test_unknown_index_raises_key_error_but_list_values_is_empty():
    store = Indexer()
    with pytest.raises(KeyError):
        store.by_index("nope", "x")
    with pytest.raises(KeyError):
        store.index_keys("nope", "x")
    assert store.list_index_func_values("nope") == []


def test_namespace_index_is_built_in():
    store = Indexer()
    store.add(pod("a", "ns1"))
    store.add(pod("b", "ns2"))
    store.add({"metadata": {"name": "node"}})
    assert [o["metadata"]["name"] for o in store.by_index(NAMESPACE_INDEX, "ns1")] == ["a"]
    assert store.index_keys(NAMESPACE_INDEX, "") == ["node"]


def test_add_indexers_indexes_existing_objects_and_rejects_conflicts():
    store = Indexer()
    store.add(pod("a", labels={"app": "web"}))
    store.add_indexers({LABEL_INDEX: label_index_func})
    assert store.index_keys(LABEL_INDEX, "app=web") == ["ns/a"]
    with pytest.raises(ValueError, match="conflict"):
        store.add_indexers({NAMESPACE_INDEX: meta_namespace_index_func})


def test_failing_index_function_leaves_the_store_unchanged():
    def picky(obj):
        if obj["metadata"].get("labels", {}).get("bad"):
            raise RuntimeError("cannot index")
        return ["ok"]

    store = Indexer(indexers={"picky": picky})
    store.add(pod("a"))
    with pytest.raises(ValueError, match="unable to calculate an index entry"):
        store.update(pod("a", labels={"bad": "1"}, rv="2"))
    assert store.get_by_key("ns/a") == pod("a")
    assert store.index_keys("picky", "ok") == ["ns/a"]


def test_index_functions_of_the_encoded_form_are_checked_as_any_other():
    # such functions are called directly on every write; what they give back is still held
    # to what the general way asks (a list, a failure said with the key and the index)
    from informer_core.thread_safe_store import accepts_encoded

    @accepts_encoded
    def by_owner(obj):
        owner = obj.labels.get("owner")
        if owner == "bad":
            raise RuntimeError("cannot index")
        return (owner,) if owner else None  # a tuple, or None: both taken as the general way takes them

    store = Indexer(indexers={"owner": by_owner})
    store.add(pod("a", labels={"owner": "ann"}))
    store.update(pod("a", labels={"owner": "bob"}, rv="2"))
    assert store.index_keys("owner", "bob") == ["ns/a"] and store.index_keys("owner", "ann") == []
    store.update(pod("a", rv="3"))
    assert store.index_keys("owner", "bob") == []
    with pytest.raises(ValueError, match="unable to calculate an index entry for key 'ns/a'"):
        store.update(pod("a", labels={"owner": "bad"}, rv="4"))
    assert store.get_by_key("ns/a") == pod("a", rv="3")

    @accepts_encoded
    def a_string(obj):
        return obj.namespace

    with pytest.raises(ValueError, match="returned a str"):
        Indexer(indexers={"ns": a_string}).add(pod("a"))


def test_custom_key_func():
    store = Indexer(key_func=lambda o: o["metadata"]["uid"])
    store.add({"metadata": {"name": "a", "uid": "u1"}})
    assert store.list_keys() == ["u1"]
    assert store.get_by_key("u1")["metadata"]["name"] == "a"


def test_concurrent_writers_and_readers_keep_indexes_exact():
    store = Indexer(indexers={LABEL_INDEX: label_index_func})
    errors: list[BaseException] = []

    def writer(worker):
        try:
            for i in range(300):
                name = f"p{i % 20}"
                store.update(pod(name, f"ns{worker}", labels={"v": str(i % 3)}, rv=str(i)))
                if i % 7 == 0:
                    store.delete(pod(name, f"ns{worker}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader():
        try:
            for _ in range(300):
                for key in store.index_keys(LABEL_INDEX, "v=1"):
                    store.get_by_key(key)
                store.list()
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    _assert_indexes_agree_with_scan(store)


# -- property: indexes always agree with a brute-force scan ------------------

def _assert_indexes_agree_with_scan(store: Indexer) -> None:
    objects = {store._key_of(o): o for o in store.list()}
    for name, func in store.get_indexers().items():
        expected: dict[str, set[str]] = {}
        for key, obj in objects.items():
            for value in func(obj):
                expected.setdefault(value, set()).add(key)
        assert sorted(store.list_index_func_values(name)) == sorted(expected)
        for value, keys in expected.items():
            assert set(store.index_keys(name, value)) == keys


_names = st.sampled_from(["a", "b", "c", "d"])
_namespaces = st.sampled_from(["ns1", "ns2", ""])
_labels = st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["x", "y"]), max_size=2)
_users = st.lists(st.sampled_from(["ernie", "bert", "elmo"]), max_size=3).map(",".join)


def _obj(name, namespace, labels, users):
    meta = {"name": name, "labels": labels, "annotations": {"users": users}}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta}


class IndexerMachine(RuleBasedStateMachine):
    """Random add/update/delete/replace sequences against a dict model."""

    def __init__(self):
        super().__init__()
        self.store = Indexer(indexers={
            LABEL_INDEX: label_index_func,
            "byUser": lambda o: [u for u in o["metadata"]["annotations"]["users"].split(",") if u],
        })
        self.model: dict[str, dict] = {}

    @rule(name=_names, namespace=_namespaces, labels=_labels, users=_users)
    def add(self, name, namespace, labels, users):
        obj = _obj(name, namespace, labels, users)
        self.store.add(obj)
        self.model[meta_namespace_key(obj)] = obj

    @rule(name=_names, namespace=_namespaces, labels=_labels, users=_users)
    def update(self, name, namespace, labels, users):
        obj = _obj(name, namespace, labels, users)
        self.store.update(obj)
        self.model[meta_namespace_key(obj)] = obj

    @rule(name=_names, namespace=_namespaces)
    def delete(self, name, namespace):
        obj = _obj(name, namespace, {}, "")
        self.store.delete(obj)
        self.model.pop(meta_namespace_key(obj), None)

    @rule(objs=st.lists(st.tuples(_names, _namespaces, _labels, _users), max_size=5))
    def replace(self, objs):
        built = [_obj(*o) for o in objs]
        self.store.replace(built, "1")
        self.model = {meta_namespace_key(o): o for o in built}

    @invariant()
    def agrees_with_model(self):
        assert {meta_namespace_key(o): o for o in self.store.list()} == self.model
        _assert_indexes_agree_with_scan(self.store)
        in_order = self.store.thread_safe_store.list_sorted()
        assert [o.key for o in in_order] == sorted(self.model)
        assert all(o is self.store.get_encoded_by_key(o.key) for o in in_order)
        for index in self.store._store._indices.values():
            assert all(index.values()), "an index kept an empty bucket"


TestIndexerMachine = IndexerMachine.TestCase
TestIndexerMachine.settings = settings(max_examples=300, stateful_step_count=30, deadline=None)


# -- change marks: what a reader may keep while its buckets are unchanged ----------------------

def _labelled_indexer():
    from informer_core.store import LABEL_INDEX, Indexer, label_index_func

    return Indexer(indexers={LABEL_INDEX: label_index_func})


def _pod(namespace: str, name: str, rv: int, **labels: str) -> dict:
    return {"metadata": {"namespace": namespace, "name": name, "resourceVersion": str(rv),
                         "labels": labels}}


def test_a_write_marks_the_buckets_of_its_old_and_new_object_and_no_other():
    from informer_core.store import LABEL_INDEX, NAMESPACE_INDEX

    indexer = _labelled_indexer()
    store = indexer.thread_safe_store
    indexer.add(_pod("a", "web-1", 1, app="web"))
    indexer.add(_pod("b", "db-1", 2, app="db"))
    tick = store.tick
    indexer.update(_pod("b", "db-1", 3, app="db"))  # the bytes change, not the labels
    assert store.unchanged_since(tick, LABEL_INDEX, ["app=web"])
    assert store.unchanged_since(tick, NAMESPACE_INDEX, ["a"])
    assert not store.unchanged_since(tick, LABEL_INDEX, ["app=db"])
    assert not store.unchanged_since(tick, NAMESPACE_INDEX, ["b"])
    assert not store.unchanged_since(tick)  # the whole store did change
    tick = store.tick
    indexer.update(_pod("b", "db-1", 4, app="web"))  # moved into app=web
    assert not store.unchanged_since(tick, LABEL_INDEX, ["app=web"])
    assert not store.unchanged_since(tick, LABEL_INDEX, ["app=db"])
    tick = store.tick
    indexer.delete(_pod("a", "web-1", 1, app="web"))
    assert not store.unchanged_since(tick, LABEL_INDEX, ["app=web"])
    assert store.unchanged_since(tick, LABEL_INDEX, ["app=db"])
    tick = store.tick
    indexer.replace([_pod("a", "web-1", 5, app="web")], "5")
    assert not store.unchanged_since(tick, LABEL_INDEX, ["app=nothing"])


def test_a_value_never_seen_before_is_marked_when_its_first_object_comes():
    from informer_core.store import LABEL_INDEX

    indexer = _labelled_indexer()
    store = indexer.thread_safe_store
    indexer.add(_pod("a", "x", 1, app="web"))
    tick = store.tick
    assert store.unchanged_since(tick, LABEL_INDEX, ["app=new"])  # an empty answer, kept
    indexer.add(_pod("a", "y", 2, app="new"))
    assert not store.unchanged_since(tick, LABEL_INDEX, ["app=new"])


def test_the_marks_of_gone_values_stay_within_twice_the_index():
    """Each pod of a StatefulSet has a label of its own: their deletions must not grow the
    marks for good, and dropping the marks of gone values changes every answer's mark."""
    from informer_core.store import LABEL_INDEX

    indexer = _labelled_indexer()
    store = indexer.thread_safe_store
    indexer.add(_pod("a", "stays", 0, app="web"))
    kept_at = store.tick
    for n in range(3000):
        indexer.add(_pod("a", f"p-{n}", n + 1, pod=f"p-{n}"))
        indexer.delete(_pod("a", f"p-{n}", n + 1, pod=f"p-{n}"))
    assert len(store._touched[LABEL_INDEX]) <= 2 * len(store.list_index_func_values(LABEL_INDEX)) + 1025
    assert not store.unchanged_since(kept_at, LABEL_INDEX, ["app=web"])  # conservative
    tick = store.tick
    assert store.unchanged_since(tick, LABEL_INDEX, ["app=web"])


def test_what_is_kept_while_unchanged_always_equals_a_fresh_read():
    """Random writes (adds, changes, relabels, moves, deletions) over a few namespaces and
    labels; an answer kept after each read is checked after every later write: whenever
    its buckets say unchanged, reading again gives exactly what was kept."""
    import random

    from app.query.selection import Selection
    from informer_core.labels import parse_selector

    rng = random.Random(7)
    indexer = _labelled_indexer()
    store = indexer.thread_safe_store
    selections = [Selection(ns, parse_selector(text) if text else None)
                  for ns in (None, "a", "b") for text in ("", "app=web", "app in (web,db)",
                                                          "app=web,tier!=front", "tier=back")]
    kept: list[tuple[Selection, int, tuple, list]] = []
    version = 0
    checked = 0
    for _ in range(1500):
        version += 1
        namespace, name = rng.choice("abc"), f"o-{rng.randrange(12)}"
        labels = {k: v for k, v in (("app", rng.choice(["web", "db", "job"])),
                                    ("tier", rng.choice(["front", "back"]))) if rng.random() < 0.8}
        if rng.random() < 0.25:
            indexer.delete(_pod(namespace, name, version))
        else:
            indexer.update(_pod(namespace, name, version, **labels))
        for selection, tick, read_from, objects in kept:
            if store.unchanged_since(tick, *read_from):
                assert [(o.key, o.resource_version) for o in selection.select(indexer, True)] \
                    == objects
                checked += 1
        selection = rng.choice(selections)
        tick = store.tick
        objects = [(o.key, o.resource_version) for o in selection.select(indexer, True)]
        kept.append((selection, tick, selection.read_from(indexer), objects))
        kept = kept[-30:]
    assert checked > 1000  # most kept answers outlive many writes elsewhere
