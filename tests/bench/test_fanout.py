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
