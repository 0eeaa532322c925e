"""Change fan-out: many subscribers, steady changes, delivery latency and losses.

    .venv/bin/python -m bench.fanout [--subscribers 1000] [--rate 10] [--seconds 60]

For each scenario, in the same run: the gateway's Server-Sent Events (the
gateway in its own process, so its CPU and memory are measured), the floor's (the
barest Python server of the same streams, ``bench.fanout_floor``: what is left of
the gateway's CPU per delivery once the kernel's and the write's are taken away) and
direct watches on the API server. Receivers are a compiled Go program
(``bench/fanout/receiver.go``, one thread of Go code, nothing allocated per delivery)
so that receiving does not eat the machine: where it does, its own backlog is what the
latency measures.
Each change is a patch to the real API server carrying its send time; latency
is from that send to the receiver's receipt; ``lost`` counts expected
deliveries that had not arrived by the receiver's deadline (``seconds + settle`` from its
start, connecting included): late ones count too, so at the machine's limit it measures a
backlog as well as anything dropped.

The gateway's own CPU (its CPU per delivery less the floor's) is measured in rounds: the
first run of each scenario, then ``cpu_rounds - 1`` more of the gateway (one worker) and
the floor alone, taking turns, first one then the other. Its figure is the median of the
rounds' differences (``own_cpu``): the same code measured twice in a row moves by more
than the 2 µs a delivery that figure is held to (``bench.threads``, the same tree twice),
so one round's difference says little on its own.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.procs import proc_cpu_seconds, start_gateway, tree_cpu_seconds, tree_rss_mib
from control_plane.cluster import LocalCluster, free_port
from control_plane.kubeapi import KubeAPI

HERE = Path(__file__).parent / "fanout"
NS = "bench-fanout"
# seconds a CPU round's receiver waits after the changes: its CPU is read before then
_CPU_SETTLE = 5.0


def sse_side(workers: int) -> str:
    """The result's name for the gateway with ``workers`` processes."""
    return "gateway SSE" if workers == 1 else f"gateway SSE ×{workers}"


FLOOR_SIDE = "floor SSE"

# the gateway a fan-out scenario streams from: ConfigMaps warm before the first subscriber,
# and limits that let one client open every subscriber's stream (``--workers`` is the caller's)
GATEWAY_FLAGS = ("--prewarm", "configmaps", "--max-streams", "20000",
                 "--max-streams-per-client", "20000", "--subscriber-queue", "10000")


def scenario_name(subscribers: int, rate: float) -> str:
    """A scenario's key in the results (``bench.send_cost``'s figures are kept by it too)."""
    return f"{subscribers} subscribers x {rate:g} changes/s"


def start_floor(cluster: LocalCluster) -> tuple[subprocess.Popen, str]:
    """Start ``bench.fanout_floor`` following ``cluster``'s ConfigMaps in ``NS``; its process
    and stream URL, once it listens."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.fanout_floor", "--port", str(port),
         "--server", cluster.primary.url, "--ca", str(cluster.primary.ca_file), "--namespace", NS],
        stdout=subprocess.PIPE, text=True, env=dict(os.environ, KCG_FLOOR_TOKEN=cluster.admin.token))
    assert proc.stdout is not None
    ready = proc.stdout.readline()
    proc.stdout.close()  # it says nothing more there (its complaints go to stderr)
    if "ready" not in ready:
        proc.kill()
        proc.wait()
        raise RuntimeError("the fan-out floor did not start")
    return proc, f"http://127.0.0.1:{port}/"


def prepare(kube: KubeAPI, objects: int) -> None:
    """The namespace ``NS`` and its ``objects`` ConfigMaps ``fan-0``…, which the scenarios'
    changes patch in turn; those already there are kept."""
    kube.ensure_namespace(NS)
    for i in range(objects):
        if kube.get(f"/api/v1/namespaces/{NS}/configmaps/fan-{i}", ok_missing=True) is None:
            kube.create(f"/api/v1/namespaces/{NS}/configmaps", {"metadata": {"name": f"fan-{i}"}})


def build_receiver(workdir: Path) -> Path:
    target = workdir / "receiver"
    env = dict(os.environ, GOPATH=str(workdir / "gopath"), GOCACHE=str(workdir / "gocache"),
               GOFLAGS="-mod=mod")
    subprocess.run(["go", "build", "-o", str(target), "."], cwd=HERE, env=env, check=True)
    return target


def run_scenario(receiver: Path, kube: KubeAPI, url: str, mode: str, subscribers: int, rate: float,
                 seconds: float, objects: int, token: str = "", ca: str = "",
                 gateway_pid: int | None = None, settle: float = 25.0,
                 apiserver_pid: int | None = None, receiver_threads: int = 1) -> dict:
    """One scenario; ``apiserver_pid``: also the API server's CPU seconds over the run (its
    watchers' share is the difference between a run of watches and one through a gateway);
    ``receiver_threads``: the receiver's threads of Go code (``bench.scale`` picks them)."""
    changes = int(rate * seconds)
    args = [str(receiver), "-url", url, "-mode", mode, "-n", str(subscribers),
            "-duration", f"{seconds + settle}s", "-expect", str(changes),
            "-procs", str(receiver_threads)]
    if token:
        args += ["-token", token, "-ca", ca]
    rx = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert rx.stdout is not None
    ready = rx.stdout.readline()
    if "ready" not in ready:
        raise RuntimeError(f"receiver not ready: {ready} {rx.stderr.read()[-2000:]}")
    time.sleep(1.0)
    cpu0 = tree_cpu_seconds(gateway_pid) if gateway_pid else 0.0
    user0 = tree_cpu_seconds(gateway_pid, system=False) if gateway_pid else 0.0
    api_cpu0 = proc_cpu_seconds(apiserver_pid) if apiserver_pid else 0.0
    rx_cpu0 = proc_cpu_seconds(rx.pid)
    started = time.monotonic()
    for i in range(changes):
        target = started + i / rate
        delay = target - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        kube.patch(f"/api/v1/namespaces/{NS}/configmaps/fan-{i % objects}",
                   {"metadata": {"annotations": {"bench/sent": str(time.time_ns())}},
                    "data": {"n": str(i)}})
    took = time.monotonic() - started
    time.sleep(3.0)
    result: dict = {"changes": changes, "send_seconds": round(took, 1),
                    "receiver_threads": receiver_threads}
    if apiserver_pid:
        result["apiserver_cpu_seconds"] = round(proc_cpu_seconds(apiserver_pid) - api_cpu0, 2)
    gateway_cpu = 0.0
    if gateway_pid:
        gateway_cpu = tree_cpu_seconds(gateway_pid) - cpu0
        gateway_user = tree_cpu_seconds(gateway_pid, system=False) - user0
        result["gateway_cpu_percent"] = round(100 * gateway_cpu / (took + 3), 1)
        result["gateway_rss_mib"] = round(tree_rss_mib(gateway_pid), 1)
    result["receiver_cpu_percent"] = round(100 * (proc_cpu_seconds(rx.pid) - rx_cpu0) / (took + 3), 1)
    out, err = rx.communicate(timeout=seconds + 60)
    result.update(json.loads(out.strip().splitlines()[-1]))
    if gateway_pid and result.get("deliveries"):
        # the whole process's CPU over the run (the informer's work and idle timers too)
        result["gateway_cpu_us_per_delivery"] = round(1e6 * gateway_cpu / result["deliveries"], 1)
        # its own code's share: the rest is the kernel's (on loopback, the receiving side too)
        result["gateway_user_us_per_delivery"] = round(1e6 * gateway_user / result["deliveries"], 1)
    return result


def run(subscribers: int = 1000, rate: float = 10.0, seconds: float = 60.0, objects: int = 10,
        also_apiserver_scenario: bool = False, settle: float = 25.0, log=print,
        cluster: LocalCluster | None = None, workers: tuple[int, ...] = (1, 2),
        cpu_rounds: int = 1) -> dict:
    """Run the scenarios (on ``cluster``, else a fresh one); return results by scenario and side:
    the gateway with each number of ``workers``, and the API server's own watch. With
    ``cpu_rounds`` > 1, the one-worker gateway's and the floor's rows also hold each round's
    CPU per delivery (``cpu_rounds_us``, the first round's first; see the module docstring)."""
    if cluster is None:
        with LocalCluster() as own:
            return run(subscribers, rate, seconds, objects, also_apiserver_scenario, settle, log,
                       own, workers, cpu_rounds)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    workdir = Path(tempfile.mkdtemp(prefix="kcg-fanout-"))
    results: dict = {}
    try:
        receiver = build_receiver(workdir)
        kube = KubeAPI.for_cluster(cluster)
        prepare(kube, objects)
        gateways = {}
        floor = None
        try:
            floor, floor_url = start_floor(cluster)
            for count in workers:
                gateways[sse_side(count)] = start_gateway(
                    cluster, workdir / f"w{count}", *GATEWAY_FLAGS, "--workers", str(count))
            scenarios = [(subscribers, rate)]
            if also_apiserver_scenario:
                scenarios.append((200, 50.0))
            for count, per_second in scenarios:
                name = scenario_name(count, per_second)
                results[name] = {}
                for side, gateway in gateways.items():
                    results[name][side] = run_scenario(
                        receiver, kube, f"{gateway.url}/core/v1/namespaces/{NS}/configmaps",
                        "sse", count, per_second, seconds, objects, gateway_pid=gateway.pid,
                        settle=settle)
                results[name][FLOOR_SIDE] = run_scenario(
                    receiver, kube, floor_url, "sse", count, per_second, seconds, objects,
                    gateway_pid=floor.pid, settle=settle)
                gateway = gateways.get(sse_side(1))
                if cpu_rounds > 1 and gateway is not None:
                    turns = {sse_side(1): (gateway.pid,
                                           f"{gateway.url}/core/v1/namespaces/{NS}/configmaps"),
                             FLOOR_SIDE: (floor.pid, floor_url)}
                    for side in turns:
                        results[name][side]["cpu_rounds_us"] = [
                            results[name][side].get("gateway_cpu_us_per_delivery")]
                    for round_ in range(1, cpu_rounds):
                        order = list(turns.items())
                        for side, (pid, url) in (order[::-1] if round_ % 2 else order):
                            again = run_scenario(receiver, kube, url, "sse", count, per_second,
                                                 seconds, objects, gateway_pid=pid,
                                                 settle=_CPU_SETTLE)
                            results[name][side]["cpu_rounds_us"].append(
                                again.get("gateway_cpu_us_per_delivery"))
                # Watch from now on, so the watchers start where the SSE scenarios ended.
                rv = kube.get(f"/api/v1/namespaces/{NS}/configmaps")["metadata"]["resourceVersion"]
                results[name]["apiserver watch"] = run_scenario(
                    receiver, kube,
                    f"{cluster.primary.url}/api/v1/namespaces/{NS}/configmaps?watch=true"
                    f"&resourceVersion={rv}",
                    "watch", count, per_second, seconds, objects,
                    token=cluster.admin.token, ca=str(cluster.primary.ca_file), settle=settle)
                log(name, json.dumps(results[name], indent=1))
        finally:
            for gateway in gateways.values():
                gateway.stop()
            if floor is not None:
                floor.kill()
                floor.wait()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--objects", type=int, default=10)
    parser.add_argument("--also-apiserver-scenario", action="store_true",
                        help="also 200 subscribers at 50 changes/s (the apiserver baseline's scenario)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    results = run(args.subscribers, args.rate, args.seconds, args.objects,
                  args.also_apiserver_scenario)
    print(table(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


def own_cpu(sse: dict, floor: dict) -> tuple[float, list[float]] | None:
    """The gateway's own CPU per delivery (µs): the median of its rounds' differences from the
    floor's, and those differences in order; a run without rounds gives its one difference.
    ``None`` where either side's CPU was not measured."""
    ours, least = sse.get("cpu_rounds_us"), floor.get("cpu_rounds_us")
    if ours and least and len(ours) == len(least) and None not in ours and None not in least:
        differences = [round(a - b, 1) for a, b in zip(ours, least)]
        return round(statistics.median(differences), 1), differences
    if "gateway_cpu_us_per_delivery" in sse and "gateway_cpu_us_per_delivery" in floor:
        difference = sse["gateway_cpu_us_per_delivery"] - floor["gateway_cpu_us_per_delivery"]
        return round(difference, 1), [round(difference, 1)]
    return None


def _per_delivery(row: dict) -> str:
    """The gateway's CPU per delivery, and its user-space share where measured."""
    if "gateway_cpu_us_per_delivery" not in row:
        return ""
    user = row.get("gateway_user_us_per_delivery")
    rounds = row.get("cpu_rounds_us") or []
    return (f"{row['gateway_cpu_us_per_delivery']} µs" + (f" (user {user})" if user is not None else "")
            + (f"; rounds {', '.join(str(r) for r in rounds)}" if len(rounds) > 1 else ""))


def table(results: dict) -> str:
    lines = ["| scenario | side | p50 | p90 | p99 | max | deliveries | lost | server CPU | "
             "server CPU per delivery | server RSS | receiver CPU |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for scenario, sides in results.items():
        for side, r in sides.items():
            lines.append(
                f"| {scenario} | {side} | {r['p50_ms']:.1f} ms | {r['p90_ms']:.1f} ms | {r['p99_ms']:.1f} ms | "
                f"{r['max_ms']:.0f} ms | {r['deliveries']} | {r['lost']} | "
                f"{str(r.get('gateway_cpu_percent', '')) + ' %' if 'gateway_cpu_percent' in r else ''} | "
                f"{_per_delivery(r)} | "
                f"{str(r.get('gateway_rss_mib', '')) + ' MiB' if 'gateway_rss_mib' in r else ''} | "
                f"{r['receiver_cpu_percent']} % |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
