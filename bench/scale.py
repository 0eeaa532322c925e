"""How cost grows: objects 1,000 / 10,000 / 50,000, and subscribers 100 / 1,000 / 5,000.

    .venv/bin/python -m bench.scale [--pods 1000,10000,50000] [--subscribers 100,1000,5000|none]
                                    [--json FILE]

``make bench-scale`` runs it to 150,000 Pods, the Kubernetes scalability limit per
cluster (no subscribers: ``make bench`` has them), into ``docs/scale.json``, which
``python -m bench`` renders beside its own scale table.

One API server of its own, filled in steps with Pods of the benchmark's shape
(``bench.seed``), each also labelled ``group=g-<i // 100>`` so that one label
query selects the same 100 Pods at every size. At each size, in the same run:

- the initial sync of a fresh informer process (``bench.sync_child``) beside the
  raw transfer of the same list, and its RSS growth per object;
- Q1 (``group=g-7``: 100 Pods) and Q5 (every Pod) with wrk at one connection,
  the gateway against the API server's watch cache (``resourceVersion=0``);
- a dashboard's refresh after one change: the first ``summary=`` answer after a
  Pod changed, against what a dashboard on the API server pays for the same
  counts (its full list).

Then subscribers at 10 changes a second (``bench.fanout``'s receiver and
scenario), a fresh one-worker gateway for each count (its memory before and
with the subscribers gives RSS per subscriber), against as many watches on the
API server. CPU per delivery: the gateway's whole process over the run; the API
server's for its watchers alone — its CPU in the run of watches less its CPU in the
run through the gateway (the same changes, one watcher), over the deliveries.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench import fanout
from bench.dashboard import after_a_change_ms
from bench.procs import start_gateway, tree_rss_mib
from bench.queries import wrk
from bench.seed import pod
from bench.sync_pods import child
from control_plane.cluster import LocalCluster
from control_plane.kubeapi import KubeAPI

__all__ = ["run", "objects_table", "subscribers_table"]

Q1 = "/api/v1/pods?labelSelector=" + urllib.parse.quote("group=g-7", safe="")
Q5 = "/api/v1/pods"
SUMMARY = "/api/v1/pods?summary=status.phase,metadata.namespace"


def scale_pod(i: int) -> dict:
    """The benchmark's Pod, in groups of 100 (``group``): a label query of constant size."""
    body = pod(i)
    body["metadata"]["labels"]["group"] = f"g-{i // 100}"
    return body


def fill(kube: KubeAPI, start: int, end: int, log=print) -> float:
    """Create Pods ``start`` .. ``end - 1``; return the seconds it took."""
    began = time.monotonic()
    for n in range(100):
        kube.ensure_namespace(f"bench-{n:03d}")

    def create(i: int) -> None:
        body = scale_pod(i)
        kube.create(f"/api/v1/namespaces/{body['metadata']['namespace']}/pods", body)

    with ThreadPoolExecutor(max_workers=8) as pool:
        for done, _ in enumerate(pool.map(create, range(start, end)), 1):
            if done % 10_000 == 0:
                log(f"  created {start + done:,} pods ({time.monotonic() - began:.0f} s)")
    return time.monotonic() - began


def _wrk(url: str, seconds: float, token: str = "", pid: int | None = None) -> dict:
    row = wrk(url, 1, seconds, token, pid)
    return {k: row[k] for k in ("p50_ms", "p99_ms", "requests_per_second", "wrk_cpu_percent")}


def objects(cluster: LocalCluster, sizes: tuple[int, ...], seconds: float, workdir: Path,
            log=print) -> dict:
    """The figures at each size of ``sizes`` (ascending, filled in steps)."""
    kube = KubeAPI.for_cluster(cluster)
    token, api = cluster.admin.token, cluster.primary.url
    rows: dict = {}
    have = 0
    for size in sizes:
        log(f"{size:,} pods: filling ...")
        fill(kube, have, size, log)
        have = size
        row: dict = {"pods": size}
        raw, ours = child("raw", cluster), child("ours", cluster)
        row["raw_seconds"], row["sync_seconds"] = raw["seconds"], ours["seconds"]
        row["rss_per_object"] = ours["rss_growth"] / ours["objects"]
        row["stripped_per_object"] = raw["stripped_bytes"] / raw["objects"]
        gateway = start_gateway(cluster, workdir / f"objects-{size}", "--prewarm", "pods",
                                "--sync-timeout", "600", ready_timeout=600)
        try:
            full = seconds * 2  # a full list of 50,000 takes a second or more
            for name, path, length in (("q1", Q1, seconds), ("q5", Q5, full)):
                wrk(gateway.url + path, 1, 1)  # warm-up
                row[f"{name}_gateway"] = _wrk(gateway.url + path, length, pid=gateway.pid)
                row[f"{name}_apiserver"] = _wrk(
                    api + path + ("&" if "?" in path else "?") + "resourceVersion=0", length,
                    token, cluster.primary.process.pid)
            row["refresh_ms"] = after_a_change_ms(gateway.url, kube, SUMMARY.split("?", 1)[1])
        finally:
            gateway.stop()
        log(f"{size:,} pods: {json.dumps(row)}")
        rows[str(size)] = row
    return rows


def receiver_threads(count: int) -> int:
    """The receiver's threads of Go code for ``count`` streams, measured both ways on two
    cores with the same gateway: below a few thousand streams a second thread reads
    sooner (at 100 / 1,000: p99 17.3 / 34.5 against 24.4 / 39.0 ms, and the gateway
    holds fewer unsent bytes per stream, 5.1 / 3.8 against 5.9 / 6.4 KiB); at 5,000 it
    spins in Go's scheduler on the core the gateway needs (p99 614 against 367 / 438 ms)."""
    return 2 if count < 2_000 else 1


def subscribers(cluster: LocalCluster, counts: tuple[int, ...], rate: float, seconds: float,
                settle: float, workdir: Path, log=print) -> dict:
    """Fan-out at each count of ``counts``: a fresh gateway each, and the API server's watch."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    kube = KubeAPI.for_cluster(cluster)
    objects_ = 10
    fanout.prepare(kube, objects_)
    receiver = fanout.build_receiver(workdir)
    api_pid = cluster.primary.process.pid
    rows: dict = {}
    for count in counts:
        threads = receiver_threads(count)
        gateway = start_gateway(cluster, workdir / f"fan-{count}", "--prewarm", "configmaps",
                                "--max-streams", "20000", "--max-streams-per-client", "20000")
        try:
            time.sleep(1.0)
            idle = tree_rss_mib(gateway.pid)
            sse = fanout.run_scenario(
                receiver, kube, f"{gateway.url}/core/v1/namespaces/{fanout.NS}/configmaps", "sse",
                count, rate, seconds, objects_, gateway_pid=gateway.pid, settle=settle,
                apiserver_pid=api_pid, receiver_threads=threads)
        finally:
            gateway.stop()
        sse["rss_per_subscriber_kib"] = 1024 * (sse["gateway_rss_mib"] - idle) / count
        rv = kube.get(f"/api/v1/namespaces/{fanout.NS}/configmaps")["metadata"]["resourceVersion"]
        watch = fanout.run_scenario(
            receiver, kube, f"{cluster.primary.url}/api/v1/namespaces/{fanout.NS}/configmaps"
            f"?watch=true&resourceVersion={rv}", "watch", count, rate, seconds, objects_,
            token=cluster.admin.token, ca=str(cluster.primary.ca_file), settle=settle,
            apiserver_pid=api_pid, receiver_threads=threads)
        if watch.get("deliveries"):
            # the same changes both times: what serving the watchers themselves cost it
            watchers = watch["apiserver_cpu_seconds"] - sse["apiserver_cpu_seconds"]
            watch["apiserver_cpu_us_per_delivery"] = round(1e6 * watchers / watch["deliveries"], 1)
        rows[str(count)] = {"gateway": sse, "apiserver": watch}
        log(f"{count:,} subscribers: {json.dumps(rows[str(count)])}")
    return rows


def run(sizes: tuple[int, ...] = (1_000, 10_000, 50_000),
        counts: tuple[int, ...] = (100, 1_000, 5_000), rate: float = 10.0,
        fan_seconds: float = 30.0, settle: float = 10.0, query_seconds: float = 5.0,
        log=print) -> dict:
    """Both tables, on an API server of their own; see the module docstring."""
    workdir = Path(tempfile.mkdtemp(prefix="kcg-scale-"))
    try:
        with LocalCluster() as cluster:
            return {"rate": rate, "fan_seconds": fan_seconds, "settle": settle,
                    "query_seconds": query_seconds,
                    "objects": objects(cluster, sizes, query_seconds, workdir, log),
                    "subscribers": subscribers(cluster, counts, rate, fan_seconds, settle,
                                               workdir, log)}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _positive(value: float | None) -> str:
    """A difference of two CPU readings: "—" where the noise is larger than it (few watchers)."""
    return f"{value}" if value is not None and value > 0 else "—"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}×" if b else "—"


def objects_table(results: dict) -> str:
    """Per size: sync, memory, Q1, Q5, a dashboard's refresh; each beside the API server's."""
    lines = ["| Pods | initial sync (raw list) | RSS per object (stripped JSON) | "
             "Q1 p50 gateway / API server | Q5 objects/s gateway / API server | "
             "refresh after a change / the API server's full list |",
             "|---:|---:|---:|---:|---:|---:|"]
    for row in results["objects"].values():
        n = row["pods"]
        q1g, q1a = row["q1_gateway"], row["q1_apiserver"]
        q5g = row["q5_gateway"]["requests_per_second"] * n
        q5a = row["q5_apiserver"]["requests_per_second"] * n
        full = row["q5_apiserver"]["p50_ms"]
        lines.append(
            f"| {n:,} | {row['sync_seconds']:.2f} s ({row['raw_seconds']:.2f} s) | "
            f"{row['rss_per_object'] / 1024:.1f} KiB ({row['stripped_per_object'] / 1024:.1f} KiB) | "
            f"{q1g['p50_ms']:.2f} / {q1a['p50_ms']:.2f} ms ({_ratio(q1a['p50_ms'], q1g['p50_ms'])} "
            f"lower) | {q5g:,.0f} / {q5a:,.0f} ({_ratio(q5g, q5a)}) | "
            f"{row['refresh_ms']:.1f} / {full:.0f} ms |")
    return "\n".join(lines)


def subscribers_table(results: dict) -> str:
    """Per count: latency, losses, the gateway's CPU per delivery and memory per subscriber."""
    lines = [f"| subscribers × {results['rate']:g}/s | p50 gateway / API server | "
             "p99 gateway / API server | lost | CPU per delivery gateway / API server | "
             "RSS per subscriber | receiver CPU (gateway / API server) |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for count, row in results["subscribers"].items():
        g, a = row["gateway"], row["apiserver"]
        lines.append(
            f"| {int(count):,} | {g['p50_ms']:.1f} / {a['p50_ms']:.1f} ms | "
            f"{g['p99_ms']:.1f} / {a['p99_ms']:.1f} ms | {g['lost']} / {a['lost']} | "
            f"{g['gateway_cpu_us_per_delivery']} (user {g.get('gateway_user_us_per_delivery', '—')}) / "
            f"{_positive(a.get('apiserver_cpu_us_per_delivery'))} µs | "
            f"{g['rss_per_subscriber_kib']:.1f} KiB | "
            f"{g['receiver_cpu_percent']} / {a['receiver_cpu_percent']} % |")
    return "\n".join(lines)


def _counts(text: str) -> tuple[int, ...]:
    """``1000,10000``; ``none``: no such step."""
    if text.strip() == "none":
        return ()
    return tuple(int(part) for part in text.split(","))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=_counts, default=(1_000, 10_000, 50_000))
    parser.add_argument("--subscribers", type=_counts, default=(100, 1_000, 5_000))
    parser.add_argument("--seconds", type=float, default=30.0, help="of changes per fan-out")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    results = run(args.pods, args.subscribers, fan_seconds=args.seconds)
    results["command"] = "python -m bench.scale " + " ".join(argv if argv is not None
                                                               else sys.argv[1:])
    results["date"] = time.strftime("%Y-%m-%d")
    print(objects_table(results))
    print(subscribers_table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
