"""What one write to a loopback TCP connection costs here: the kernel's part of a delivery.

    .venv/bin/python -m bench.send_cost [--connections 1000] [--rate 10] [--seconds 10] [--size 600]

``connections`` TCP connections on loopback, each drained by a child process;
this process writes one frame of ``size`` bytes to every one of them, ``rate``
times a second, from a plain loop of ``socket.sendall`` — no event loop, no HTTP,
no framing — and reports its own CPU time per write: the total is the scheduler's exact count,
the split between user and system is the kernel's estimate from its clock ticks
(over a few seconds at a few percent of a core, a rough one).

Why. A change stream's delivery is at least one write to one connection, and on
loopback the kernel charges the writer for all of it: its own TCP, the
receiving side's and the reader's wake-up. So this figure is what any server on
this machine pays per delivered event at that fan-out, whatever its language or
design; ``bench.fanout_floor`` (a whole Python server of the same streams) sits
above it, the gateway above that. A target for the gateway's CPU per delivery
is read against it: below it, the target asks for less than one ``send``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import selectors
import socket
import subprocess
import sys
import time

__all__ = ["run", "table"]


def _drain(port: int, connections: int) -> None:
    """The child: connect ``connections`` times, read everything until each is closed,
    then say how many bytes came and how much CPU reading them took."""
    selector = selectors.DefaultSelector()
    for _ in range(connections):
        conn = socket.create_connection(("127.0.0.1", port))
        conn.setblocking(False)
        selector.register(conn, selectors.EVENT_READ)
    print("connected", flush=True)
    received, open_ = 0, connections
    while open_:
        for key, _ in selector.select(5):
            try:
                data = key.fileobj.recv(1 << 16)
            except BlockingIOError:
                continue
            if not data:
                selector.unregister(key.fileobj)
                key.fileobj.close()
                open_ -= 1
            received += len(data)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"received": received, "cpu_s": usage.ru_utime + usage.ru_stime}), flush=True)


def _cpu() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def run(connections: int = 1000, rate: float = 10.0, seconds: float = 10.0,
        size: int = 600) -> dict:
    """Write to every connection ``rate`` times a second for ``seconds``; the CPU per write."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(connections)
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.send_cost", "--drain", str(listener.getsockname()[1]),
         "--connections", str(connections)], stdout=subprocess.PIPE, text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sockets = []
    try:
        for _ in range(connections):
            conn, _ = listener.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sockets.append(conn)
        assert child.stdout is not None
        if child.stdout.readline().strip() != "connected":
            raise RuntimeError("the draining process did not connect")
        frame = b"x" * size
        user0, system0 = _cpu()
        started = time.monotonic()
        writes, tick = 0, started
        while tick - started < seconds:
            for conn in sockets:
                conn.sendall(frame)
            writes += connections
            tick += 1 / rate
            pause = tick - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        user1, system1 = _cpu()
        wall = time.monotonic() - started
    finally:
        for conn in sockets:
            conn.close()
        listener.close()
    out, _ = child.communicate(timeout=60)
    drained = json.loads(out.strip().splitlines()[-1])
    if drained["received"] != writes * size:
        raise RuntimeError(f"{writes * size} bytes written, {drained['received']} read")
    return {"connections": connections, "rate": rate, "size": size, "writes": writes,
            "seconds": round(wall, 1),
            "cpu_us_per_write": round((user1 - user0 + system1 - system0) / writes * 1e6, 2),
            "user_us_per_write": round((user1 - user0) / writes * 1e6, 2),
            "system_us_per_write": round((system1 - system0) / writes * 1e6, 2),
            "reader_cpu_s": round(drained["cpu_s"], 2)}


def table(results: dict) -> str:
    """Results by scenario: one row each."""
    lines = ["| scenario | writes | CPU per write | user | system |", "|---|---:|---:|---:|---:|"]
    for scenario, r in results.items():
        lines.append(f"| {scenario} (one send() alone, {r['size']} B) | {r['writes']:,} | "
                     f"{r['cpu_us_per_write']} µs | {r['user_us_per_write']} µs | "
                     f"{r['system_us_per_write']} µs |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--size", type=int, default=600)
    parser.add_argument("--drain", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drain:
        _drain(args.drain, args.connections)
        return
    print(json.dumps(run(args.connections, args.rate, args.seconds, args.size)))


if __name__ == "__main__":
    main()
