"""EncodedObject keeps the bytes it will be served as and the fields selection needs."""

from __future__ import annotations

import orjson

from informer_core.encoded import EncodedObject, as_dict, encode


def test_parses_key_fields_once():
    obj = {"metadata": {"name": "web", "namespace": "prod", "labels": {"app": "web"},
                        "resourceVersion": "42"}, "spec": {"x": 1}}
    enc = EncodedObject.from_dict(obj)
    assert (enc.key, enc.namespace, enc.name, enc.resource_version) == ("prod/web", "prod", "web", "42")
    assert enc.labels == {"app": "web"}
    assert orjson.loads(enc.raw) == obj
    assert enc.to_dict() == obj and enc.to_dict() is not enc.to_dict()


def test_cluster_scoped_and_odd_objects():
    assert EncodedObject.from_dict({"metadata": {"name": "n1"}}).key == "n1"
    odd = EncodedObject.from_dict({"metadata": {"name": "x", "labels": None}})
    assert odd.labels == {}
    assert EncodedObject(b'{"kind":"Thing"}').key == ""
    # any mapping, not only a dict, is read the same (dicts take a shorter way)
    from types import MappingProxyType
    proxied = EncodedObject(b"{}", MappingProxyType({"metadata": MappingProxyType(
        {"name": "p", "namespace": "ns", "labels": MappingProxyType({"a": "b"})})}))
    assert (proxied.key, proxied.labels) == ("ns/p", {"a": "b"})


def test_equality_and_helpers():
    obj = {"metadata": {"name": "a"}}
    enc = encode(obj)
    assert encode(enc) is enc
    assert enc == EncodedObject.from_dict(obj)
    assert enc == obj
    assert as_dict(enc) == obj and as_dict(obj) is obj
    assert enc["metadata"] == {"name": "a"} and enc.get("spec", 1) == 1
