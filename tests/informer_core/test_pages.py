"""List pages encoded without building dicts give exactly what the general path gives."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from informer_core.encoded import EncodedObject
from informer_core.pages import encode_page, is_metadata_transform, metadata_transform


@metadata_transform
def strip(obj: dict) -> dict:
    obj["metadata"].pop("managedFields", None)
    return obj


def general(body: bytes, kind: str, api_version: str, transform) -> list[EncodedObject]:
    """The reference: parse everything, type first, transform the dict, encode once."""
    doc = orjson.loads(body)
    kind = kind or doc.get("kind", "").removesuffix("List")
    api_version = api_version or doc.get("apiVersion", "")
    out = []
    for item in doc.get("items") or []:
        if "kind" not in item or "apiVersion" not in item:
            item = {"kind": item.get("kind", kind), "apiVersion": item.get("apiVersion", api_version),
                    **item}
        out.append(EncodedObject.from_dict(transform(item) if transform else item))
    return out


def page(items: list, **meta) -> bytes:
    return orjson.dumps({"kind": "WidgetList", "apiVersion": "example.com/v1",
                         "metadata": {"resourceVersion": "42", **meta}, "items": items})


ITEMS = [
    {"metadata": {"name": "a", "namespace": "n", "labels": {"app": "x"}, "resourceVersion": "7",
                  "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:data": {}}}]},
     "spec": {"size": 1.5, "big": 12345678901234, "neg": -3, "exp": 1e300, "none": None,
              "flag": True, "text": "naïve \"quoted\" \\ \u2028 \t 日本", "list": [1, "two", {"3": []}]},
     "status": {}},
    {"kind": "Widget", "apiVersion": "example.com/v2", "metadata": {"name": "b"}, "data": "x"},
    {"kind": "Gadget", "metadata": {"name": "c", "namespace": "m"}},
    {"metadata": {}, "spec": "scalar"},
]


@pytest.mark.parametrize("transform", [None, strip])
def test_same_bytes_as_the_general_path(transform):
    body = page(ITEMS, **{"continue": "tok"})
    items, meta = encode_page(body, "", "", transform)
    assert [o.raw for o in items] == [o.raw for o in general(body, "", "", transform)]
    assert meta == {"resourceVersion": "42", "continue": "tok"}
    assert items[0].to_dict()["spec"]["size"] == 1.5
    assert ("managedFields" in items[0].to_dict()["metadata"]) is (transform is None)
    first = items[0]
    assert (first.key, first.labels, first.resource_version) == ("n/a", {"app": "x"}, "7")
    assert list(items[0].to_dict())[:2] == ["kind", "apiVersion"]  # as watch events and gets


def test_the_lister_watchers_kind_wins_over_the_lists():
    items, _ = encode_page(page(ITEMS[:1]), "Thing", "v9", None)
    assert items[0].to_dict()["kind"] == "Thing" and items[0].to_dict()["apiVersion"] == "v9"


def test_empty_and_missing_items():
    assert encode_page(page([]), "", "", None) == ([], {"resourceVersion": "42"})
    assert encode_page(b'{"kind":"PodList","metadata":{}}', "", "", None) == ([], {})


def test_other_transforms_and_bad_bodies_are_left_to_the_general_path():
    assert not is_metadata_transform(lambda obj: obj)
    assert is_metadata_transform(None) and is_metadata_transform(strip)
    assert encode_page(page(ITEMS), "", "", lambda obj: obj) is None
    for bad in (b"[1,2]", b'{"items": [', b"not json", b'{"items": [1]}'):
        assert encode_page(bad, "", "", None) is None


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children,
                                                                       max_size=3),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.fixed_dictionaries(
    {"metadata": st.fixed_dictionaries({"name": st.text(min_size=1, max_size=6)},
                                       optional={"labels": st.dictionaries(st.text(max_size=4),
                                                                           st.text(max_size=4)),
                                                 "managedFields": _JSON}),
     "spec": _JSON}), max_size=4))
def test_any_items_decode_equal_to_the_general_path(items):
    body = page(items)
    encoded = encode_page(body, "", "", strip)
    assert encoded is not None
    assert [o.to_dict() for o in encoded[0]] == [o.to_dict() for o in general(body, "", "", strip)]
