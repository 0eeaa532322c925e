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


def test_request_latencies_are_exposed_as_prometheus_clients_own_histogram_would_be():
    """The lock-free latency histogram, fed the same times as prometheus_client's own
    ``Histogram``, exposes the same buckets (cumulative, ``le`` as Go writes it), count and
    sum, per route and code — bounds included: a time equal to a bound counts under it."""
    from prometheus_client import CollectorRegistry, Histogram, generate_latest

    from app.http.metrics import _BUCKETS, Latencies

    ours, theirs = CollectorRegistry(), CollectorRegistry()
    latencies = Latencies()
    ours.register(latencies)
    reference = Histogram(Latencies.NAME, "Time to the first byte of the answer, by route and "
                          "code", ["route", "code"], buckets=_BUCKETS, registry=theirs)
    times = [0.0, 0.0001, 0.0005, 0.0007, 0.001, 0.003, 0.05, 0.2, 1.0, 3.0, 10.0, 42.0]
    for n, seconds in enumerate(times):
        route, status = ("resource", 200) if n % 3 else ("discovery", 404)
        latencies.observe(route, status, seconds)
        reference.labels(route, str(status)).observe(seconds)

    def samples(registry: CollectorRegistry) -> set:
        text = generate_latest(registry).decode()
        return {(s.name, tuple(sorted(s.labels.items())), round(s.value, 9))
                for family in text_string_to_metric_families(text) for s in family.samples
                if not s.name.endswith("_created")}

    assert samples(ours) == samples(theirs)
    assert latencies.observed("resource", 200) == (8, sum(t for n, t in enumerate(times) if n % 3))
    assert latencies.observed("resource", 500) == (0, 0.0)
