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
