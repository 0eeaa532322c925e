"""Hostile load before any token is checked, measured on a gateway process of its own.

    .venv/bin/python -m bench.hostile [--heads 1500] [--tokens 3000] [--seconds 15]

- **heads**: ``--heads`` connections each send about 1 MB of request head and never
  finish it. Reported: the gateway's resident memory before, at the peak and after, how
  long until every connection was closed, and a well-behaved client's median and p99
  latency before, while the crowd arrives (its connections' megabytes read between that
  client's requests), and once it is held.
- **tokens**: one client sends ``--tokens`` requests, each with a new random bearer token,
  over ``--seconds``, to a gateway with ``--authz kubernetes`` over the real API server.
  Reported: the ``TokenReview``s the API server received (its own
  ``apiserver_request_total``), the answers' codes, and a known caller's latency
  before and during the flood (its review is kept: it should not wait on the flood).

The load generator shares the machine's two cores with the gateway and the API server.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import secrets
import socket
import ssl
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from bench.procs import proc_rss_mib, start_gateway
from control_plane.cluster import LocalCluster

__all__ = ["HeadCrowd", "heads", "main", "tokens"]


def _latencies(url: str, path: str, headers: dict, count: int) -> list[float]:
    out = []
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        for _ in range(count):
            began = time.perf_counter()
            assert client.get(path).status_code == 200
            out.append((time.perf_counter() - began) * 1000)
    return out


def _p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


class HeadCrowd:
    """Connections that each send about ``head_bytes`` of request head and never finish it.

    Shared by the benchmark and the test that holds its figure, so that both measure the
    same crowd: ``arrive`` opens them (calling ``meanwhile`` every ``every`` connections,
    to sample memory and a well-behaved client between arrivals); ``wait_closed`` waits
    until the gateway has closed every one, or ``limit`` seconds, and says how long it took.
    """

    def __init__(self, port: int, head_bytes: int = 1_000_000) -> None:
        self.port = port
        self.payload = b"GET / HTTP/1.1\r\nX-Pad: " + b"p" * head_bytes
        self.connections: list[socket.socket] = []
        self.still_open: list[socket.socket] = []

    def arrive(self, count: int, every: int = 50, meanwhile=lambda: None) -> None:
        for i in range(count):
            conn = socket.create_connection(("127.0.0.1", self.port))
            conn.setblocking(False)
            try:
                conn.send(self.payload)  # what the kernel takes at once; the rest never comes
            except BlockingIOError:
                pass
            self.connections.append(conn)
            if i % every == 0:
                meanwhile()
        self.still_open = list(self.connections)

    def wait_closed(self, limit: float, meanwhile=lambda: None, poll: float = 0.2) -> float:
        began = time.monotonic()
        while self.still_open and time.monotonic() - began < limit:
            meanwhile()
            self.still_open = [c for c in self.still_open if not _closed(c)]
            time.sleep(poll)
        return time.monotonic() - began

    def close(self) -> None:
        for conn in self.connections:
            conn.close()

    def __enter__(self) -> HeadCrowd:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _closed(conn: socket.socket) -> bool:
    """Whether the other end closed ``conn`` (non-blocking: what it sent is read and dropped)."""
    try:
        return conn.recv(1 << 20) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def heads(cluster: LocalCluster, workdir: Path, count: int, log=print) -> dict:
    gateway = start_gateway(cluster, workdir, "--header-timeout", "30")
    path = "/api/v1/namespaces/default/configmaps"
    try:
        idle = _latencies(gateway.url, path, {}, 200)
        before = proc_rss_mib(gateway.pid)
        port = int(gateway.url.rsplit(":", 1)[1])
        peak, during = before, []

        def sample() -> None:
            nonlocal peak
            peak = max(peak, proc_rss_mib(gateway.pid))

        def arriving() -> None:
            sample()
            during.extend(_latencies(gateway.url, path, {}, 5))

        with HeadCrowd(port) as crowd:
            crowd.arrive(count, every=50, meanwhile=arriving)
            held = _latencies(gateway.url, path, {}, 200)  # the crowd arrived, and is held
            all_closed = crowd.wait_closed(120, meanwhile=sample)
            open_ = crowd.still_open
        time.sleep(3)
        after = proc_rss_mib(gateway.pid)
    finally:
        gateway.stop()
    result = {"connections": count, "rss_before_mib": round(before, 1),
              "rss_peak_mib": round(peak, 1), "rss_after_mib": round(after, 1),
              "closed_within_s": round(all_closed, 1), "still_open": len(open_),
              "idle_p50_ms": round(statistics.median(idle), 2), "idle_p99_ms": round(_p(idle, 99), 2),
              "arriving_p50_ms": round(statistics.median(during), 2),
              "arriving_p99_ms": round(_p(during, 99), 2),
              "held_p50_ms": round(statistics.median(held), 2), "held_p99_ms": round(_p(held, 99), 2)}
    log(f"heads: {result}")
    return result


def _token_reviews(cluster: LocalCluster) -> int:
    """The TokenReviews the API server has answered, from its own metrics."""
    server = cluster.primary
    text = httpx.get(f"{server.url}/metrics", timeout=30,
                     verify=ssl.create_default_context(cafile=str(server.ca_file)),
                     headers={"Authorization": f"Bearer {cluster.admin.token}"}).text
    return int(sum(float(v) for v in re.findall(
        r'^apiserver_request_total\{[^}]*resource="tokenreviews"[^}]*\} (\S+)$', text, re.M)))


def tokens(cluster: LocalCluster, workdir: Path, count: int, seconds: float, log=print) -> dict:
    gateway = start_gateway(cluster, workdir, "--authz", "kubernetes", "--prewarm", "configmaps")
    path = "/api/v1/namespaces/default/configmaps"
    known = {"Authorization": f"Bearer {cluster.admin.token}"}
    try:
        _latencies(gateway.url, path, known, 5)  # its review is now kept
        idle = _latencies(gateway.url, path, known, 200)
        reviews_before = _token_reviews(cluster)
        codes: dict[int, int] = {}

        async def flood() -> None:
            async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as client:
                per_tick = max(1, int(count / seconds / 10))
                sent = 0
                while sent < count:
                    tick = time.monotonic()
                    batch = [client.get(path, headers={"Authorization": "Bearer "
                                                       + secrets.token_urlsafe(24)})
                             for _ in range(min(per_tick, count - sent))]
                    for answer in await asyncio.gather(*batch, return_exceptions=True):
                        code = getattr(answer, "status_code", 0)
                        codes[code] = codes.get(code, 0) + 1
                    sent += len(batch)
                    await asyncio.sleep(max(0.0, 0.1 - (time.monotonic() - tick)))

        began = time.monotonic()
        flooding = threading.Thread(target=lambda: asyncio.run(flood()))
        flooding.start()
        during = []
        while flooding.is_alive():
            during += _latencies(gateway.url, path, known, 10)
        flooding.join()
        took = time.monotonic() - began
        reviews = _token_reviews(cluster) - reviews_before
    finally:
        gateway.stop()
    result = {"random_tokens": count, "seconds": round(took, 1), "token_reviews": reviews,
              "reviews_per_second": round(reviews / took, 1), "answers": dict(sorted(codes.items())),
              "known_idle_p50_ms": round(statistics.median(idle), 2),
              "known_idle_p99_ms": round(_p(idle, 99), 2),
              "known_during_p50_ms": round(statistics.median(during), 2),
              "known_during_p99_ms": round(_p(during, 99), 2)}
    log(f"tokens: {result}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__.splitlines()[0])
    parser.add_argument("--heads", type=int, default=1500)
    parser.add_argument("--tokens", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=15.0)
    args = parser.parse_args()
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * args.heads)), hard))
    with LocalCluster() as cluster, tempfile.TemporaryDirectory() as tmp:
        os.makedirs(Path(tmp) / "heads")
        os.makedirs(Path(tmp) / "tokens")
        heads(cluster, Path(tmp) / "heads", args.heads)
        tokens(cluster, Path(tmp) / "tokens", args.tokens, args.seconds)


if __name__ == "__main__":
    main()
