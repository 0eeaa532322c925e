"""Discovery for modern clients against the real API server: the aggregated documents say what
the legacy ones say, and the OpenAPI documents are the API server's own, kept and
compressed, with ETags, following a CRD added."""

from __future__ import annotations

import ssl
import subprocess

import httpx
import orjson
import pytest

from app.cache.openapi_documents import PROTOBUF
from control_plane.kubeapi import widget_crd
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster

V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def _direct(local_cluster) -> httpx.Client:
    server = local_cluster.primary
    tls = ssl.create_default_context(cafile=str(server.ca_file))
    return httpx.Client(base_url=server.url, verify=tls, timeout=60,
                        headers={"Authorization": f"Bearer {local_cluster.admin.token}"})


def test_aggregated_discovery_lists_what_the_legacy_documents_list(http, kube):
    for root, legacy_paths in (("/api", ["/api/v1"]), ("/apis", None)):
        answer = http.get(root, headers={"Accept": f"{V2},application/json"})
        assert answer.status_code == 200 and answer.headers["content-type"] == V2
        assert "Accept" in answer.headers["vary"]
        again = http.get(root, headers={"Accept": V2, "If-None-Match": answer.headers["etag"]})
        assert again.status_code == 304
        doc = answer.json()
        if legacy_paths is None:
            groups = kube.get("/apis")["groups"]
            assert [g["metadata"]["name"] for g in doc["items"]] == [g["name"] for g in groups]
            legacy_paths = [f"/apis/{v['groupVersion']}" for g in groups for v in g["versions"]]
        aggregated = {(g["metadata"]["name"], v["version"], r["resource"]): r
                      for g in doc["items"] for v in g["versions"] for r in v["resources"]}
        expected = {}
        for path in legacy_paths:
            listed = kube.get(path)
            group, _, version = listed["groupVersion"].rpartition("/")
            for entry in listed["resources"]:
                if "/" not in entry["name"]:
                    expected[(group, version, entry["name"])] = entry
        assert set(aggregated) == set(expected)
        for key, entry in expected.items():
            got = aggregated[key]
            assert got["verbs"] == entry["verbs"] and got["responseKind"]["kind"] == entry["kind"]
            assert got.get("shortNames", []) == entry.get("shortNames", [])
            assert got["scope"] == ("Namespaced" if entry["namespaced"] else "Cluster")
    legacy = http.get("/apis", headers={"Accept": "application/json"})
    assert legacy.json()["kind"] == "APIGroupList", "plain JSON asked for: the legacy document"


def test_openapi_v2_is_the_api_servers_own_compressed_and_tagged(http, local_cluster):
    with _direct(local_cluster) as direct:
        theirs = direct.get("/openapi/v2", headers={"Accept": "application/json"})
        ours = http.get("/openapi/v2", headers={"Accept": "application/json",
                                                "Accept-Encoding": "gzip"})
        assert ours.status_code == 200 and ours.headers["content-encoding"] == "gzip"
        assert orjson.loads(ours.content) == orjson.loads(theirs.content)
        etag = ours.headers["etag"]
        assert http.get("/openapi/v2", headers={"If-None-Match": etag}).status_code == 304
        proto_theirs = direct.get("/openapi/v2", headers={"Accept": PROTOBUF})
        proto_ours = http.get("/openapi/v2", headers={"Accept": PROTOBUF,
                                                      "Accept-Encoding": "identity"})
        assert proto_ours.headers["content-type"] == proto_theirs.headers["content-type"]
        assert proto_ours.content == proto_theirs.content
        assert http.get("/openapi/v3").status_code == direct.get("/openapi/v3").status_code


def test_explain_follows_a_crd_added_while_the_gateway_runs(http, kube, gateway, kubeconfig):
    from control_plane.client_tools import kubectl

    crd = widget_crd(group="explain.example.com", plural="sprockets", kind="Sprocket")
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = {
        "type": "object", "description": "A sprocket, for the explain test.",
        "properties": {"spec": {"type": "object", "properties": {
            "teeth": {"type": "integer", "description": "How many teeth it has."}}}}}
    http.get("/openapi/v2")  # kept before the CRD exists
    kube.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/sprockets.explain.example.com")
    kube.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    try:
        binary = str(kubectl("1.35"))

        def explained(*target: str) -> str:
            done = subprocess.run([binary, *target, "explain", "sprockets.spec.teeth"],
                                  capture_output=True, text=True, timeout=60)
            return done.stdout if done.returncode == 0 else ""

        wait_until(lambda: "How many teeth" in explained("--kubeconfig", str(kubeconfig)), 30,
                   message="the API server's OpenAPI to hold the CRD")
        wait_until(lambda: "How many teeth" in explained("--server", gateway.url), 30,
                   message="the gateway's to follow")
        assert explained("--server", gateway.url) == explained("--kubeconfig", str(kubeconfig))
    finally:
        kube.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                    "sprockets.explain.example.com")
