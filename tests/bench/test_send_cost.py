"""bench.send_cost: every frame written reaches the reader, and the CPU per write is the
writer's own, user and system apart."""

from __future__ import annotations

from bench.send_cost import run


def test_every_write_is_read_and_its_cost_is_measured():
    got = run(connections=20, rate=20, seconds=1.0, size=100)
    # run() itself fails unless the reader read every byte written: the writes were real
    assert got["writes"] >= 20 * 20 and got["writes"] % 20 == 0
    assert got["cpu_us_per_write"] > 0  # the split below is the kernel's sampled estimate
    assert abs(got["user_us_per_write"] + got["system_us_per_write"]
               - got["cpu_us_per_write"]) <= 0.02
