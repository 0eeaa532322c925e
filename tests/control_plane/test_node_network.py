"""The node's network undone as it was found: a route the machine had for the node's range is put
back, not deleted (each case in a network namespace of its own: the machine's routes are never
touched)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_CASE = """
import subprocess
from control_plane import node_network as network
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
if {before!r}:
    subprocess.run(["ip", "route", "add", *{before!r}.split()], check=True)
held = network.route_of(network.RESERVED)
subprocess.run(["ip", "route", "replace", "unreachable", network.RESERVED], check=True)
assert network.route_of(network.RESERVED)[0] == "unreachable"
network._put_back_route(held)
print(" ".join(network.route_of(network.RESERVED)))
"""


@pytest.mark.parametrize("before", ["blackhole 198.18.0.0/15", "198.18.0.0/15 dev lo scope link",
                                    ""])
def test_the_route_the_range_had_is_put_back_and_none_is_left_where_there_was_none(before):
    if os.geteuid() != 0:
        pytest.fail("a network namespace of its own needs root (CI runs as root)")
    done = subprocess.run(["unshare", "--net", sys.executable, "-c", _CASE.format(before=before)],
                          capture_output=True, text=True, timeout=60,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == before
