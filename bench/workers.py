"""What ``--workers N`` costs a pod and the API server, for N = 1, 2, 4.

    .venv/bin/python -m bench.workers [--pods 10000] [--seconds 60] [--rate 50]

Each worker keeps its own informers (``app.launch.supervisor``): N copies of the cache and
N watches per resource. For each N, on the seeded API server, a gateway with N
workers and Pods pre-warmed is started and waited for until every worker is
ready; then read:

- the pod's memory: RSS of the supervisor and every worker (``/proc``);
- the API server's registered watchers of Pods (its own gauge
  ``apiserver_registered_watchers``, minus what it had before);
- the API server's CPU seconds while ``rate`` Pod changes a second pass for
  ``seconds`` (every worker receives every change), beside the same churn with
  no gateway at all — the cost of each further watcher, which is the price of
  the design's choice.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from bench.procs import (proc_cpu_seconds, proc_rss_mib, start_gateway, tree_cpu_seconds,
                         tree_rss_mib, workers_of)
from bench.seed import seed
from control_plane.cluster import LocalCluster
from control_plane.kubeapi import KubeAPI

__all__ = ["run", "table"]

COUNTS = (1, 2, 4)


def _watchers(cluster: LocalCluster, kind: str = "Pod") -> float:
    text = KubeAPI.for_cluster(cluster).text("/metrics")
    found = re.search(rf'^apiserver_registered_watchers\{{group="",kind="{kind}",version="v1"\}} (\S+)$',
                      text, re.M)
    return float(found.group(1)) if found else 0.0


class Churn(threading.Thread):
    """Patches a Pod's annotation ``rate`` times a second (each a watch event for every watcher)."""

    def __init__(self, cluster: LocalCluster, pods: int, rate: float) -> None:
        super().__init__(daemon=True)
        self.kube = KubeAPI.for_cluster(cluster)
        self.pods, self.rate = pods, rate
        self.stop = threading.Event()
        self.writes = 0

    def run(self) -> None:
        n = 0
        next_at = time.monotonic()
        while not self.stop.is_set():
            i = (n * 7919) % self.pods
            self.kube.patch(f"/api/v1/namespaces/bench-{i % 100:03d}/pods/pod-{i:05d}",
                            {"metadata": {"annotations": {"bench/tick": str(n)}}})
            self.writes += 1
            n += 1
            next_at += 1 / self.rate
            self.stop.wait(max(0.0, next_at - time.monotonic()))


def _apiserver_cpu_during_churn(cluster: LocalCluster, pods: int, rate: float,
                                seconds: float) -> tuple[float, int]:
    pid = cluster.primary.process.pid
    churn = Churn(cluster, pods, rate)
    before = proc_cpu_seconds(pid)
    churn.start()
    time.sleep(seconds)
    churn.stop.set()
    churn.join(30)
    return proc_cpu_seconds(pid) - before, churn.writes


def _all_workers_synced(url: str, count: int) -> bool:
    try:
        text = httpx.get(url + "/metrics", timeout=10).text
    except httpx.HTTPError:
        return False
    synced = re.findall(r'^kcg_informer_synced\{(?:cluster="default",)?resource="pods.v1"'
                        r'(?:,worker="\d+")?\} 1\.0$', text, re.M)
    return len(synced) == count


def run(cluster: LocalCluster, pods: int, seconds: float, rate: float,
        counts: tuple[int, ...] = COUNTS) -> dict[str, Any]:
    """Measure every N in ``counts``; see the module docstring."""
    results: dict[str, Any] = {"pods": pods, "seconds": seconds, "rate": rate, "rows": []}
    baseline_watchers = _watchers(cluster)
    cpu, writes = _apiserver_cpu_during_churn(cluster, pods, rate, seconds)
    results["no_gateway"] = {"apiserver_cpu_s": round(cpu, 2), "writes": writes}
    for count in counts:
        with tempfile.TemporaryDirectory(prefix="kcg-workers-bench-") as tmp:
            began = time.monotonic()
            gateway = start_gateway(cluster, Path(tmp), "--workers", str(count), "--prewarm", "pods",
                                    ready_timeout=600)
            try:
                deadline = time.monotonic() + 600
                while not _all_workers_synced(gateway.url, count):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{count} workers did not all sync")
                    time.sleep(0.2)
                ready_s = time.monotonic() - began
                time.sleep(2)
                rss = tree_rss_mib(gateway.pid)
                workers_rss = [proc_rss_mib(c) for c in workers_of(gateway.pid)] or [rss]
                watchers = _watchers(cluster) - baseline_watchers
                gateway_cpu = tree_cpu_seconds(gateway.pid)
                cpu, writes = _apiserver_cpu_during_churn(cluster, pods, rate, seconds)
                gateway_cpu = tree_cpu_seconds(gateway.pid) - gateway_cpu
            finally:
                gateway.stop()
        row = {"workers": count, "ready_s": round(ready_s, 1), "pod_rss_mib": round(rss, 1),
               "worker_rss_mib": [round(r, 1) for r in workers_rss],
               "apiserver_pod_watchers": watchers, "apiserver_cpu_s": round(cpu, 2),
               "gateway_cpu_s": round(gateway_cpu, 2), "writes": writes}
        print(json.dumps(row), flush=True)
        results["rows"].append(row)
    return results


def table(results: dict[str, Any]) -> str:
    """The results as a Markdown table."""
    base = results["no_gateway"]["apiserver_cpu_s"]
    seconds, rate = results["seconds"], results["rate"]
    lines = [f"| workers | pod RSS (MiB) | per worker (MiB) | supervisor (MiB) | Pod watches on the "
             f"API server | API server CPU, {seconds:g} s of {rate:g} changes/s | beside no gateway "
             f"| gateway CPU | all ready after (s) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
             f"| none | | | | | {base:.1f} s | | | |"]
    for row in results["rows"]:
        per = row["worker_rss_mib"]
        supervisor = row["pod_rss_mib"] - sum(per) if row["workers"] > 1 else 0.0
        lines.append(f"| {row['workers']} | {row['pod_rss_mib']:.0f} | "
                     f"{statistics.mean(per):.0f} | {supervisor:.0f} | "
                     f"{row['apiserver_pod_watchers']:.0f} | {row['apiserver_cpu_s']:.1f} s | "
                     f"{row['apiserver_cpu_s'] - base:+.1f} s | {row['gateway_cpu_s']:.1f} s | "
                     f"{row['ready_s']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workers",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    with LocalCluster() as cluster:
        seed(KubeAPI.for_cluster(cluster), pods=args.pods, configmaps=0)
        results = run(cluster, args.pods, args.seconds, args.rate)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
