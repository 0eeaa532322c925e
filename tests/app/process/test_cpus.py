"""How many workers ``auto`` means, and the values ``--workers`` takes."""

from __future__ import annotations

import os

import pytest

from app.process.cpus import available_cpus, worker_count
from app.settings import Settings, add_arguments, settings_from_args


def _cgroup(tmp_path, **files: str):
    for name, text in files.items():
        path = tmp_path / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(tmp_path)


def test_auto_is_the_cpus_the_process_may_use_quota_included(tmp_path):
    cpus = len(os.sched_getaffinity(0))
    assert available_cpus(_cgroup(tmp_path / "none")) == cpus
    assert available_cpus(_cgroup(tmp_path / "unlimited", **{"cpu.max": "max 100000\n"})) == cpus
    assert available_cpus(_cgroup(tmp_path / "v2", **{"cpu.max": "50000 100000\n"})) == 1
    assert available_cpus(_cgroup(tmp_path / "v2b", **{"cpu.max": "150000 100000\n"})) == min(cpus, 2)
    v1 = _cgroup(tmp_path / "v1", **{"cpu__cpu.cfs_quota_us": "100000\n",
                                     "cpu__cpu.cfs_period_us": "100000\n"})
    assert available_cpus(v1) == 1
    v1_unlimited = _cgroup(tmp_path / "v1u", **{"cpu__cpu.cfs_quota_us": "-1\n",
                                                "cpu__cpu.cfs_period_us": "100000\n"})
    assert available_cpus(v1_unlimited) == cpus


@pytest.mark.parametrize("text, expected", [("1", 1), ("4", 4), (" 2 ", 2), ("AUTO", None)])
def test_the_workers_flag_takes_a_number_or_auto(text, expected):
    assert worker_count(text) == (expected or available_cpus())


@pytest.mark.parametrize("text", ["0", "-1", "two", "", "1.5"])
def test_anything_else_is_refused_before_start(text, capsys):
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--workers", text])
    assert exited.value.code == 2
    assert "--workers must be a positive number or auto" in capsys.readouterr().err


def test_the_environment_names_it_too(monkeypatch):
    import argparse

    monkeypatch.setenv("KCG_WORKERS", "auto")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert settings_from_args(parser.parse_args([])).workers == available_cpus()
    assert Settings().workers == 1
