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


def test_the_gateways_own_cpu_is_the_median_of_its_rounds_differences_from_the_floor():
    from bench.fanout import own_cpu

    sse = {"gateway_cpu_us_per_delivery": 12.8, "cpu_rounds_us": [12.8, 10.2, 11.5]}
    floor = {"gateway_cpu_us_per_delivery": 9.1, "cpu_rounds_us": [9.1, 9.5, 10.3]}
    assert own_cpu(sse, floor) == (1.2, [3.7, 0.7, 1.2])  # paired by round, not sorted apart
    # a run without rounds: its one difference
    assert own_cpu({"gateway_cpu_us_per_delivery": 12.4},
                   {"gateway_cpu_us_per_delivery": 9.7}) == (2.7, [2.7])
    # a round whose CPU was not measured on one side: the first round's alone
    assert own_cpu({**sse, "cpu_rounds_us": [12.8, None, 11.5]}, floor) == (3.7, [3.7])
    assert own_cpu({"p99_ms": 1.0}, floor) is None


def test_the_table_shows_each_rounds_cpu_where_a_run_had_rounds():
    text = table({"200 subscribers x 50 changes/s": {
        "gateway SSE": {**_ROW, "gateway_cpu_us_per_delivery": 12.8,
                        "gateway_user_us_per_delivery": 2.5, "cpu_rounds_us": [12.8, 10.2, 11.5]},
        "floor SSE": {**_ROW, "gateway_cpu_us_per_delivery": 9.1, "cpu_rounds_us": [9.1]}}})
    assert "| 12.8 µs (user 2.5); rounds 12.8, 10.2, 11.5 |" in text
    assert "| 9.1 µs |" in text  # one round: nothing more to show


def test_the_own_cpu_target_follows_the_median_of_the_rounds_not_the_first():
    import json
    from pathlib import Path

    from bench.report import render

    results = json.loads((Path(__file__).parents[2] / "docs" / "benchmarks.json").read_text())
    row = "fan-out 200 subscribers x 50 changes/s (gateway SSE): the gateway's own CPU ≤ 2 µs"
    sides = results["fanout"]["200 subscribers x 50 changes/s"]
    results["size"].pop("cpu_rounds", None)  # a run from before rounds
    for scenario in results["fanout"].values():
        for side in scenario.values():
            side.pop("cpu_rounds_us", None)
    older = render(results)
    assert "The gateway's own CPU is measured in" not in older
    line = next(line for line in older.splitlines() if line.startswith(f"| {row}"))
    first = sides["gateway SSE"]["gateway_cpu_us_per_delivery"] - sides["floor SSE"][
        "gateway_cpu_us_per_delivery"]
    assert f"the gateway's own {first:.1f} µs" in line and "rounds" not in line  # its one round
    results["size"]["cpu_rounds"] = 3
    sides["gateway SSE"].update(gateway_cpu_us_per_delivery=12.8, cpu_rounds_us=[12.8, 10.2, 11.5])
    sides["floor SSE"].update(gateway_cpu_us_per_delivery=9.1, cpu_rounds_us=[9.1, 9.5, 10.3])
    report = render(results)
    assert "The gateway's own CPU is measured in 3 rounds" in report
    line = next(line for line in report.splitlines() if line.startswith(f"| {row}"))
    assert "the gateway's own 1.2 µs, the median of 3 rounds' 3.7, 0.7, 1.2" in line
    assert line.endswith("| yes |")  # the first round alone (3.7) would miss
    sides["gateway SSE"].update(gateway_cpu_us_per_delivery=10.0, cpu_rounds_us=[10.0, 12.0, 13.0])
    line = next(line for line in render(results).splitlines() if line.startswith(f"| {row}"))
    assert "the median of 3 rounds' 0.9, 2.5, 2.7" in line
    assert line.endswith("| **no** |")  # the first round alone (0.9) would pass
