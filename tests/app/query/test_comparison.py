"""One order for all values: numbers, quantities and timestamps by value, the rest as text."""

from __future__ import annotations

from app.query.comparison import EMPTY, sort_key


def test_numbers_and_quantities_compare_by_value():
    values = ["1Gi", "100m", "2", "1", "1k", "1500M", "0.5", "1e3", "512Mi", 7, 2.5]
    ordered = sorted(values, key=sort_key)
    # 1k and 1e3 are equal: a stable sort keeps them as they came
    assert ordered == ["100m", "0.5", "1", "2", 2.5, 7, "1k", "1e3", "512Mi", "1Gi", "1500M"]


def test_timestamps_compare_by_time_whatever_the_offset():
    late = "2024-01-02T00:30:00+01:00"  # 23:30 UTC on the 1st
    early = "2024-01-01T23:00:00Z"
    later = "2024-01-01T23:45:00.5Z"
    assert sorted([later, late, early], key=sort_key) == [early, late, later]


def test_missing_and_empty_come_first_and_text_last():
    assert sort_key(None) == sort_key("") == EMPTY
    ordered = sorted(["b", None, "a", "10", True, "2024-01-01T00:00:00Z", ""], key=sort_key)
    assert ordered[:2] in ([None, ""], ["", None])
    assert ordered[2:] == ["10", "2024-01-01T00:00:00Z", True, "a", "b"]


def test_text_that_only_looks_numeric_stays_text():
    assert sort_key("1.2.3")[0] == sort_key("v1")[0] == sort_key("10.0.0.1")[0]
    assert sort_key("9-apple") < sort_key("apple")
