"""The report's targets: what each verdict is shown beside."""

from __future__ import annotations

import json
from pathlib import Path

from bench.report import targets

_RUN = Path(__file__).parents[2] / "docs" / "benchmarks.json"


def _row(results: dict, start: str) -> tuple[str, str, bool]:
    return next(row for row in targets(results) if row[0].startswith(start))


def _runs(p50_ms: float, requests_per_second: float) -> list[dict]:
    return [{"p50_ms": p50_ms, "requests_per_second": requests_per_second}] * 2


def test_a_ratio_to_the_api_server_is_shown_beside_the_floors_own_in_the_same_run():
    """The floor does no work on the gateway's own stack: where it too stays under 20× the API
    server, the row says so beside the gateway's figure, and the verdict is still the target's."""
    results = json.loads(_RUN.read_text())
    runs = results["queries"]["runs"]
    runs["Q3|1|apiserver"] = _runs(9.0, 80.0)
    runs["Q3|1|gateway HTTPS"] = _runs(0.6, 1_500.0)
    runs["Q3|1|floor HTTPS"] = _runs(0.5, 1_800.0)
    target, measured, met = _row(
        results, "Q3 p50 ≥ 20× lower, req/s ≥ 20× higher (gateway HTTPS, 1 conn)")
    assert measured == "15.0× lower, 18.8× req/s (the floor: 18.0× lower, 22.5× req/s)"
    assert not met  # the floor's shortfall explains a miss, it does not excuse it
    runs["Q3|1|gateway HTTPS"] = _runs(0.45, 1_700.0)
    assert _row(results, target)[2]
    # a run that did not measure that floor: the gateway's figure alone
    del runs["Q3|1|floor HTTPS"]
    assert _row(results, target)[1] == "20.0× lower, 21.2× req/s"
