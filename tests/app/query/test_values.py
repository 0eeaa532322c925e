"""ValueCache: a path's values read once per object version, bounded in number and age."""

from __future__ import annotations

from app.query import values as columns_module
from app.query.values import ValueCache
from app.query.fieldpath import parse_path
from informer_core.encoded import EncodedObject


def pod(name: str, rv: str, phase: str) -> EncodedObject:
    return EncodedObject.from_dict({"metadata": {"namespace": "ns", "name": name,
                                                 "resourceVersion": rv, "labels": {"app": name}},
                                    "status": {"phase": phase}})


def test_an_object_is_parsed_once_per_version_whatever_the_number_of_paths():
    columns = ValueCache()
    objects = [pod(f"p{i}", "1", "Running") for i in range(10)]
    paths = [parse_path("status.phase"), parse_path("metadata.uid")]
    table = columns.table(paths, objects)
    assert columns.parsed == 10
    assert table[0] == [["Running"]] * 10 and table[1] == [[]] * 10
    columns.table(paths, objects)
    assert columns.parsed == 10, "a repeat parses nothing"
    objects[3] = pod("p3", "2", "Failed")
    assert columns.table(paths, objects)[0][3] == ["Failed"]
    assert columns.parsed == 11, "only the changed object"


def test_names_namespaces_and_labels_need_no_parse():
    columns = ValueCache()
    objects = [pod("a", "1", "x")]
    got = columns.table([parse_path("metadata.name"), parse_path("metadata.namespace"),
                         parse_path("metadata.labels.app")], objects)
    assert got == [[["a"]], [["ns"]], [["a"]]]
    assert columns.parsed == 0


def test_paths_are_bounded_in_number_and_idle_ones_dropped(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(columns_module.time, "monotonic", lambda: now[0])
    columns = ValueCache()
    for i in range(columns_module.MAX_COLUMNS + 10):
        columns.column(parse_path(f"spec.f{i}"))
    assert len(columns) == columns_module.MAX_COLUMNS
    now[0] += columns_module.IDLE + 1
    columns.column(parse_path("spec.new"))
    assert len(columns) == 1


def test_deleted_objects_entries_are_let_go():
    columns = ValueCache()
    path = parse_path("status.phase")
    columns.table([path], [pod(f"p{i}", "1", "x") for i in range(3000)])
    columns.forget_absent(present=10)
    assert columns.column(path).values == {}
