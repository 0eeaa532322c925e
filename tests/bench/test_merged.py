"""The merged-list benchmark's table: each answer against one cluster's, and its memory."""

from __future__ import annotations

from bench.merged import table


def test_the_table_quotes_each_answer_against_one_clusters():
    results = {"pods": 10_000, "answers": {
        "merged identity": {"p50_ms": 300.0, "p90_ms": 330.0, "bytes": 30_500_000,
                            "peak_mib": 1.5, "peak_max_mib": 2.0, "allocated_mib": 0.75,
                            "allocated_made_mib": 0.9},
        "one identity": {"p50_ms": 100.0, "p90_ms": 120.0, "bytes": 30_000_000, "peak_mib": 0.2,
                         "peak_max_mib": 0.4, "allocated_mib": 0.1},
        "apiserver identity": {"p50_ms": 900.0, "p90_ms": 950.0, "bytes": 60_000_000},
        "one gzip": {"p50_ms": 50.0, "p90_ms": 60.0, "bytes": 3_000_000, "peak_mib": 0.3, "allocated_mib": 0.1,
                     "peak_max_mib": 0.5},
        "merged gzip": {"p50_ms": 75.0, "p90_ms": 80.0, "bytes": 3_100_000, "peak_mib": 0.3, "allocated_mib": 0.2,
                        "peak_max_mib": 0.5}}}
    rows = {tuple(c.strip() for c in line.split("|")[1:3]): line
            for line in table(results).splitlines()[2:]}
    merged = rows[("`/clusters/*/api/v1/pods` (3 × 10,000)", "identity")]
    assert "| 30,500,000 | 300 ms | 330 ms | 3.00× | 0.75 MiB | 0.90 MiB | +1.5 MiB; +2.0 MiB |" \
        in merged
    assert "| 9.00× | — | — | — |" in rows[("the API server, `resourceVersion=0` (30,000)", "identity")]
    assert "| 1.50× |" in rows[("`/clusters/*/api/v1/pods` (3 × 10,000)", "gzip")], \
        "each encoding against one cluster's in the same encoding"


def test_the_allocation_target_compares_answers_made_with_answers_made():
    from bench.report import merged_targets

    def answer(allocated: float, made: float) -> dict:
        return {"p50_ms": 100.0, "p90_ms": 110.0, "bytes": 1, "allocated_mib": allocated,
                "allocated_made_mib": made}

    results = {"merged": {"pods": 10_000, "answers": {
        "merged identity": answer(0.98, 1.1), "one identity": answer(0.08, 0.9)}}}
    rows = [row for row in merged_targets(results["merged"]) if "allocated per answer" in row[0]]
    assert rows == [("merged list: allocated per answer within 2× one cluster's (identity, each "
                     "answer made)", "1.22× (1.10 against 0.90 MiB)", True)]
