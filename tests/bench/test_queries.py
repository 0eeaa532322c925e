"""Reading wrk's report and py-spy's folded stacks; the order the sides are measured in."""

from __future__ import annotations

import pytest

from bench.queries import SIDES, busiest_share, parse_wrk, round_order, summarize_folded

WRK = """\
Running 5s test @ http://127.0.0.1:8080/api/v1/pods
  1 threads and 8 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     2.10ms  512.00us  12.03ms   90.00%
    Req/Sec     3.80k   120.00     4.00k    70.00%
  Latency Distribution
     50%  635.00us
     75%    1.02ms
     90%    1.50ms
     99%    1.20s
  18900 requests in 5.00s, 3.52GB read
  Non-2xx or 3xx responses: 3
Requests/sec:   3780.12
Transfer/sec:    720.50MB
"""


def test_wrk_report_is_read_with_units():
    result = parse_wrk(WRK)
    assert result["p50_ms"] == pytest.approx(0.635)
    assert result["p90_ms"] == pytest.approx(1.5)
    assert result["p99_ms"] == pytest.approx(1200.0)
    assert result["requests_per_second"] == pytest.approx(3780.12)
    assert result["bytes_per_second"] == pytest.approx(720.5 * 1024 ** 2)
    assert (result["requests"], result["non_2xx"], result["socket_errors"]) == (18900, 3, 0)


def test_socket_errors_are_counted_and_a_broken_report_is_refused():
    with_errors = WRK.replace("  Non-2xx or 3xx responses: 3\n",
                              "  Socket errors: connect 0, read 2, write 0, timeout 5\n")
    assert parse_wrk(with_errors)["socket_errors"] == 7
    with pytest.raises(ValueError):
        parse_wrk("unable to connect to 127.0.0.1:1 Connection refused\n")


def test_folded_stacks_give_own_and_inclusive_shares():
    folded = ("main (app/launch/cli.py:10);serve (app/x.py:5);join (app/y.py:7) 6\n"
              "main (app/launch/cli.py:10);serve (app/x.py:6) 3\n"
              "main (app/launch/cli.py:10);send (/usr/lib/python3.11/site-packages/uvicorn/h.py:1) 1\n")
    summary = summarize_folded(folded)
    assert summary["samples"] == 10
    assert summary["own"][0] == ("join (app/y.py)", 60.0)
    assert ("serve (app/x.py)", 90.0) in summary["inclusive"]
    assert ("send (uvicorn/h.py)", 10.0) in summary["own"]


def test_every_round_measures_each_gateway_side_beside_its_floor_first_in_turn():
    first, second = round_order(0), round_order(1)
    assert sorted(first) == sorted(second) and len(first) == 2 * len(SIDES) - 1
    for side in SIDES[1:]:
        floor = side.replace("gateway", "floor")
        at = first.index(side)
        assert first[at + 1] == floor  # right beside it
        assert second.index(floor) + 1 == second.index(side)  # the floor first next round
    assert round_order(2) == first


def test_the_busiest_workers_share_is_the_median_over_rounds_and_a_dash_without_workers():
    rows = [{"worker_cpu_percent": [60.0, 40.0]}, {"worker_cpu_percent": [90.0, 10.0]},
            {"worker_cpu_percent": [51.0, 49.0]}]
    assert busiest_share(rows) == "60 %"
    assert busiest_share([{"worker_cpu_percent": [0.0, 0.0]}, {}]) == "—"
    assert busiest_share([{"requests_per_second": 1.0}]) == "—"
