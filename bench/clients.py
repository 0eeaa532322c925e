"""Today's clients: a watch-list's first state, and what ``--metadata-only`` saves.

    .venv/bin/python -m bench.clients [--pods 10000] [--rounds 5] [--json FILE]

On the benchmark's API server (``--pods`` Pods, seeded by ``bench.seed`` unless there), side by
side in one run:

- **Watch-list** (what every client-go 1.35 reflector asks first): the time from the request
  to the ``BOOKMARK`` annotated ``k8s.io/initial-events-end`` — the whole state received as
  ``ADDED`` events — beside a LIST of the same Pods from the same gateway and from the API
  server's watch cache (``resourceVersion=0``). Each read to its last byte over a kept
  connection, the body counted, not parsed (the client's decoding is the client's). The
  1.20 API server answers watch-list 422 (it came in 1.27), so the client it fell back to
  pays its LIST and then a watch. Nothing compressed (``Accept-Encoding: identity``): a watch
  never is.
- **``--metadata-only pods``**: two gateways in turn, ``--prewarm pods`` with and without it;
  each one's resident memory once its cache has synced, less an idle gateway's, per Pod; its
  start to ready; and the bytes of a metadata-only list (``as=PartialObjectMetadataList``),
  uncompressed, which both answer, against the full list only the whole cache can give.
"""

from __future__ import annotations

import argparse
import json
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.procs import start_gateway, tree_rss_mib
from bench.seed import seed
from control_plane.cluster import LocalCluster
from control_plane.kubeapi import KubeAPI

__all__ = ["run", "table"]

WATCH_LIST = ("/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
              "&allowWatchBookmarks=true")
LIST = "/api/v1/pods"
META_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
_END = b"k8s.io/initial-events-end"


def _list_ms(client: httpx.Client, url: str, headers: dict | None = None) -> tuple[float, int]:
    began = time.perf_counter()
    with client.stream("GET", url, headers=headers or {}) as answer:
        answer.raise_for_status()
        size = sum(len(chunk) for chunk in answer.iter_raw())
    return 1000 * (time.perf_counter() - began), size


def _watch_list_ms(client: httpx.Client, url: str) -> tuple[float, int, int]:
    """(ms to the initial-events-end bookmark, ADDED events before it, bytes)."""
    began = time.perf_counter()
    added = size = 0
    tail = b""
    with client.stream("GET", url) as answer:
        answer.raise_for_status()
        for chunk in answer.iter_raw():
            size += len(chunk)
            seen = tail + chunk
            added += seen.count(b'"type":"ADDED"') - tail.count(b'"type":"ADDED"')
            if _END in seen:
                return 1000 * (time.perf_counter() - began), added, size
            tail = seen[-64:]
    raise RuntimeError("the watch ended before its initial-events-end bookmark")


def watch_list(cluster: LocalCluster, pods: int, rounds: int, workdir: Path) -> dict:
    """Watch-list's first state against a LIST of the same (see the module)."""
    gateway = start_gateway(cluster, workdir / "watch-list", "--prewarm", "pods",
                            "--sync-timeout", "600", ready_timeout=600)
    api = cluster.primary
    # uncompressed, as a watch always is (httpx asks for gzip by default, and lists over
    # 128 KiB would be compressed: time and bytes of another thing)
    plain = {"Accept-Encoding": "identity"}
    direct = httpx.Client(base_url=api.url, timeout=120,
                          verify=ssl.create_default_context(cafile=str(api.ca_file)),
                          headers={"Authorization": f"Bearer {cluster.admin.token}", **plain})
    ours = httpx.Client(base_url=gateway.url, timeout=120, headers=plain)
    rows: dict[str, list[float]] = {"watch_list": [], "gateway_list": [], "apiserver_list": []}
    sizes: dict[str, int] = {}
    try:
        refused = direct.get(WATCH_LIST).status_code  # what the API server itself answers
        for _ in range(rounds + 1):  # the first round warms every path, and is not counted
            ms, added, sizes["watch_list"] = _watch_list_ms(ours, WATCH_LIST)
            if added != pods:
                raise RuntimeError(f"the first state held {added} Pods, not {pods}")
            rows["watch_list"].append(ms)
            ms, sizes["gateway_list"] = _list_ms(ours, LIST)
            rows["gateway_list"].append(ms)
            ms, sizes["apiserver_list"] = _list_ms(direct, LIST + "?resourceVersion=0")
            rows["apiserver_list"].append(ms)
    finally:
        ours.close()
        direct.close()
        gateway.stop()
    return {"pods": pods, "rounds": rounds, "apiserver_watch_list_status": refused,
            **{f"{k}_ms": round(statistics.median(v[1:]), 1) for k, v in rows.items()},
            **{f"{k}_bytes": v for k, v in sizes.items()}}


def metadata_only(cluster: LocalCluster, pods: int, workdir: Path) -> dict:
    """Memory of a cache of whole Pods against one of their metadata (see the module)."""
    idle = start_gateway(cluster, workdir / "idle")
    try:
        time.sleep(1.0)
        idle_mib = tree_rss_mib(idle.pid)
    finally:
        idle.stop()
    out: dict = {"pods": pods, "idle_mib": round(idle_mib, 1)}
    for name, extra in (("whole", ()), ("metadata", ("--metadata-only", "pods"))):
        began = time.monotonic()
        gateway = start_gateway(cluster, workdir / name, "--prewarm", "pods", "--sync-timeout",
                                "600", *extra, ready_timeout=600)
        try:
            ready = time.monotonic() - began
            time.sleep(2.0)  # the sync's garbage collected
            rss = tree_rss_mib(gateway.pid)
            with httpx.Client(base_url=gateway.url, timeout=120,
                              headers={"Accept-Encoding": "identity"}) as client:
                _, meta_bytes = _list_ms(client, LIST, {"Accept": META_LIST})
                full = client.get(LIST)
        finally:
            gateway.stop()
        out[name] = {"ready_seconds": round(ready, 2), "rss_mib": round(rss, 1),
                     "kib_per_pod": round(1024 * (rss - idle_mib) / pods, 2),
                     "metadata_list_bytes": meta_bytes, "full_list_status": full.status_code}
    out["saved_mib"] = round(out["whole"]["rss_mib"] - out["metadata"]["rss_mib"], 1)
    return out


def run(cluster: LocalCluster, pods: int, rounds: int = 5) -> dict:
    """Both measurements on ``cluster`` (seeded with ``pods`` Pods already)."""
    with tempfile.TemporaryDirectory(prefix="kcg-clients-") as tmp:
        workdir = Path(tmp)
        return {"watch_list": watch_list(cluster, pods, rounds, workdir),
                "metadata_only": metadata_only(cluster, pods, workdir)}


def table(results: dict) -> str:
    """Two small tables for ``docs/benchmarks.md``."""
    w, m = results["watch_list"], results["metadata_only"]
    lines = [
        f"| {w['pods']:,} Pods, median of {w['rounds']} | to the last byte | bytes |",
        "|---|---:|---:|",
        f"| watch-list through the gateway: to the initial-events-end bookmark | "
        f"{w['watch_list_ms']:.0f} ms | {w['watch_list_bytes']:,} |",
        f"| LIST through the gateway | {w['gateway_list_ms']:.0f} ms | "
        f"{w['gateway_list_bytes']:,} |",
        f"| LIST from the API server's watch cache (its watch-list: HTTP "
        f"{w['apiserver_watch_list_status']}) | {w['apiserver_list_ms']:.0f} ms | "
        f"{w['apiserver_list_bytes']:,} |",
        "",
        f"| `--prewarm pods`, {m['pods']:,} Pods | resident memory (idle gateway "
        f"{m['idle_mib']:.0f} MiB) | per Pod | start to ready | metadata-only list | "
        f"full list |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, label in (("whole", "whole objects"), ("metadata", "`--metadata-only pods`")):
        row = m[name]
        lines.append(f"| {label} | {row['rss_mib']:.0f} MiB | {row['kib_per_pod']:.2f} KiB | "
                     f"{row['ready_seconds']:.1f} s | {row['metadata_list_bytes']:,} bytes | "
                     f"HTTP {row['full_list_status']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.clients",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    with LocalCluster() as cluster:
        seed(KubeAPI.for_cluster(cluster), pods=args.pods, configmaps=0)
        results = run(cluster, args.pods, args.rounds)
    results["command"] = "python -m bench.clients " + " ".join(
        argv if argv is not None else sys.argv[1:])
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
