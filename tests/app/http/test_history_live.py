"""/history/ against the real API server: what changed, newest first, with RFC 6902 patches,
paged and selected; read as the list (or get) of that resource by today's RBAC — on SQLite
and PostgreSQL."""

from __future__ import annotations

import httpx
import jsonpatch
import pytest

from tests.app.conftest import run_gateway
from tests.app.history.kept import configmap, wait_kept

pytestmark = pytest.mark.cluster


def test_an_objects_history_is_its_changes_newest_first_each_a_patch_from_the_one_before(
        local_cluster, kube, namespace, history_url):
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    with run_gateway(local_cluster, history=history_url) as running, \
            httpx.Client(base_url=running.url, timeout=30) as http:
        assert http.get(base).status_code == 200
        states = [kube.create(base, configmap("web", tier="web"))]
        states.append(kube.patch(f"{base}/web", {"data": {"v": "1"}}))
        states.append(kube.patch(f"{base}/web", {"metadata": {"labels": {"tier": "db"}}}))
        kube.create(base, configmap("other", tier="web"))
        kube.delete(f"{base}/web")
        last = kube.patch(f"{base}/other", {"data": {"v": "9"}})
        running.wait_seen(last)
        wait_kept(running, last)

        answer = http.get(f"/history{base}/web")
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["kind"] == "ChangeList"
        changes = body["items"]
        assert [c["type"] for c in changes] == ["DELETED", "MODIFIED", "MODIFIED", "ADDED"]
        versions = [int(c["resourceVersion"]) for c in changes]
        assert versions == sorted(versions, reverse=True)
        assert [c["resourceVersion"] for c in changes[1:]] == \
            [s["metadata"]["resourceVersion"] for s in reversed(states)]
        assert "patch" not in changes[-1]  # the first state: nothing before it
        for newer, older in zip(changes, changes[1:]):  # each patch makes the one before it
            assert jsonpatch.apply_patch(older["object"], newer["patch"]) == newer["object"]
        assert {"op": "replace", "path": "/data/v", "value": "1"} in changes[2]["patch"]
        assert changes[0]["time"].endswith("Z")

        # the collection's: both objects; selected (tier=web: web's changes until it left
        # the selection, and the change that left it); paged; without objects
        every = http.get(f"/history{base}").json()["items"]
        assert {c["object"]["metadata"]["name"] for c in every} == {"web", "other"}
        web = http.get(f"/history{base}?labelSelector=tier%3Dweb").json()["items"]
        assert [(c["object"]["metadata"]["name"], c["type"]) for c in web] == [
            ("other", "MODIFIED"), ("other", "ADDED"), ("web", "MODIFIED"), ("web", "MODIFIED"),
            ("web", "ADDED")]
        paged, token = [], ""
        while True:
            page = http.get(f"/history{base}?limit=2" + (f"&continue={token}" if token else ""))
            assert page.status_code == 200, page.text
            paged += page.json()["items"]
            token = page.json()["metadata"].get("continue", "")
            if not token:
                break
        assert [c["resourceVersion"] for c in paged] == [c["resourceVersion"] for c in every]
        slim = http.get(f"/history{base}?fields=patch").json()["items"]
        assert all("object" not in c for c in slim) and "patch" in slim[1]
        later = http.get(f"/history{base}", params={"since": every[1]["time"]}).json()["items"]
        assert [c["resourceVersion"] for c in later] == [c["resourceVersion"] for c in every[:2]]

        for bad, said in (("?since=yesterday", "RFC 3339"), ("?limit=0", "limit"),
                          ("?continue=forged", "continue token"),
                          ("?labelSelector=a%3D%3D%3Db", "selector")):
            refused = http.get(f"/history{base}{bad}")
            assert refused.status_code == 400 and said in refused.json()["message"], bad
        assert http.get("/history/core/v1/nosuch").status_code == 404
        merged = http.get(f"/clusters/*/history{base}").json()["items"]  # one cluster: its own
        assert [(c["cluster"], c["resourceVersion"]) for c in merged] == [
            ("default", c["resourceVersion"]) for c in every]


def test_history_is_read_as_the_list_of_that_resource_by_todays_rbac(local_cluster, kube,
                                                                      namespace, history_url):
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    kube.create(f"/api/v1/namespaces/{namespace}/serviceaccounts",
                {"metadata": {"name": "nobody"}})
    nobody = kube.service_account_token(namespace, "nobody")
    with run_gateway(local_cluster, history=history_url, authz="kubernetes") as running, \
            httpx.Client(base_url=running.url, timeout=30) as http:
        admin = {"Authorization": f"Bearer {local_cluster.admin.token}"}
        assert http.get(f"/history{base}", headers=admin).status_code == 200
        assert http.get(f"/history{base}").status_code == 401
        assert http.get(f"/history{base}",
                        headers={"Authorization": "Bearer not-a-token"}).status_code == 401
        refused = http.get(f"/history{base}", headers={"Authorization": f"Bearer {nobody}"})
        assert refused.status_code == 403, refused.text
        assert "list" in refused.json()["message"] and refused.json()["reason"] == "Forbidden"
        one = http.get(f"/history{base}/x", headers={"Authorization": f"Bearer {nobody}"})
        assert one.status_code == 403 and "get" in one.json()["message"]
        past = http.get(f"{base}?resourceVersion=1&resourceVersionMatch=Exact",
                        headers={"Authorization": f"Bearer {nobody}"})
        assert past.status_code == 403  # the past of a list: the list's rights, first
        secrets = http.get(f"/history/api/v1/namespaces/{namespace}/secrets", headers=admin)
        assert secrets.status_code == 403  # denied by the resource policy: never kept either
