"""--metadata-only against the real API server: the cache holds metadata alone, asked of the
API server in that form, and what it answers equals the API server's own metadata answers."""

from __future__ import annotations

import json
import ssl

import httpx
import pytest

from tests.app.conftest import run_gateway
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster

LIST_FORM = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
ONE_FORM = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


def _without_volatile(doc: dict) -> dict:
    for item in doc.get("items", [doc]):
        item.get("metadata", {}).pop("managedFields", None)  # the gateway drops them
    if "items" in doc:
        doc.get("metadata", {}).pop("resourceVersion", None)
    return doc


def test_a_metadata_only_cache_holds_and_answers_metadata_as_the_api_server_does(
        local_cluster, kube, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for i in range(3):
        kube.create(path, {"metadata": {"name": f"m{i}", "labels": {"k": str(i)}},
                           "data": {"big": "x" * 20_000}})
    server = local_cluster.primary
    direct = httpx.Client(base_url=server.url, timeout=30,
                          verify=ssl.create_default_context(cafile=str(server.ca_file)),
                          headers={"Authorization": f"Bearer {local_cluster.admin.token}"})
    with run_gateway(local_cluster, metadata_only=("configmaps", "po")) as gateway, \
            httpx.Client(base_url=gateway.url, timeout=30) as ours:
        try:
            wait_until(lambda: len(ours.get(path, headers={"Accept": LIST_FORM}).json()
                                   .get("items", [])) == 3, 20, message="cached")
            entry = next(e for g, e in gateway.gateway.default.caches.entries().items()
                         if g.resource == "configmaps")
            held = [o for o in entry.hub.view.values() if o.namespace == namespace]
            assert len(held) == 3
            for obj in held:  # what the API server sent: metadata only, never the 20 kB of data
                assert set(json.loads(obj.raw)) == {"kind", "apiVersion", "metadata"}
                assert len(obj.raw) < 2_000
            listed = ours.get(path, headers={"Accept": LIST_FORM})
            theirs = direct.get(path, headers={"Accept": LIST_FORM})
            assert listed.status_code == theirs.status_code == 200
            rv = listed.json()["metadata"]["resourceVersion"]
            assert _without_volatile(listed.json()) == _without_volatile(theirs.json())
            mine = ours.get(f"{path}/m1", headers={"Accept": ONE_FORM})
            theirs = direct.get(f"{path}/m1", headers={"Accept": ONE_FORM})
            assert _without_volatile(mine.json()) == _without_volatile(theirs.json())
            selected = ours.get(path, params={"labelSelector": "k in (0,2)"},
                                headers={"Accept": LIST_FORM}).json()
            assert sorted(i["metadata"]["name"] for i in selected["items"]) == ["m0", "m2"]

            for url, accept in ((path, "application/json"), (f"{path}/m1", "application/json"),
                                (path, "application/json;as=Table;g=meta.k8s.io;v=v1")):
                refused = ours.get(url, headers={"Accept": accept})
                assert refused.status_code == 406, refused.text
                assert "--metadata-only" in refused.json()["message"]
            pods = ours.get(f"/api/v1/namespaces/{namespace}/pods",
                            params={"fieldSelector": "spec.nodeName=n1"},
                            headers={"Accept": LIST_FORM})
            assert pods.status_code == 400 and "spec.nodeName" in pods.json()["message"]

            with ours.stream("GET", path, params={"watch": "1", "resourceVersion": rv},
                             headers={"Accept": ONE_FORM}) as stream:
                kube.patch(f"{path}/m2", {"metadata": {"labels": {"k": "changed"}}})
                event = json.loads(next(stream.iter_lines()))
            assert event["type"] == "MODIFIED"
            assert event["object"]["metadata"]["labels"] == {"k": "changed"}
            assert set(event["object"]) == {"kind", "apiVersion", "metadata"}
        finally:
            direct.close()
