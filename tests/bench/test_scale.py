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
