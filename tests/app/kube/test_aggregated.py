"""Aggregated discovery built from the legacy documents: what a current client asks for first,
every resource with its kind, scope, verbs, names and subresources, preferred versions first."""

from __future__ import annotations

import pytest

from app.kube.aggregated import AggregatedDocuments, aggregated_version

V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"


@pytest.mark.parametrize("accept,version", [
    (f"{V2},{V2BETA1},application/json", "v2"),  # what kubectl 1.35 sends
    (f"{V2BETA1},application/json", "v2beta1"),
    ("application/json", None),
    (None, None),
    ("application/json, " + V2, None),  # the legacy one asked for first
    (V2.replace("as=APIGroupDiscoveryList", "as=Other"), None),
    (f"{V2};q=0,{V2BETA1}", "v2beta1"),
    ("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList", None),
])
def test_the_version_asked_for_first(accept, version):
    assert aggregated_version(accept) == version


class Discovery:
    api_versions_doc = {"kind": "APIVersions", "versions": ["v1"]}
    api_groups_doc = {"kind": "APIGroupList", "groups": [
        {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}},
        {"name": "example.com", "versions": [{"version": "v1beta1"}, {"version": "v1"}],
         "preferredVersion": {"version": "v1"}},
    ]}
    resource_lists = {
        "v1": {"groupVersion": "v1", "resources": [
            {"name": "pods", "singularName": "", "namespaced": True, "kind": "Pod",
             "verbs": ["get", "list", "watch"], "shortNames": ["po"], "categories": ["all"]},
            {"name": "pods/status", "singularName": "", "namespaced": True, "kind": "Pod",
             "verbs": ["get", "patch"]},
            {"name": "nodes", "singularName": "", "namespaced": False, "kind": "Node",
             "verbs": ["list"], "shortNames": ["no"]}]},
        "apps/v1": {"groupVersion": "apps/v1", "resources": [
            {"name": "deployments", "singularName": "", "namespaced": True, "kind": "Deployment",
             "verbs": ["list", "watch"], "shortNames": ["deploy"], "categories": ["all"]},
            {"name": "deployments/scale", "singularName": "", "namespaced": True,
             "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get"]}]},
        "example.com/v1": {"groupVersion": "example.com/v1", "resources": [
            {"name": "widgets", "singularName": "widget", "namespaced": True, "kind": "Widget",
             "verbs": ["list"]}]},
        # example.com/v1beta1 could not be read (its server is down)
    }


def test_the_core_root_holds_every_core_resource_with_its_subresources():
    import orjson

    body, etag, media = AggregatedDocuments().document(Discovery(), "api", "v2")
    doc = orjson.loads(body)
    assert media == V2 and etag.startswith('"')
    assert doc["kind"] == "APIGroupDiscoveryList" and doc["apiVersion"] == "apidiscovery.k8s.io/v2"
    (core,) = doc["items"]
    assert core["metadata"]["name"] == ""
    (v1,) = core["versions"]
    assert v1["version"] == "v1" and v1["freshness"] == "Current"
    pods, nodes = v1["resources"]
    assert pods == {"resource": "pods", "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                    "scope": "Namespaced", "singularResource": "pod",
                    "verbs": ["get", "list", "watch"], "shortNames": ["po"], "categories": ["all"],
                    "subresources": [{"subresource": "status", "responseKind": {
                        "group": "", "version": "v1", "kind": "Pod"}, "verbs": ["get", "patch"]}]}
    assert nodes["scope"] == "Cluster" and "categories" not in nodes


def test_the_groups_root_puts_preferred_versions_first_and_says_which_are_stale():
    import orjson

    documents = AggregatedDocuments()
    body, etag, media = documents.document(Discovery(), "apis", "v2beta1")
    doc = orjson.loads(body)
    assert media == V2BETA1 and doc["apiVersion"] == "apidiscovery.k8s.io/v2beta1"
    assert [g["metadata"]["name"] for g in doc["items"]] == ["apps", "example.com"]
    deployments = doc["items"][0]["versions"][0]["resources"][0]
    assert deployments["subresources"] == [{"subresource": "scale", "responseKind": {
        "group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": ["get"]}]
    example = doc["items"][1]["versions"]
    assert [(v["version"], v["freshness"]) for v in example] == [("v1", "Current"),
                                                                 ("v1beta1", "Stale")]
    assert example[0]["resources"][0]["singularResource"] == "widget"
    assert documents.document(Discovery(), "apis", "v2beta1")[1] == etag, "the same view: kept"
