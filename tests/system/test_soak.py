"""The soak's short form: two minutes of 200 clients on a gateway process while objects churn
(``bench.soak``; ``make soak`` runs ten and plots them). Its own control plane, so the suite's
other tests do not share the load."""

from __future__ import annotations

import pytest

from bench.soak import LISTERS, soak

pytestmark = pytest.mark.cluster


@pytest.mark.timeout(420)
def test_two_minutes_of_mixed_load_lose_nothing_and_leak_nothing(cluster):
    outcome = soak(cluster, minutes=2)
    rows = outcome["rows"]
    print("\n" + "\n".join(str(r) for r in rows))
    print({k: v for k, v in outcome.items() if k != "rows"})
    assert outcome["5xx"] == 0, outcome["client_error_examples"]
    assert outcome["streams_not_equal_to_api_server"] == 0, outcome["client_error_examples"]
    assert outcome["duplicates"] == 0, outcome["duplicate_examples"]
    assert outcome["requests"] > 2_000 and outcome["events_delivered"] > 10_000
    first, last = rows[0], rows[-1]
    assert last["rss_mib"] <= first["rss_mib"] * 1.10, "RSS flat (within 10 %)"
    # the worker-thread pool comes and goes with its work (up to 40, idle ones end after 10 s);
    # a leak of one thread per stream or request would be hundreds by now
    assert last["threads"] <= first["threads"] + 10, "no thread growth"
    assert last["fds"] <= first["fds"] + 10, "no file descriptor growth"
    # tasks follow the open streams and the requests in flight, nothing else. An open stream is
    # five tasks at most: the server's request cycle, the response body, the disconnect
    # listener, the stall watchdog and its wait for the next event (that one comes and goes
    # with every wakeup, so a sample finds between four and five per stream); a lister has at
    # most one request in flight. A task left behind per request or reconnect would be
    # thousands by now.
    for row in rows:
        assert row["tasks"] <= 5 * row["streams"] + LISTERS + 5, row
