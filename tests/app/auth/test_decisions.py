"""DecisionCache: expiry per entry, an LRU bound, one computation per missing key."""

from __future__ import annotations

import asyncio

import pytest

from app.auth.decisions import DecisionCache


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def run(coro):
    return asyncio.run(coro)


def test_a_value_is_kept_for_its_own_time_to_live():
    clock = Clock()
    cache = DecisionCache(clock=clock)
    calls = []

    async def compute(value, ttl):
        calls.append(value)
        return value, ttl

    async def scenario():
        assert await cache.get("a", lambda: compute("A", 5)) == (105.0, "A", False)
        assert await cache.get("b", lambda: compute("B", 1)) == (101.0, "B", False)
        clock.now = 102.0
        assert await cache.get("a", lambda: compute("A2", 5)) == (105.0, "A", True)
        assert (await cache.get("b", lambda: compute("B2", 1)))[1] == "B2"  # expired
        clock.now = 105.0  # expiry is exclusive
        assert (await cache.get("a", lambda: compute("A3", 5)))[1] == "A3"

    run(scenario())
    assert calls == ["A", "B", "B2", "A3"]
    assert (cache.hits, cache.misses) == (1, 4)


def test_a_zero_time_to_live_is_used_once_and_not_kept():
    cache = DecisionCache(clock=Clock())

    async def scenario():
        await cache.get("k", lambda: _value("v", 0))
        assert cache.peek("k") is None and len(cache) == 0

    run(scenario())


async def _value(value, ttl):
    return value, ttl


def test_the_least_recently_used_entry_goes_first_when_full():
    cache = DecisionCache(max_entries=3, clock=Clock())

    async def scenario():
        for key in "abc":
            await cache.get(key, lambda k=key: _value(k, 60))
        assert cache.peek("a") is not None  # a is now the most recent
        await cache.get("d", lambda: _value("d", 60))
        assert [k for k in "abcd" if cache.peek(k) is not None] == ["a", "c", "d"]
        assert len(cache) == 3

    run(scenario())


def test_concurrent_misses_for_one_key_share_one_computation():
    cache = DecisionCache(clock=Clock())
    calls = 0
    release = None

    async def slow():
        nonlocal calls
        calls += 1
        await release.wait()
        return "answer", 60

    async def scenario():
        nonlocal release
        release = asyncio.Event()
        waiters = [asyncio.create_task(cache.get("k", slow)) for _ in range(100)]
        await asyncio.sleep(0.01)
        release.set()
        results = await asyncio.gather(*waiters)
        assert {r[1] for r in results} == {"answer"}

    run(scenario())
    assert calls == 1 and cache.misses == 1


def test_a_failure_reaches_every_waiter_and_is_not_kept():
    cache = DecisionCache(clock=Clock())
    attempts = 0

    async def failing():
        nonlocal attempts
        attempts += 1
        await asyncio.sleep(0.01)
        raise ConnectionError("no answer")

    async def scenario():
        results = await asyncio.gather(*(cache.get("k", failing) for _ in range(5)),
                                       return_exceptions=True)
        assert all(isinstance(r, ConnectionError) for r in results)
        with pytest.raises(ConnectionError):
            await cache.get("k", failing)

    run(scenario())
    assert attempts == 2 and len(cache) == 0


def test_a_waiter_that_goes_away_does_not_cancel_the_shared_computation():
    cache = DecisionCache(clock=Clock())

    async def slow():
        await asyncio.sleep(0.05)
        return "answer", 60

    async def scenario():
        first = asyncio.create_task(cache.get("k", slow))
        second = asyncio.create_task(cache.get("k", slow))
        await asyncio.sleep(0.01)
        first.cancel()  # the caller who started the review hung up
        assert (await second)[1] == "answer"
        assert cache.peek("k") is not None

    run(scenario())
