"""The resource endpoint against the real API server: the same objects, fields and discovery."""

from __future__ import annotations

import pytest

from tests.app.http.test_resources import same_objects

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("gateway_path,api_path", [
    ("/core/v1/pods", "/api/v1/pods"),
    ("/core/v1/namespaces/demo-shop/pods", "/api/v1/namespaces/demo-shop/pods"),
    ("/api/v1/namespaces/demo-shop/configmaps", "/api/v1/namespaces/demo-shop/configmaps"),
    ("/apps/v1/deployments", "/apis/apps/v1/deployments"),
    ("/apis/apps/v1/namespaces/demo-shop/deployments", "/apis/apps/v1/namespaces/demo-shop/deployments"),
    ("/example.com/v1/widgets", "/apis/example.com/v1/widgets"),
    ("/core/v1/nodes", "/api/v1/nodes"),
])
def test_lists_return_the_same_objects_as_the_apiserver(http, kube, gateway_path, api_path):
    got = http.get(gateway_path)
    assert got.status_code == 200, got.text
    body = got.json()
    expected = kube.get(api_path)
    assert body["kind"] == expected["kind"] and body["apiVersion"] == expected["apiVersion"]
    assert body["metadata"]["resourceVersion"].isdigit()
    same_objects(body["items"], expected["items"])
    keys = [(o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in body["items"]]
    assert keys == sorted(keys), "lists come in key order"


def test_field_selector_agrees_with_the_apiserver_on_server_fields(http, kube):
    for query in ("fieldSelector=status.phase%3DRunning", "fieldSelector=spec.nodeName%3Dnode-a",
                  "fieldSelector=metadata.namespace%3Ddemo-shop,status.phase!%3DRunning"):
        ours = {o["metadata"]["name"] for o in http.get(f"/core/v1/pods?{query}").json()["items"]}
        theirs = {o["metadata"]["name"] for o in kube.get(f"/api/v1/pods?{query}")["items"]}
        assert ours == theirs, query


def test_discovery_documents_are_the_apiservers(http, kube):
    for path in ("/api", "/apis", "/api/v1", "/apis/apps/v1", "/apis/example.com/v1", "/version"):
        got = http.get(path)
        assert got.status_code == 200, path
        expected = kube.get(path)
        if path in ("/api",):
            assert got.json()["versions"] == expected["versions"]
        else:
            assert got.json() == expected, path
    assert http.get("/apis/apps").json()["name"] == "apps"
    assert http.get("/apis/nosuch/v1").status_code == 404


# Path forms some clients send, answered as the API server answers them (status and kind).
_PATH_FORMS = ["/version/", "/version//", "/api/", "/api//", "/apis/", "/apis/apps/",
               "/apis/apps//", "/api/v1/", "/api/v1//", "/apis/apps/v1/",
               "/api/v1/namespaces/demo-shop/pods/", "/api/v1/namespaces/demo-shop/pods//",
               "/api/v1/nodes/", "/api/v1/nodes/node-a/", "/api/v1/namespaces/demo-shop/",
               "/apis/apps/v1/namespaces/demo-shop/deployments/", "/api/v1/namespaces//configmaps",
               "/api/v1/namespaces/demo%2Dshop/pods", "//api/v1/pods", "/api//v1/pods",
               "/api/v1/namespaces/demo-shop//pods", "/apis//apps/v1", "/healthz/", "/readyz/",
               "/livez/", "/api/v1/namespaces/demo-shop/pods/nosuch/"]


@pytest.mark.parametrize("path", _PATH_FORMS)
def test_path_forms_are_answered_as_the_apiserver_answers_them(http, local_cluster, path):
    import ssl

    import httpx

    trust = ssl.create_default_context(cafile=str(local_cluster.primary.ca_file))
    theirs = httpx.get(local_cluster.primary.url + path, verify=trust,
                       headers={"Authorization": f"Bearer {local_cluster.admin.token}"}, timeout=30)
    ours = http.get(path)
    assert ours.status_code == theirs.status_code, (path, ours.text[:200])
    if theirs.status_code == 200:
        assert ours.json().get("kind") == theirs.json().get("kind"), path
        if "items" in theirs.json():
            names = sorted(o["metadata"]["name"] for o in theirs.json()["items"])
            assert sorted(o["metadata"]["name"] for o in ours.json()["items"]) == names, path
    else:
        assert ours.json()["kind"] == "Status", path
