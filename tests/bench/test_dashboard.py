"""The dashboard benchmark's table: ratios to the API server's full list, bytes, the 5 ms verdict."""

from __future__ import annotations

from bench.dashboard import DASHBOARD_QUERIES, table


def test_the_table_quotes_ratios_shares_and_verdicts():
    queries = {q.name: {"first_ms": 250.0, "p50_ms": 2.0, "p99_ms": 4.0, "rps": 480.0,
                        "bytes": 1_000_000, "objects": 100, "changed_ms": 12.0} for q in DASHBOARD_QUERIES}
    queries["D3"]["p50_ms"] = 8.0
    results = {"queries": queries, "full": {"apiserver_p50_ms": 400.0, "gateway_p50_ms": 9.0,
                                            "apiserver_bytes": 40 * 2**20, "gateway_bytes": 20 * 2**20}}
    text = table(results)
    rows = [line for line in text.splitlines() if line.startswith("| D")]
    assert len(rows) == len(DASHBOARD_QUERIES)
    assert "200× faster" in rows[0] and "| met |" in rows[0]
    assert "50× faster" in rows[2] and "| missed |" in rows[2]
    assert "4.8 % of the full list" in rows[0] and "| 12.0 ms |" in rows[0]
    assert "API server 400.0 ms p50 (40.0 MiB)" in text
