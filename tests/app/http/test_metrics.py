"""The gateway's own metrics: build info, the standard process and Python figures, and the
per-resource figures labelled by cluster."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from app.version import PYTHON, VERSION
from control_plane.fake import FakeCluster
from tests.app.conftest import run_gateway


def test_metrics_say_the_version_and_carry_the_standard_process_and_python_figures():
    with run_gateway(FakeCluster()) as gateway:
        text = httpx.get(gateway.url + "/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    (info,) = families["kcg_build_info"].samples
    assert info.labels == {"version": VERSION, "python_version": PYTHON} and info.value == 1
    for name in ("process_resident_memory_bytes", "process_open_fds", "process_cpu_seconds",
                 "python_gc_collections", "python_info"):
        assert name in families, name


def test_reviews_the_api_server_could_not_answer_are_counted_per_cluster_and_kind():
    from tests.app.fake_reviewer import TableReviewer

    reviewer = TableReviewer({"t": {"username": "u", "groups": []}}, {("u", "*", "*", "*")})
    fake = FakeCluster()
    fake.ensure_namespace("apps")
    with run_gateway(fake, reviewer=reviewer, authz="kubernetes") as gateway:
        auth = {"Authorization": "Bearer t"}
        assert httpx.get(gateway.url + "/api/v1/namespaces/apps/pods", headers=auth).status_code == 200
        reviewer.failing = True
        assert httpx.get(gateway.url + "/api/v1/namespaces/apps/configmaps",
                         headers=auth).status_code == 503
        assert httpx.get(gateway.url + "/api/v1/pods",
                         headers={"Authorization": "Bearer other"}).status_code == 503
        reviewer.failing = False
        text = httpx.get(gateway.url + "/metrics", headers=auth).text
    failed = {tuple(sorted(s.labels.items())): s.value
              for f in text_string_to_metric_families(text) if f.name == "kcg_reviews_failed"
              for s in f.samples if s.name == "kcg_reviews_failed_total"}
    assert failed == {(("cluster", "default"), ("review", "access")): 1.0,
                      (("cluster", "default"), ("review", "token")): 1.0}
