"""The API server goes away: answers keep coming from the cache, saying how old they may be
(Age, Warning); /readyz stays ready and says, verbosely, that the cache is not following;
when the API server is back, both clear."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.app.conftest import wait_until

pytestmark = pytest.mark.cluster


def test_answers_from_a_cache_cut_off_from_the_api_server_say_how_old_they_may_be(
        local_cluster, kube, gateway, http):
    namespace = f"stale-{uuid.uuid4().hex[:8]}"
    kube.ensure_namespace(namespace)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    gateway.wait_seen(kube.create(path, {"metadata": {"name": "kept"}}))
    fresh = http.get(path)
    assert fresh.status_code == 200 and "age" not in fresh.headers
    assert "warning" not in fresh.headers
    assert http.get("/readyz").status_code == 200
    local_cluster.stop_apiserver()
    try:
        wait_until(lambda: "age" in http.get(path).headers, 15,
                   message="answers to say they may be old")
        time.sleep(2.0)
        began = time.monotonic()
        cut_off = http.get(path)
        assert time.monotonic() - began < 1.0  # from the cache, at once: no hang, no 5xx
        assert cut_off.status_code == 200
        assert [o["metadata"]["name"] for o in cut_off.json()["items"]] == ["kept"]
        assert int(cut_off.headers["age"]) >= 2
        assert "the cache of configmaps has not followed the API server since" in \
            cut_off.headers["warning"]
        one = http.get(f"{path}/kept")
        assert one.status_code == 200 and int(one.headers["age"]) >= 2
        wait_until(lambda: "serving from the cache" in http.get("/readyz?verbose").text, 15,
                   message="/readyz?verbose to say the cache is not following")
        assert http.get("/readyz").status_code == 200, "ready: the cache is all there is"
    finally:
        local_cluster.start_apiserver()
    wait_until(lambda: "age" not in http.get(path).headers, 60,
               message="answers to be current again")
    wait_until(lambda: "serving from the cache" not in http.get("/readyz?verbose").text, 30,
               message="/readyz?verbose to say the cache follows again")
