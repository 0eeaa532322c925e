"""The benchmarks, at toy sizes, so that they keep working (their figures live in docs/benchmarks.md)."""

from __future__ import annotations

import shutil

import pytest

from informer_core.testing.pytest_plugin import in_ci

pytestmark = pytest.mark.cluster


@pytest.mark.timeout(300)
def test_sync_benchmark_smoke(local_cluster):
    from bench.sync_pods import run, table

    results = run(pods=40, rounds=1, log=lambda *a: None)
    assert results["ours"][0]["objects"] == 40
    assert results["official"][0]["objects"] == 40
    assert results["ours-heap"][0]["traced_bytes"] > 0
    assert "informer_core (ours)" in table(results)


@pytest.mark.timeout(300)
def test_fanout_benchmark_smoke(local_cluster):
    if shutil.which("go") is None:
        if in_ci():
            pytest.fail("CI=true and no Go toolchain (make test installs golang-go)")
        pytest.skip("FAN-OUT BENCHMARK SMOKE SKIPPED: no Go toolchain")
    from bench.fanout import run, table

    results = run(subscribers=5, rate=5, seconds=2, objects=2, settle=3, log=lambda *a: None)
    (sides,) = results.values()
    for side in ("gateway SSE", "apiserver watch"):
        assert sides[side]["connected"] == 5
        assert sides[side]["deliveries"] == 5 * 10 and sides[side]["lost"] == 0
    assert "gateway SSE" in table(results)
