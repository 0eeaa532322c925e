"""A merged list of three clusters' 10,000 Pods, against one cluster's 30,000.

    .venv/bin/python -m bench.merged [--pods 10000] [--rounds 15] [--json FILE]

Two API servers. The benchmark's (``--pods`` Pods) is named three times in one gateway's
clusters file — a, b and c: three informers and three caches, as three clusters of
that size would have; a second one, seeded with three times as many Pods of the same
shape, is cluster ``one``. The gateway runs as operators run it (``serve --clusters``,
its own process). For each answer, side by side in the same rounds:

- the time to its last byte (median and p90 over ``rounds``) and the bytes sent, plain
  and compressed (``Accept-Encoding: gzip``, as kubectl and browsers ask);
- the gateway's memory while it answers: the peak of its resident memory over the
  resting one (``/proc/PID/clear_refs`` resets the peak before each request, ``VmHWM``
  reads it after). Memory freed earlier but still resident serves an answer without
  raising that peak, so the figure that says whether an answer holds its items joined is
  another: the same gateway in this process, ``tracemalloc`` started just before one
  answer (asked by ``curl`` from another process) and its peak read after — what that
  answer alone allocated at most; twice: as served (a repeated list is kept, and then
  sent as it is, nothing made), and with nothing kept (``query_memory_bytes`` of one
  byte: each answer made), which is what compares a merged answer's making with one
  cluster's;
- the API server's own list of the 30,000 Pods (``resourceVersion=0``: its watch cache),
  for scale.

A merged item is a tagged copy (``app.clusters.merging``): made a slice at a time as the
client reads, so the merged answer should cost time for the copies but hold only a slice.
"""

from __future__ import annotations

import argparse
import json
import math
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

import httpx
import yaml

from bench.seed import seed
from control_plane.cluster import LocalCluster, free_port
from control_plane.kubeapi import KubeAPI

__all__ = ["run", "table"]

_ENCODINGS = ("identity", "gzip")  # as curl asks by default, and as kubectl and browsers ask


def _status(pid: int, field: str) -> float:
    """A ``/proc/PID/status`` figure in MiB (``VmRSS``, ``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _measure(url: str, pid: int | None, headers: dict, verify) -> dict:
    """One answer read to its last byte: seconds, bytes, and the peak over the resting RSS."""
    if pid is not None:
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak starts again from here
        resting = _status(pid, "VmRSS")
    began = time.perf_counter()
    size = 0
    with httpx.stream("GET", url, headers=headers, verify=verify, timeout=300) as answer:
        answer.raise_for_status()
        for chunk in answer.iter_raw():
            size += len(chunk)
    row = {"s": time.perf_counter() - began, "bytes": size}
    if pid is not None:
        row["peak_mib"] = _status(pid, "VmHWM") - resting
    return row


def _start(clusters_file: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app.launch.cli", "serve", "--clusters",
                             str(clusters_file), "--port", str(port), "--log-level", "warning",
                             "--sync-timeout", "300"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return proc, f"http://127.0.0.1:{port}"


def _held_by_answers(clusters_file: Path, paths: dict[str, str],
                     query_memory_bytes: int = 0) -> dict[str, float]:
    """The most each answer allocated while it was sent (MiB), by ``tracemalloc``, with the
    gateway in this process and the client (``curl``) in another, plain and gzip;
    ``query_memory_bytes`` as the gateway's setting (0: its default)."""
    import uvicorn

    from app.launch.server import uvicorn_config
    from app.main import create_app
    from app.settings import Settings

    port = free_port()
    settings = Settings(port=port, clusters=str(clusters_file), sync_timeout=300.0,
                        query_memory_bytes=query_memory_bytes)
    app = create_app(settings)
    server = uvicorn.Server(uvicorn_config(app, settings, host="127.0.0.1", log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    held: dict[str, float] = {}
    try:
        base = f"http://127.0.0.1:{port}"
        for path in paths.values():  # loaded and synced (the lists' own allocations untraced)
            _wait_ok(base + path, None)
        for name, path in paths.items():
            for encoding in _ENCODINGS:
                curl = ["curl", "-sf", "-o", "/dev/null", "-H", f"Accept-Encoding: {encoding}",
                        base + path]
                for _ in range(2):  # warm: per-query state made (a large list is kept when
                    subprocess.run(curl, check=True, timeout=300)  # asked a second time)
                tracemalloc.start()
                try:
                    subprocess.run(curl, check=True, timeout=300)
                    held[f"{name} {encoding}"] = tracemalloc.get_traced_memory()[1] / 2**20
                finally:
                    tracemalloc.stop()
    finally:
        server.should_exit = True
        thread.join(60)
    return held


def _wait_ok(url: str, proc: subprocess.Popen | None, timeout: float = 600.0) -> None:
    """Wait until ``url`` answers 200 (a cache loaded and synced)."""
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(proc.stderr.read().decode(errors="replace")[-3000:])
        try:
            if httpx.get(url, params={"limit": 1}, timeout=300).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer")
        time.sleep(0.5)


def run(cluster: LocalCluster, pods: int, rounds: int = 15, log=print) -> dict:
    """Seed a second API server with ``3 * pods`` Pods, start the gateway, measure."""
    workdir = Path(tempfile.mkdtemp(prefix="kcg-merged-"))
    with LocalCluster() as big:
        log(f"seeding {3 * pods} pods into a second API server ...")
        seed(KubeAPI.for_cluster(big), pods=3 * pods, configmaps=0, log=log)
        small_config = cluster.write_kubeconfig(workdir / "small.kubeconfig", cluster.admin)
        big_config = big.write_kubeconfig(workdir / "big.kubeconfig", big.admin)
        entries = [{"name": n, "kubeconfig": str(small_config)} for n in ("a", "b", "c")]
        entries.append({"name": "one", "kubeconfig": str(big_config), "default": True})
        clusters_file = workdir / "clusters.yaml"
        clusters_file.write_text(yaml.safe_dump({"clusters": entries}))
        proc, url = _start(clusters_file)
        try:
            answers = {"merged": f"{url}/clusters/*/api/v1/pods?clusters=a,b,c",
                       "one": f"{url}/clusters/one/api/v1/pods"}
            for path in answers.values():  # loaded and synced
                _wait_ok(path, proc)
            resting = _status(proc.pid, "VmRSS")
            api_verify = ssl.create_default_context(cafile=str(big.primary.ca_file))
            api_verify.check_hostname = False
            api = (f"{big.primary.url}/api/v1/pods?resourceVersion=0",
                   {"Authorization": f"Bearer {big.admin.token}"}, api_verify)
            rows: dict[str, list[dict]] = {}
            for encoding in _ENCODINGS:  # warm-up
                for name in ("merged", "one"):
                    _measure(answers[name], proc.pid, {"Accept-Encoding": encoding}, True)
            for i in range(rounds):
                for encoding in _ENCODINGS:
                    accept = {"Accept-Encoding": encoding}
                    for name in ("merged", "one"):
                        rows.setdefault(f"{name} {encoding}", []).append(
                            _measure(answers[name], proc.pid, accept, True))
                    rows.setdefault(f"apiserver {encoding}", []).append(
                        _measure(api[0], None, {**api[1], **accept}, api[2]))
                log(f"  round {i + 1}/{rounds}: " + ", ".join(
                    f"{name} {measured[-1]['s'] * 1000:.0f} ms" for name, measured in rows.items()))
            items = len(httpx.get(answers["merged"], timeout=300).json()["items"])
        finally:
            proc.terminate()
            proc.wait(30)
        log("what one answer allocates, traced in this process ...")
        paths = {name: answer.split(url, 1)[1] for name, answer in answers.items()}
        held = _held_by_answers(clusters_file, paths)
        log("... and with nothing kept (each answer made) ...")
        made = _held_by_answers(clusters_file, paths, query_memory_bytes=1)
    results: dict = {"pods": pods, "rounds": rounds, "items": items,
                     "resting_rss_mib": round(resting, 1), "answers": {}}
    for name, measured in rows.items():
        times = sorted(r["s"] * 1000 for r in measured)
        summary = {"p50_ms": round(statistics.median(times), 1),
                   "p90_ms": round(times[max(0, math.ceil(0.9 * len(times)) - 1)], 1),
                   "bytes": measured[-1]["bytes"]}
        if "peak_mib" in measured[0]:
            summary["peak_mib"] = round(statistics.median(r["peak_mib"] for r in measured), 1)
            summary["peak_max_mib"] = round(max(r["peak_mib"] for r in measured), 1)
            summary["allocated_mib"] = round(held[name], 2)
            summary["allocated_made_mib"] = round(made[name], 2)
        results["answers"][name] = summary
    return results


def table(results: dict) -> str:
    pods = results["pods"]
    answers = results["answers"]
    names = {"merged": f"`/clusters/*/api/v1/pods` (3 × {pods:,})",
             "one": f"`/clusters/one/api/v1/pods` (1 × {3 * pods:,})",
             "apiserver": f"the API server, `resourceVersion=0` ({3 * pods:,})"}
    lines = ["| answer | encoding | bytes sent | p50 | p90 | × one cluster's p50 | allocated by "
             "the answer at most | the same, nothing kept | resident peak over rest (median; max) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for key, row in answers.items():
        name, _, encoding = key.partition(" ")
        one = answers[f"one {encoding}"]
        memory = (f"+{row['peak_mib']:.1f} MiB; +{row['peak_max_mib']:.1f} MiB"
                  if "peak_mib" in row else "—")
        allocated = f"{row['allocated_mib']:.2f} MiB" if "allocated_mib" in row else "—"
        made = f"{row['allocated_made_mib']:.2f} MiB" if "allocated_made_mib" in row else "—"
        lines.append(f"| {names[name]} | {encoding} | {row['bytes']:,} | {row['p50_ms']:.0f} ms | "
                     f"{row['p90_ms']:.0f} ms | {row['p50_ms'] / one['p50_ms']:.2f}× | {allocated} | "
                     f"{made} | {memory} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.merged",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    with LocalCluster() as cluster:
        seed(KubeAPI.for_cluster(cluster), pods=args.pods, configmaps=0)
        results = run(cluster, args.pods, args.rounds)
    results["command"] = (f"python -m bench.merged --pods {args.pods} --rounds {args.rounds}"
                          + (f" --json {args.json}" if args.json else ""))
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
