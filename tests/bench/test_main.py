"""The whole benchmark run at toy sizes, so that it keeps working (its figures live in docs/benchmarks.md)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from control_plane.pytest_plugin import unavailable

pytestmark = pytest.mark.cluster


@pytest.mark.timeout(900)
def test_quick_benchmark_run_writes_the_report(tmp_path, local_cluster):
    missing = [tool for tool in ("go", "wrk") if shutil.which(tool) is None]
    if shutil.which("py-spy") is None and not Path(sys.executable).with_name("py-spy").exists():
        missing.append("py-spy")
    if missing:
        unavailable(f"no {', '.join(missing)} for the benchmark smoke test (`make test` installs them)")
    out, raw = tmp_path / "benchmarks.md", tmp_path / "results.json"
    run = subprocess.run([sys.executable, "-m", "bench", "--quick", "--out", str(out),
                          "--json", str(raw)], capture_output=True, text=True, timeout=880)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = out.read_text()
    for heading in ("## Targets", "## Queries", "### Where the gateway's time goes",
                    "## Authorization's cost", "## Authorization from the gateway's own caches",
                    "## Initial sync", "## Change fan-out",
                    "## Several clusters: one merged list", "## How cost grows",
                    "## Today's clients"):
        assert heading in report
    assert "| Q5 | 8 | gateway HTTPS | 200 |" in report
    assert "python -m bench --quick" in report
    assert "| Q4 | 8 |" in report and "| one object by name |" in report  # authorization's cost
    assert "Q1 with --authz kubernetes" in report
    # decisions from RBAC followed: no access review for callers RBAC allows, a review each
    # without it; the revocations measured
    local = orjson.loads(raw.read_bytes())["local_authz"]["modes"]
    assert local["auto"]["access_reviews"] == 0 and local["false"]["access_reviews"] == 20
    assert local["auto"]["refused_max_ms"] > 0 and local["auto"]["watch_end_max_ms"] > 0
    assert local["auto"]["disagreements"] >= 0  # read from the gateway's /metrics
    assert "| floor SSE |" in report and "µs (the floor " in report  # the fan-out's yardstick
    assert "its receiver's deadline the changes' 2 s plus 3 s." in report  # the quick settings
    assert "The gateway's own CPU is measured in 2 rounds" in report
    assert "the median of 2 rounds' " in report  # the own-CPU targets, from both rounds
    assert "; one send() alone " in report and "(one send() alone, 600 B) |" in report  # the kernel's
    # the receiver read what every side sent (a receiver that reads nothing would report no
    # latency at all, and the tables would still be written)
    results = orjson.loads(raw.read_bytes())
    sides = [side for scenario in results["fanout"].values() for side in scenario.values()]
    sides += [side for row in results["scale"]["subscribers"].values() for side in row.values()]
    assert sides and all(side["deliveries"] > 0 for side in sides), sides
    for scenario in results["fanout"].values():  # each round measured both sides' CPU
        for side in ("gateway SSE", "floor SSE"):  # (at toy sizes a round may be under a tick)
            rounds = scenario[side]["cpu_rounds_us"]
            assert len(rounds) == 2 and all(isinstance(r, float) and r >= 0 for r in rounds), \
                (side, rounds)
