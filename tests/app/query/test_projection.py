"""``fields=``: identity plus the named paths, each in its place; bytes kept per version."""

from __future__ import annotations

import orjson
import pytest

from app.query.projection import Projection, ProjectionError, parse_fields
from informer_core.encoded import EncodedObject

POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "7", "uid": "u",
                    "labels": {"app.kubernetes.io/name": "web", "x": "y"}},
       "spec": {"nodeName": "n1", "containers": [{"name": "a", "image": "i1"},
                                                 {"name": "b", "image": "i2"},
                                                 {"name": "c", "image": "i3"}]},
       "status": {"phase": "Running"}}


def project(text: str) -> dict:
    return Projection(text, parse_fields(text)).project(POD)


def test_identity_and_the_named_paths_only():
    assert project("status.phase,spec.nodeName") == {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "7"},
        "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}


def test_list_indexes_keep_their_elements_in_order():
    got = project("spec.containers.2.image,spec.containers.0.name")
    assert got["spec"] == {"containers": [{"name": "a"}, {"image": "i3"}]}
    assert project("spec.containers.1")["spec"] == {"containers": [{"name": "b", "image": "i2"}]}


def test_labels_by_bracketed_key_and_missing_paths_left_out():
    got = project("metadata.labels[app.kubernetes.io/name],status.nothing,spec.containers.9.name")
    assert got["metadata"]["labels"] == {"app.kubernetes.io/name": "web"}
    assert "status" not in got and "spec" not in got


def test_a_whole_value_covers_its_parts_in_either_order():
    assert project("spec,spec.containers.0.name")["spec"] == POD["spec"]
    assert project("spec.containers.0.name,spec")["spec"] == POD["spec"]


def test_bytes_are_kept_per_version():
    projection = Projection("status.phase", parse_fields("status.phase"))
    first = EncodedObject.from_dict(POD)
    assert orjson.loads(projection.bytes_of(first))["status"] == {"phase": "Running"}
    assert projection.bytes_of(first) is projection.bytes_of(first)
    changed = dict(POD, metadata=dict(POD["metadata"], resourceVersion="8"),
                   status={"phase": "Failed"})
    assert orjson.loads(projection.bytes_of(EncodedObject.from_dict(changed)))["status"] == \
        {"phase": "Failed"}


@pytest.mark.parametrize("text", ["a,,b", "spec.containers.*.image", "a.",
                                  ",".join(f"p{i}" for i in range(65))])
def test_malformed_field_lists(text):
    with pytest.raises(ProjectionError):
        parse_fields(text)
