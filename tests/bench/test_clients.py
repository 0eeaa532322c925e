"""Today's clients' benchmark table: watch-list's first state beside a LIST, and the memory
``--metadata-only`` saves."""

from __future__ import annotations

from bench.clients import table


def test_the_tables_set_watch_list_beside_a_list_and_whole_beside_metadata():
    results = {
        "watch_list": {"pods": 10_000, "rounds": 5, "apiserver_watch_list_status": 422,
                       "watch_list_ms": 410.4, "gateway_list_ms": 180.2, "apiserver_list_ms": 950.0,
                       "watch_list_bytes": 30_500_000, "gateway_list_bytes": 30_000_000,
                       "apiserver_list_bytes": 60_000_000},
        "metadata_only": {"pods": 10_000, "idle_mib": 60.0, "saved_mib": 30.0,
                          "whole": {"ready_seconds": 3.2, "rss_mib": 100.0, "kib_per_pod": 4.1,
                                    "metadata_list_bytes": 9_000_000, "full_list_status": 200},
                          "metadata": {"ready_seconds": 1.1, "rss_mib": 70.0, "kib_per_pod": 1.02,
                                       "metadata_list_bytes": 9_000_000,
                                       "full_list_status": 406}}}
    text = table(results)
    assert "| watch-list through the gateway: to the initial-events-end bookmark | 410 ms | " \
           "30,500,000 |" in text
    assert "(its watch-list: HTTP 422) | 950 ms |" in text
    assert "| `--metadata-only pods` | 70 MiB | 1.02 KiB | 1.1 s | 9,000,000 bytes | HTTP 406 |" \
        in text
    assert "| whole objects | 100 MiB | 4.10 KiB | 3.2 s |" in text
