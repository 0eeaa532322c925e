"""Where a change's CPU goes, thread by thread: gateways of two trees, and the floor, alternating.

    .venv/bin/python -m bench.threads [TREE ...] [--floor] [--subscribers 200] [--rate 50]

Each tree is a checkout of the project (``git worktree add --detach DIR COMMIT``); with
none, this one; the same tree twice measures how far the rounds alone move a figure. Each runs as its own gateway process (one worker) on one API server,
with the fan-out floor (``bench.fanout_floor``) beside them when ``--floor`` is given. In
each round every side takes the same fan-out scenario in turn (``bench.fanout``'s
receiver and changes), in the opposite order the next round, and each of its threads'
time on a CPU over the scenario (``/proc/PID/task/TID/schedstat``) is divided by the
changes and by the deliveries.

Why. The fan-out table gives a process's CPU per delivery above the floor's, which is
the sum of two unlike things: the event loop's writes, which grow with the subscribers,
and the informer's thread, which works once per change whatever their number. The same
code measured twice in one run moves by more than a change to either part saves (on this
machine, 1-2 µs a delivery at 200 × 50/s), so a change is judged by its own thread,
against the other tree's, in the same rounds. Python does not name its threads to the
kernel: the event loop's is the process's main thread (``loop``), the rest are told
apart by their CPU (the informer's reader does most of the rest).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from bench import fanout
from bench.procs import start_gateway
from control_plane.cluster import LocalCluster
from control_plane.kubeapi import KubeAPI

__all__ = ["main", "split", "thread_cpu"]

# a thread under this many µs a change is idle timers and housekeeping: not shown
_SHOWN_FROM = 1.0
# the ConfigMaps the changes go round, as in ``make bench``'s fan-out
_OBJECTS = 10


def thread_cpu(pid: int) -> dict[int, int]:
    """Each thread of ``pid``: its nanoseconds on a CPU so far (threads that end meanwhile
    are left out)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as stat:
                out[int(tid)] = int(stat.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return out


def split(pid: int, before: Mapping[int, int], after: Mapping[int, int], changes: int,
          deliveries: int) -> list[tuple[str, float, float]]:
    """The threads' CPU between two ``thread_cpu`` readings: (thread, µs a change, µs a
    delivery), the busiest first; the main thread is ``loop``, one started meanwhile counts
    from zero, one that ended is left out, and one under a µs a change is not shown."""
    rows = []
    for tid, ns in after.items():
        spent = (ns - before.get(tid, 0)) / 1e3
        if changes and spent / changes >= _SHOWN_FROM:
            rows.append(("loop" if tid == pid else f"thread {tid}", spent / changes,
                         spent / deliveries if deliveries else 0.0))
    return sorted(rows, key=lambda row: -row[1])


def _line(side: str, round_: int, result: dict, rows: list[tuple[str, float, float]]) -> str:
    threads = ", ".join(f"{name} {per_change:.0f} µs/change ({per_delivery:.2f}/delivery)"
                        for name, per_change, per_delivery in rows)
    return (f"round {round_} {side}: {result.get('gateway_cpu_us_per_delivery')} µs a delivery, "
            f"p99 {result.get('p99_ms', 0):.1f} ms, lost {result.get('lost')}; {threads}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.threads",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("trees", type=Path, nargs="*", help="checkouts (default: this one)")
    parser.add_argument("--floor", action="store_true", help="the fan-out floor beside them")
    parser.add_argument("--subscribers", type=int, default=200)
    parser.add_argument("--rate", type=float, default=50.0, help="changes a second")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    trees = args.trees or [Path.cwd()]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    workdir = Path(tempfile.mkdtemp(prefix="kcg-threads-"))
    try:
        with LocalCluster() as cluster:
            _measure(cluster, args, trees, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _measure(cluster: LocalCluster, args: argparse.Namespace, trees: list[Path],
             workdir: Path) -> None:
    here = Path.cwd()
    kube = KubeAPI.for_cluster(cluster)
    fanout.prepare(kube, _OBJECTS)
    receiver = fanout.build_receiver(workdir)
    sides: dict[str, tuple[int, str]] = {}  # side -> (pid, stream URL)
    stops = []
    try:
        for n, tree in enumerate(trees):
            os.chdir(tree)  # the gateway process imports the tree it starts in
            try:
                gateway = start_gateway(cluster, workdir / f"gw{n}", *fanout.GATEWAY_FLAGS,
                                        "--workers", "1")
            finally:
                os.chdir(here)
            stops.append(gateway.stop)
            # (numbered: the same tree twice measures the rounds' own spread)
            sides[f"{n + 1}: {tree.resolve()}"] = (
                gateway.pid, f"{gateway.url}/core/v1/namespaces/{fanout.NS}/configmaps")
        if args.floor:
            floor, floor_url = fanout.start_floor(cluster)
            stops.append(lambda: (floor.kill(), floor.wait()))
            sides[fanout.FLOOR_SIDE] = (floor.pid, floor_url)
        per_side: dict[str, list[tuple[float, dict[str, float]]]] = {side: [] for side in sides}
        for round_ in range(args.rounds):
            order = list(sides.items()) if round_ % 2 == 0 else list(reversed(sides.items()))
            for side, (pid, url) in order:
                before = thread_cpu(pid)
                result = fanout.run_scenario(receiver, kube, url, "sse", args.subscribers,
                                             args.rate, args.seconds, _OBJECTS, gateway_pid=pid,
                                             settle=args.settle)
                rows = split(pid, before, thread_cpu(pid), result["changes"],
                             result.get("deliveries") or 0)
                print(_line(side, round_, result, rows), flush=True)
                per_side[side].append((result.get("gateway_cpu_us_per_delivery") or 0.0,
                                       {name: per_change for name, per_change, _ in rows}))
    finally:
        for stop in reversed(stops):  # before the API server goes
            try:
                stop()
            except (OSError, subprocess.SubprocessError):
                pass
    print("\nmedians over the rounds (µs a delivery; the loop's and the busiest other "
          "thread's µs a change):")
    for side, runs in per_side.items():
        loop = [threads.get("loop", 0.0) for _, threads in runs]
        other = [max((v for k, v in threads.items() if k != "loop"), default=0.0)
                 for _, threads in runs]
        print(f"  {side}: {statistics.median(r for r, _ in runs):.1f}; "
              f"loop {statistics.median(loop):.0f}, other {statistics.median(other):.0f}")


if __name__ == "__main__":
    main()
