"""The cluster annotation on a copy (by splicing metadata where that is certain), and the
version tokens of merged reads."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.clusters.merging import CLUSTER_ANNOTATION, decode_versions, encode_versions, tagged
from app.kube.status import StatusError

_text = st.text(max_size=12)
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), _text)
_json = st.recursive(_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(_text, inner, max_size=3)), max_leaves=12)


@st.composite
def objects(draw) -> dict:
    """Objects shaped as the API server's and not: metadata first or after a nested one,
    annotations present, null or absent, non-ASCII, no metadata at all."""
    obj: dict = {}
    if draw(st.booleans()):
        obj["apiVersion"] = draw(st.sampled_from(["v1", "apps/v1", "example.com/v1"]))
        obj["kind"] = draw(st.sampled_from(["Pod", "Deployment", "Wïdget"]))
    if draw(st.booleans()):
        obj["spec"] = {"template": {"metadata": {"labels": {"app": "x"}}}, "x": draw(_json)}
    meta = draw(st.one_of(
        st.none(), st.just("not an object"),
        st.fixed_dictionaries({"name": _text}, optional={
            "annotations": st.one_of(st.none(), st.dictionaries(_text, _text, max_size=3)),
            "labels": st.dictionaries(_text, _text, max_size=3),
            "resourceVersion": st.text("0123456789", min_size=1, max_size=6),
            "ownerReferences": st.lists(st.dictionaries(_text, _json, max_size=2), max_size=2)})))
    if meta is not None:
        obj["metadata"] = meta
    obj["status"] = draw(_json)
    return obj


@settings(max_examples=400, deadline=None)
@given(objects(), st.sampled_from(["a", "prod-eu"]), st.sampled_from([None, "kcg1.abc"]))
def test_tagged_is_the_object_with_the_annotation_and_nothing_else_changed(obj, cluster, version):
    raw = orjson.dumps(obj)
    expected = orjson.loads(raw)
    meta = expected.get("metadata")
    if not isinstance(meta, dict):
        meta = expected["metadata"] = {}
    if not isinstance(meta.get("annotations"), dict):
        meta["annotations"] = {}
    meta["annotations"][CLUSTER_ANNOTATION] = cluster
    if version is not None:
        meta["resourceVersion"] = version
    assert orjson.loads(tagged(raw, cluster, version)) == expected
    assert orjson.loads(raw) == obj, "the cached bytes are not touched"


def test_tokens_name_each_clusters_version_and_refuse_what_is_not_ours():
    token = encode_versions({"b": "12", "a": "7"})
    assert token.startswith("kcg1.") and decode_versions(token) == {"a": "7", "b": "12"}
    ids = encode_versions({"a": "deadbeef.12", "b": "40"})
    assert decode_versions(ids, ids=True)["a"] == "deadbeef.12"
    for bad in ("12", "kcg1.!!", "kcg1." + "e30", ids):  # e30: {} is fine; ids need ids=True
        if bad == "kcg1.e30":
            assert decode_versions(bad) == {}
            continue
        with pytest.raises(StatusError) as refused:
            decode_versions(bad)
        assert refused.value.code == 400
