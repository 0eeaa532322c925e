"""Processes under measurement: the gateway as its own process, and /proc readings.

Benchmarks run the gateway as ``kube-cache-gateway serve`` in a process of its
own, exactly as operators run it, so that its CPU time and memory can be read
from ``/proc`` without the load generator or the driver mixed in.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx

from control_plane.certs import self_signed_cert
from control_plane.cluster import LocalCluster, free_port

__all__ = ["Gateway", "children", "proc_cpu_seconds", "proc_rss_mib", "start_gateway",
           "tree_cpu_seconds", "tree_rss_mib", "workers_of"]


def proc_cpu_seconds(pid: int, system: bool = True) -> float:
    """User + system CPU seconds used so far by process ``pid`` (user alone: not ``system``).

    The split matters for writes to sockets on loopback: the kernel's whole delivery,
    the receiving side's TCP included, is charged to the writer as system time."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + (int(fields[12]) if system else 0)) / os.sysconf("SC_CLK_TCK")


def proc_rss_mib(pid: int) -> float:
    """Resident memory of process ``pid`` in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (a gateway's workers)."""
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def workers_of(pid: int) -> list[int]:
    """The worker processes of a gateway supervisor (not multiprocessing's resource tracker)."""
    found = []
    for child in children(pid):
        try:
            if b"resource_tracker" not in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(child)
        except OSError:
            pass
    return found


def tree_cpu_seconds(pid: int, system: bool = True) -> float:
    """CPU seconds of ``pid`` and its children (a gateway with ``--workers``, all of it)."""
    return proc_cpu_seconds(pid, system) + sum(proc_cpu_seconds(c, system) for c in children(pid))


def tree_rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` and its children in MiB."""
    return proc_rss_mib(pid) + sum(proc_rss_mib(c) for c in children(pid))


class Gateway:
    """A running ``kube-cache-gateway serve``; ``url`` is its base address."""

    def __init__(self, proc: subprocess.Popen, url: str, verify: ssl.SSLContext | bool) -> None:
        self.proc = proc
        self.url = url
        self.verify = verify

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def _command_module() -> str:
    """The command's module in the tree this process runs in: ``bench.ab`` starts older
    checkouts too — from before ``app/launch/`` (``app.process.cli``), and from before
    ``app/`` had wings (``app.cli``)."""
    for module in ("app.launch.cli", "app.process.cli"):
        if Path(module.replace(".", "/") + ".py").exists():
            return module
    return "app.cli"


def start_gateway(cluster: LocalCluster, workdir: Path, *args: str, tls: bool = False,
                  ready_timeout: float = 120.0) -> Gateway:
    """Start the gateway against ``cluster``'s primary apiserver; return once ``/readyz`` is 200.

    ``args`` are extra ``serve`` flags (``--prewarm pods`` makes readiness wait
    for that cache). With ``tls`` it serves HTTPS with a fresh self-signed
    certificate, as the API server does.
    """
    kubeconfig = cluster.write_kubeconfig(workdir / "kubeconfig", cluster.admin)
    port = free_port()
    command = [sys.executable, "-m", _command_module(), "serve", "--kubeconfig", str(kubeconfig),
               "--port", str(port), "--log-level", "warning", *args]
    verify: ssl.SSLContext | bool = True
    scheme = "http"
    if tls:
        cert, key = self_signed_cert(workdir, f"gateway-{port}")
        command += ["--tls-cert-file", str(cert), "--tls-private-key-file", str(key)]
        verify = ssl.create_default_context(cafile=str(cert))
        scheme = "https"
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    gateway = Gateway(proc, f"{scheme}://127.0.0.1:{port}", verify)
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RuntimeError(f"gateway exited ({proc.returncode}):\n{err[-3000:]}")
        try:
            if httpx.get(f"{gateway.url}/readyz", timeout=2, verify=verify).status_code == 200:
                return gateway
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    gateway.stop()
    raise RuntimeError("gateway did not become ready")
