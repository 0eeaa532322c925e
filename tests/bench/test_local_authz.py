"""bench.local_authz's own arithmetic (the measured run is in test_main's quick run)."""

from __future__ import annotations

from bench.local_authz import index_memory, table


def test_the_index_memory_is_measured_for_the_bindings_asked():
    measured = index_memory(bindings=1000)
    assert measured["bindings"] == 1000
    assert 100 < measured["per_binding"] < 10_000  # bytes: something, and not absurd


def test_the_table_puts_both_modes_side_by_side():
    row = {"access_reviews": 0, "token_reviews": 1000, "first_p50_ms": 3.0, "first_p99_ms": 9.0,
           "known_p50_ms": 1.0, "known_p99_ms": 2.0}
    results = {"callers": 1000, "index": {"bindings": 10_000, "bytes": 5 * 2**20,
                                          "per_binding": 524.0},
               "modes": {"auto": {**row, "refused_p50_ms": 40.0, "refused_max_ms": 90.0,
                                  "watch_end_p50_ms": 120.0, "watch_end_max_ms": 300.0,
                                  "pod_refused_p50_ms": 30.0, "pod_refused_max_ms": 60.0,
                                  "pod_watch_end_p50_ms": 11.0, "pod_watch_end_max_ms": 17.0,
                                  "rounds": 10, "disagreements": 2},
                         "false": {**row, "access_reviews": 1000}},
               "sweep": {"streams": 10_000, "churn_every": 0.2,
                         "still": {"rbac_changes": 0, "gateway_cpu_percent": 61.0, "p50_ms": 66.0,
                                   "p99_ms": 218.0, "deliveries": 3_000_000, "lost": 0},
                         "churn": {"rbac_changes": 378, "gateway_cpu_percent": 81.0,
                                   "p50_ms": 304.0, "p99_ms": 605.0, "deliveries": 2_999_990,
                                   "lost": 10}}}
    text = table(results)
    assert "| SubjectAccessReviews sent | 0 | 1,000 |" in text
    assert "| first ÷ known, p50 | 3.0× | 3.0× |" in text
    assert "40 / 90 ms" in text and "5.0 MiB" in text
    assert "| a token's Pod deleted → refused (p50 / max of 10) | 30 / 60 ms |" in text
    assert "the gateway's copy not (a moment apart) | 2 |" in text
    assert "| the gateway's CPU | 61 % | 81 % |" in text
    assert "| deliveries (lost) | 3,000,000 (0) | 2,999,990 (10) |" in text
