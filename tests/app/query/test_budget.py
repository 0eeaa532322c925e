"""The queries' memory budget: charged per item, least recently used dropped past the limit."""

from __future__ import annotations

from app.query.budget import QueryMemory


def test_past_the_limit_the_least_recently_used_items_are_dropped_not_the_one_charged():
    memory = QueryMemory(limit=100)
    dropped = []
    for name in "abc":
        memory.charge(name, 40, lambda n=name: dropped.append(n))
    assert dropped == ["a"] and memory.used == 80
    memory.charge("b", 10, lambda: dropped.append("b"))  # b used again: c is now the oldest
    memory.charge("d", 40, lambda: dropped.append("d"))
    assert dropped == ["a", "c"] and memory.used == 90
    memory.charge("huge", 500, lambda: dropped.append("huge"))  # alone past the limit: kept
    assert dropped == ["a", "c", "b", "d"] and memory.used == 500 and len(memory) == 1
    assert memory.dropped == 4


def test_given_back_bytes_and_released_items_leave_the_ledger():
    memory = QueryMemory(limit=1000)
    memory.charge("a", 300, lambda: None)
    memory.charge("a", -100, lambda: None)
    assert memory.used == 200
    memory.release("a")
    memory.release("never-charged")
    assert memory.used == 0 and len(memory) == 0


def test_an_item_has_room_for_half_the_limit_less_what_it_holds():
    memory = QueryMemory(limit=1000)
    assert memory.room() == memory.room("a") == 500  # a new item
    memory.charge("a", 300, lambda: None)
    memory.charge("b", 100, lambda: None)
    assert memory.room("a") == 200 and memory.room("b") == 400 and memory.room() == 500
    memory.charge("a", 400, lambda: None)  # past half: the owner did not ask
    assert memory.room("a") == -200
    memory.release("a")
    assert memory.room("a") == 500
