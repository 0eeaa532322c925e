"""The fan-out table: the gateway's CPU per delivery where a run measured it."""

from __future__ import annotations

from bench.fanout import table

_ROW = {"p50_ms": 15.0, "p90_ms": 23.0, "p99_ms": 30.5, "max_ms": 78.0, "deliveries": 300000,
        "lost": 0, "receiver_cpu_percent": 18.7}


def test_the_cpu_per_delivery_is_shown_where_measured_and_left_blank_in_older_runs():
    text = table({"1000 subscribers x 10 changes/s": {
        "gateway SSE": {**_ROW, "gateway_cpu_percent": 12.1, "gateway_rss_mib": 104.6,
                        "gateway_cpu_us_per_delivery": 13.3, "gateway_user_us_per_delivery": 4.5},
        "gateway SSE ×2": {**_ROW, "gateway_cpu_percent": 20.0, "gateway_rss_mib": 200.0},
        "apiserver watch": _ROW}})
    header, _, new, old, apiserver = text.splitlines()
    assert header.count("|") == new.count("|") == old.count("|") == apiserver.count("|")
    assert "| 12.1 % | 13.3 µs (user 4.5) | 104.6 MiB |" in new
    assert "| 20.0 % |  | 200.0 MiB |" in old
    assert "|  |  |  | 18.7 % |" in apiserver


def test_the_report_states_the_receivers_deadline_from_the_runs_own_settings():
    """``lost`` counts what had not arrived by ``seconds + settle``: the prose reads both from
    the results rather than repeating them, and says nothing of a setting a run did not record."""
    import json
    from pathlib import Path

    from bench.report import render

    results = json.loads((Path(__file__).parents[2] / "docs" / "benchmarks.json").read_text())
    results["size"].update(fan_seconds=11.0, settle=7.0)
    results["scale"].pop("settle", None)
    report = render(results)
    assert "the changes' 11 s plus 7 s from the receiver's start" in report
    assert "A subscriber count's `lost`" not in report  # results from before it was recorded
    results["scale"].update(fan_seconds=30.0, settle=4.5)
    assert "its receiver's deadline the changes' 30 s plus 4.5 s." in render(results)
