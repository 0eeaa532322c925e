"""``sortBy``: directions, ties by namespace and name, places that page exactly."""

from __future__ import annotations

import orjson
import pytest

from app.query.values import ValueCache
from app.query.ordering import SortError, parse_sort
from informer_core.encoded import EncodedObject


def obj(ns: str, name: str, **status) -> EncodedObject:
    return EncodedObject.from_dict({"metadata": {"namespace": ns, "name": name,
                                                 "resourceVersion": "1"}, "status": status})


OBJECTS = [obj("b", "x", n="10", t="a"), obj("a", "y", n="9", t="a"), obj("a", "x", n="10", t="b"),
           obj("a", "z", t="c"), obj("c", "w", n="100m", t="a")]


def names(objects):
    return [f"{o.namespace}/{o.name}" for o in objects]


def test_ascending_by_value_with_ties_by_namespace_then_name():
    ordered, _ = parse_sort("status.n").sort(ValueCache(), OBJECTS)
    assert names(ordered) == ["a/z", "c/w", "a/y", "a/x", "b/x"]  # missing first, 100m < 9 < 10


def test_descending_keeps_ties_ascending():
    ordered, _ = parse_sort("-status.n").sort(ValueCache(), OBJECTS)
    assert names(ordered) == ["a/x", "b/x", "a/y", "c/w", "a/z"]


def test_several_keys_each_in_its_direction():
    ordered, _ = parse_sort("status.t,-status.n").sort(ValueCache(), OBJECTS)
    assert names(ordered) == ["b/x", "a/y", "c/w", "a/x", "a/z"]


@pytest.mark.parametrize("text", ["status.t,-status.n", "-status.n", "metadata.name", "status.t"])
def test_a_place_read_back_from_json_resumes_right_after_it(text):
    ordering = parse_sort(text)
    ordered, places = ordering.sort(ValueCache(), OBJECTS)
    for i, place in enumerate(places):
        back = ordering.check_place(orjson.loads(orjson.dumps(place)))
        assert back is not None
        assert ordering.after(places, back) == i + 1


def test_a_place_between_objects_lands_between_them():
    ordering = parse_sort("-status.n")
    ordered, places = ordering.sort(ValueCache(), OBJECTS)
    gone = ((1, 10.0), "a", "xx")  # a deleted object's place: after a/x, before b/x
    assert names(ordered[ordering.after(places, gone):]) == ["b/x", "a/y", "c/w", "a/z"]


@pytest.mark.parametrize("place", [None, [], [[1, 2]], [[1, "x"], "a", "b"], [[9, 1], "a", "b"],
                                   [[3, 1], "a", "b"], [[1, True], "a", "b"], [[1, 2], 3, "b"],
                                   [["1", 2], "a", "b"], [[1, 2, 3], "a", "b"]])
def test_places_that_are_not_ours_are_refused(place):
    assert parse_sort("status.n").check_place(place) is None


@pytest.mark.parametrize("text", [",", "a,,b", "-", "a..b", ",".join("abcdefghi")])
def test_malformed_sort_keys(text):
    with pytest.raises(SortError):
        parse_sort(text)
