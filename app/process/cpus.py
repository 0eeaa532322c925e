"""How many serving processes: ``--workers N`` or ``auto``, the CPUs this process may use.

Kept apart from the supervisor (``app.launch.supervisor``) so that settings can
check the value without importing what starts processes.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

__all__ = ["available_cpus", "worker_count"]


def available_cpus(cgroup_root: str = "/sys/fs/cgroup") -> int:
    """The CPUs this process may use: its affinity, capped by a cgroup CPU quota.

    A container limited to 1.5 CPUs on a 64-core node gets 2, not 64 (a quota is
    rounded up: a worker that may use half a core still serves).
    """
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    quota = _cgroup_quota(Path(cgroup_root))
    if quota is not None:
        count = min(count, max(1, math.ceil(quota)))
    return max(1, count)


def _cgroup_quota(root: Path) -> float | None:
    """CPUs allowed by the cgroup (v2 ``cpu.max``, else v1 ``cfs_quota``); ``None``: no limit."""
    try:
        quota, _, period = (root / "cpu.max").read_text().strip().partition(" ")
        return None if quota == "max" else int(quota) / int(period or 100_000)
    except (OSError, ValueError):
        pass
    for folder in (root / "cpu", root / "cpu,cpuacct", root):
        try:
            quota_us = int((folder / "cpu.cfs_quota_us").read_text())
            period_us = int((folder / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            continue
        return None if quota_us <= 0 or period_us <= 0 else quota_us / period_us
    return None


def worker_count(text: str) -> int:
    """``--workers``: a positive number, or ``auto`` (``available_cpus``).

    Raises:
        ValueError: anything else.
    """
    text = str(text).strip().lower()
    if text == "auto":
        return available_cpus()
    try:
        count = int(text)
    except ValueError:
        raise ValueError(f"--workers must be a positive number or auto, not {text!r}") from None
    if count < 1:
        raise ValueError(f"--workers must be a positive number or auto, not {text!r}")
    return count
