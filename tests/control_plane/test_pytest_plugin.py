"""A missing tool or control plane is a failure in CI and a loud skip elsewhere — never a silent pass."""

from __future__ import annotations

import pytest

from control_plane.pytest_plugin import in_ci, unavailable


@pytest.mark.parametrize("value, expected", [("true", True), ("1", True), ("TRUE", True), ("yes", True),
                                             ("", False), ("false", False), ("0", False)])
def test_ci_is_recognised(monkeypatch, value, expected):
    monkeypatch.setenv("CI", value)
    assert in_ci() is expected


def test_unavailable_fails_in_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true and no wrk"):
        unavailable("no wrk")


def test_unavailable_skips_loudly_elsewhere(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="SKIPPED: no wrk"):
        unavailable("no wrk")
