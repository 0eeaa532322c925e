"""bench.hostile, small: each measurement runs against the real API server and says what it
measured (the full figures are in docs/reliability.md)."""

from __future__ import annotations

import pytest

from bench.hostile import heads, tokens

pytestmark = pytest.mark.cluster


def test_a_small_crowd_of_unfinished_heads_is_measured_and_closed(local_cluster, tmp_path):
    result = heads(local_cluster, tmp_path, 60, log=lambda *a: None)
    assert result["still_open"] == 0
    assert result["rss_peak_mib"] - result["rss_before_mib"] < 150


def test_a_small_token_flood_is_measured_in_the_api_servers_own_reviews(local_cluster, tmp_path):
    result = tokens(local_cluster, tmp_path, 150, 2.0, log=lambda *a: None)
    assert 0 < result["token_reviews"] <= 20 + 10 * result["seconds"] + 5
    assert result["answers"].get(429, 0) > 0 and set(result["answers"]) <= {401, 429}
