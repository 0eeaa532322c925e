"""Sync 10,000 Pods from the real apiserver: ours vs the raw transfer vs the official informer.

    .venv/bin/python -m bench.sync_pods [--pods N] [--rounds R] [--out docs/benchmarks-sync.json]

Starts the project's own kube-apiserver + etcd, seeds the workload, then runs
each measurement R times in fresh processes, interleaved (raw, ours, official,
raw, ...), and prints a markdown table of medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.seed import seed
from control_plane.cluster import LocalCluster
from control_plane.kubeapi import KubeAPI

MiB = 1024 * 1024


def child(mode: str, cluster: LocalCluster, *extra: str) -> dict:
    server = cluster.primary
    out = subprocess.run(
        [sys.executable, "-m", "bench.sync_child", mode, server.url, cluster.admin.token,
         str(server.ca_file), *extra],
        capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{mode} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(pods: int, rounds: int, log=print, cluster: LocalCluster | None = None) -> dict:
    """Measure (seeding ``pods`` first unless ``cluster`` is given, already seeded)."""
    if cluster is None:
        with LocalCluster() as own:
            log(f"seeding {pods} pods ...")
            seeded = seed(KubeAPI.for_cluster(own), pods=pods, configmaps=0, log=log)
            log(f"seeded in {seeded['seconds']:.0f} s")
            return run(pods, rounds, log, own)
    results: dict[str, list[dict]] = {"raw": [], "ours": [], "official": [],
                                      "ours-heap": [], "official-heap": []}
    for r in range(rounds):
        for mode in ("raw", "ours", "official"):
            extra = (str(pods),) if mode == "official" else ()
            results[mode].append(child(mode, cluster, *extra))
            log(f"round {r + 1} {mode}: {results[mode][-1]}")
    results["ours-heap"].append(child("ours", cluster, "--tracemalloc"))
    results["official-heap"].append(child("official", cluster, str(pods), "--tracemalloc"))
    return results


def median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def table(results: dict) -> str:
    raw_s = median(results["raw"], "seconds")
    raw_bytes = results["raw"][0]["bytes"]
    stripped = results["raw"][0]["stripped_bytes"]
    objects = results["raw"][0]["objects"]
    ours_s = median(results["ours"], "seconds")
    off_s = median(results["official"], "seconds")
    ours_rss = median(results["ours"], "rss_growth")
    off_rss = median(results["official"], "rss_growth")
    ours_heap = results["ours-heap"][0]["traced_bytes"]
    off_heap = results["official-heap"][0]["traced_bytes"]
    lines = [
        f"{objects} Pods; JSON as the API returns it: {raw_bytes / MiB:.1f} MiB; "
        f"without managedFields: {stripped / MiB:.1f} MiB "
        f"({raw_bytes / objects / 1024:.2f} / {stripped / objects / 1024:.2f} KB per Pod).",
        "",
        "| | sync time | RSS growth | retained heap (tracemalloc) |",
        "|---|---:|---:|---:|",
        f"| raw LIST transfer (floor) | {raw_s:.2f} s | | |",
        f"| informer_core (ours) | {ours_s:.2f} s | {ours_rss / MiB:.1f} MiB | {ours_heap / MiB:.1f} MiB |",
        f"| kubernetes.informer.SharedInformer | {off_s:.2f} s | {off_rss / MiB:.1f} MiB | {off_heap / MiB:.1f} MiB |",
        "",
        f"Ratios: sync ours / raw transfer = {ours_s / raw_s:.2f}; ours / official = "
        f"{ours_s / off_s:.3f}. RSS growth / stripped JSON held = {ours_rss / stripped:.2f}; "
        f"retained heap / stripped JSON = {ours_heap / stripped:.2f}; RSS ours / official = "
        f"{ours_rss / off_rss:.3f}.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    started = time.monotonic()
    results = run(args.pods, args.rounds)
    print(table(results))
    print(f"(benchmark took {time.monotonic() - started:.0f} s)")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
