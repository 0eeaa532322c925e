"""The budget of token reviews strangers may cause: per address, and in line."""

from __future__ import annotations

import pytest

from app.auth.review_budget import ReviewBudget
from app.kube.status import StatusError
from tests.app.auth.reviewing import Clock


def test_an_address_gets_its_burst_then_its_rate_and_then_429():
    clock = Clock()
    budget = ReviewBudget(rate=10, burst=20, clock=clock)
    for _ in range(20):
        budget.admit("10.0.0.1")
        budget.done()
    with pytest.raises(StatusError) as info:
        budget.admit("10.0.0.1")
    error = info.value
    assert (error.code, error.reason, error.headers) == (429, "TooManyRequests", {"Retry-After": "1"})
    assert "10.0.0.1" in error.message
    budget.admit("10.0.0.2")  # another address has its own bucket
    budget.done()
    clock.now += 0.5  # five reviews' worth
    for _ in range(5):
        budget.admit("10.0.0.1")
        budget.done()
    with pytest.raises(StatusError):
        budget.admit("10.0.0.1")
    assert budget.refused == 2


def test_the_line_is_bounded_whatever_the_addresses():
    budget = ReviewBudget(in_flight=2, waiting=3, clock=Clock())
    for i in range(5):
        budget.admit(f"10.0.0.{i}")
    with pytest.raises(StatusError) as info:
        budget.admit("10.0.0.99")
    assert info.value.code == 429 and "waiting" in info.value.message
    budget.done()
    budget.admit("10.0.0.99")


def test_the_addresses_remembered_are_bounded():
    budget = ReviewBudget(max_clients=100, clock=Clock())
    for i in range(1000):
        budget.admit(f"10.0.{i // 256}.{i % 256}")
        budget.done()
    assert len(budget.clients) == 100


def test_buckets_take_a_whole_set_or_nothing_and_refill_at_their_rate():
    from app.auth.review_budget import Buckets

    clock = Clock()
    buckets = Buckets(rate=100, burst=500, clock=clock)
    assert buckets.available("bob") == 500
    buckets.spend("bob", 300)
    assert buckets.available("bob") == 200 and buckets.available("carol") == 500
    clock.now += 1
    assert buckets.available("bob") == 300
    clock.now += 60
    assert buckets.available("bob") == 500  # never more than the burst
