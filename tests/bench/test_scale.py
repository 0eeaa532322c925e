"""The scale tables: each figure beside the API server's, per size and per count."""

from __future__ import annotations

from bench.scale import objects_table, scale_pod, subscribers_table


def _wrk(p50, rps):
    return {"p50_ms": p50, "p99_ms": p50 * 2, "requests_per_second": rps, "wrk_cpu_percent": 30.0}


def test_one_label_query_selects_a_hundred_pods_at_every_size():
    groups = [scale_pod(i)["metadata"]["labels"]["group"] for i in range(50_000)]
    assert groups.count("g-7") == 100 and groups.count("g-499") == 100
    assert scale_pod(123)["metadata"]["labels"]["app"] == "app-23", "the benchmark's own labels kept"


def test_the_objects_table_quotes_each_figure_beside_the_api_servers():
    results = {"objects": {"10000": {
        "pods": 10_000, "raw_seconds": 1.5, "sync_seconds": 2.25, "rss_per_object": 4096,
        "stripped_per_object": 2048, "q1_gateway": _wrk(0.5, 1800), "q1_apiserver": _wrk(10.0, 95),
        "q5_gateway": _wrk(60.0, 15), "q5_apiserver": _wrk(700.0, 1.25), "refresh_ms": 12.5}}}
    header, _, row = objects_table(results).splitlines()
    assert header.count("|") == row.count("|")
    assert ("| 10,000 | 2.25 s (1.50 s) | 4.0 KiB (2.0 KiB) | 0.50 / 10.00 ms (20.0× lower) | "
            "150,000 / 12,500 (12.0×) | 12.5 / 700 ms |") == row


def test_the_subscribers_table_reports_cpu_per_delivery_and_memory_per_subscriber():
    side = {"p50_ms": 15.0, "p99_ms": 30.0, "lost": 0, "receiver_cpu_percent": 9.5}
    results = {"rate": 10.0, "subscribers": {"5000": {
        "gateway": {**side, "gateway_cpu_us_per_delivery": 8.4, "rss_per_subscriber_kib": 21.5,
                    "gateway_user_us_per_delivery": 3.2},
        "apiserver": {**side, "p99_ms": 45.0, "lost": 2, "receiver_cpu_percent": 11.0,
                      "apiserver_cpu_us_per_delivery": 6.1}}}}
    header, _, row = subscribers_table(results).splitlines()
    assert header.count("|") == row.count("|") and "× 10/s" in header
    assert row == ("| 5,000 | 15.0 / 15.0 ms | 30.0 / 45.0 ms | 0 / 2 | 8.4 (user 3.2) / 6.1 µs | 21.5 KiB | "
                   "9.5 / 11.0 % |")


def test_the_api_servers_share_is_left_out_where_the_noise_outweighs_it():
    side = {"p50_ms": 4.0, "p99_ms": 6.0, "lost": 0, "receiver_cpu_percent": 0.2}
    results = {"rate": 10.0, "subscribers": {"5": {
        "gateway": {**side, "gateway_cpu_us_per_delivery": 333.3, "rss_per_subscriber_kib": 36.0},
        "apiserver": {**side, "apiserver_cpu_us_per_delivery": -266.7}}}}
    assert "| 333.3 (user —) / — µs |" in subscribers_table(results)


def test_make_bench_scale_asks_for_no_subscribers():
    from bench.scale import _counts

    assert _counts("none") == () and _counts("1000,150000") == (1000, 150000)


def test_the_150000_pods_run_is_rendered_beside_the_rest_with_its_targets():
    """``make bench-scale``'s results (docs/scale.json) get their own table, their command,
    and verdict rows: RSS per object against the stripped JSON, Q1 p50 flat."""
    import json
    from pathlib import Path

    from bench.report import render, targets

    results = json.loads((Path(__file__).parents[2] / "docs" / "benchmarks.json").read_text())
    row = {"raw_seconds": 1.5, "sync_seconds": 2.25, "stripped_per_object": 2048,
           "q1_apiserver": _wrk(10.0, 95), "q5_gateway": _wrk(60.0, 15),
           "q5_apiserver": _wrk(700.0, 1.25), "refresh_ms": 12.5}
    results["scale_large"] = {"command": "python -m bench.scale --pods 1000,150000",
                              "date": "2026-11-28", "objects": {
        "1000": {**row, "pods": 1000, "rss_per_object": 8192, "q1_gateway": _wrk(0.2, 4000)},
        "150000": {**row, "pods": 150_000, "rss_per_object": 3584, "q1_gateway": _wrk(0.4, 2000)}}}
    verdicts = {t: (m, ok) for t, m, ok in targets(results)}
    rss = verdicts["150,000 Pods: RSS per object ≤ 1.7× the stripped JSON (make bench-scale)"]
    assert rss == ("1.75× (3.5 against 2.0 KiB)", False)
    flat = verdicts["150,000 Pods: Q1 p50 flat (≤ 1.5× the 1,000 Pods' figure)"]
    assert flat[1] is False and flat[0].startswith("2.00×")
    report = render(results)
    assert "### To 150,000 Pods (`make bench-scale`)" in report
    assert "`python -m bench.scale --pods 1000,150000`" in report
    assert "| 150,000 | 2.25 s (1.50 s) |" in report
