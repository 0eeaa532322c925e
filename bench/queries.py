"""Queries side by side: the API server's own watch cache vs the gateway, same load tool, same run.

    .venv/bin/python -m bench.queries [--pods 10000] [--seconds 5] [--rounds 3] [--profile DIR]

Seeds the workload (``bench.seed``) into the project's kube-apiserver + etcd,
starts two gateways as their own processes (HTTPS with a self-signed
certificate, as the API server speaks; and plain HTTP), each with Pods
pre-warmed, and drives every query with ``wrk`` at 1 and 8 connections:
the API server with ``resourceVersion=0`` (answered from its watch cache, the
fastest it can be), then each gateway, interleaved, ``rounds`` times; the
table holds medians (three rounds by default: of two, a median is their mean, which one
round starved by the machine moves by 5-10 points of a floor share). wrk runs with one
thread; its CPU share and each server's are read from ``/proc`` and ``wait4``, since on a
2-core machine the load generator competes with the server it loads.

Before measuring, each query is answered once by every side and the answers
compared by object names: the same objects, or the run stops.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.procs import proc_cpu_seconds, start_gateway, tree_cpu_seconds, workers_of as worker_pids
from bench.seed import seed
from control_plane.certs import self_signed_cert
from control_plane.cluster import LocalCluster, free_port
from control_plane.kubeapi import KubeAPI

__all__ = ["QUERIES", "Query", "median_of", "parse_wrk", "run", "table"]


@dataclass(frozen=True)
class Query:
    name: str
    what: str
    path: str

    def url(self, base: str, apiserver: bool) -> str:
        if not apiserver:
            return base + self.path
        return base + self.path + ("&" if "?" in self.path else "?") + "resourceVersion=0"


def _selector(text: str) -> str:
    return "labelSelector=" + urllib.parse.quote(text, safe="")


QUERIES = (
    Query("Q1", "label `app=app-7` across all namespaces (1%)", "/api/v1/pods?" + _selector("app=app-7")),
    Query("Q2", "set-based `app in (app-7,app-8),tier!=db`",
          "/api/v1/pods?" + _selector("app in (app-7,app-8),tier!=db")),
    Query("Q3", "one namespace's pods", "/api/v1/namespaces/bench-007/pods"),
    Query("Q4", "one pod by name", "/api/v1/namespaces/bench-007/pods/pod-00007"),
    Query("Q5", "every pod", "/api/v1/pods"),
)

SIDES = ("apiserver", "gateway HTTPS", "gateway HTTP", "gateway HTTPS ×2", "gateway HTTP ×2")
# each gateway side's floor: the bare app on the same scheme and processes
FLOOR_OF = {side: side.replace("gateway", "floor") for side in SIDES[1:]}
FLOOR_SIDES = tuple(FLOOR_OF.values())


def round_order(r: int) -> tuple[str, ...]:
    """The sides in round ``r``: each gateway side beside its floor, which goes first
    alternating by round. The bare app's rate moved by up to 1.9x between runs measured
    once, after every gateway side; a share of it is only as steady as the two figures are
    taken under the same conditions."""
    order = ["apiserver"]
    for side, floor in FLOOR_OF.items():
        pair = [side, floor]
        order += pair if r % 2 == 0 else pair[::-1]
    return tuple(order)


def workers_of(side: str) -> int:
    """``gateway HTTP ×2`` -> 2: the side's serving processes."""
    return int(side.rsplit("×", 1)[1]) if "×" in side else 1

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}
_SIZES = {"B": 1, "KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3}


def _duration_ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)([a-z]+)", text).groups()
    return float(number) * _UNITS[unit]


def parse_wrk(output: str) -> dict:
    """Read wrk's ``--latency`` report: percentiles, requests/s, bytes/s, errors.

    Raises:
        ValueError: the report lacks what every wrk run prints.
    """
    result: dict = {}
    for percent, value in re.findall(r"^\s+(50|90|99)%\s+(\S+)\s*$", output, re.M):
        result[f"p{percent}_ms"] = _duration_ms(value)
    found = re.search(r"^Requests/sec:\s+([\d.]+)", output, re.M)
    moved = re.search(r"^Transfer/sec:\s+([\d.]+)(\w+)", output, re.M)
    total = re.search(r"^\s+(\d+) requests in", output, re.M)
    if not (found and moved and total and "p50_ms" in result and "p99_ms" in result):
        raise ValueError(f"not a wrk --latency report:\n{output}")
    result["requests_per_second"] = float(found.group(1))
    result["bytes_per_second"] = float(moved.group(1)) * _SIZES[moved.group(2)]
    result["requests"] = int(total.group(1))
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    result["non_2xx"] = int(bad.group(1)) if bad else 0
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output)
    result["socket_errors"] = sum(int(n) for n in errors.groups()) if errors else 0
    return result


def wrk(url: str, connections: int, seconds: float, token: str = "",
        server_pid: int | None = None) -> dict:
    """One wrk run (one thread); the report plus wrk's and the server's CPU share."""
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "--latency", "--timeout", "60s"]
    if token:
        command += ["-H", f"Authorization: Bearer {token}"]
    server_cpu0 = tree_cpu_seconds(server_pid) if server_pid else 0.0
    workers = worker_pids(server_pid) if server_pid else []
    worker_cpu0 = [proc_cpu_seconds(pid) for pid in workers]
    started = time.monotonic()
    proc = subprocess.Popen([*command, url], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stdout.close()
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {output}")
    result = parse_wrk(output)
    result["wrk_cpu_percent"] = 100 * (usage.ru_utime + usage.ru_stime) / wall
    if server_pid:
        result["server_cpu_percent"] = 100 * (tree_cpu_seconds(server_pid) - server_cpu0) / wall
    if len(workers) > 1:  # each worker's CPU, busiest first: how evenly the kernel spread them
        spent = [proc_cpu_seconds(pid) - before for pid, before in zip(workers, worker_cpu0)]
        result["worker_cpu_percent"] = sorted((100 * s / wall for s in spent), reverse=True)
    if result["non_2xx"] or result["socket_errors"]:
        raise RuntimeError(f"{url}: {result['non_2xx']} error answers, "
                           f"{result['socket_errors']} socket errors")
    return result


def _names(body: dict) -> list[str]:
    items = body["items"] if "items" in body else [body]
    return sorted(f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in items)


def _answer(url: str, token: str, verify: ssl.SSLContext | bool) -> tuple[list[str], bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = httpx.get(url, headers=headers, verify=verify, timeout=120)
    response.raise_for_status()
    return _names(response.json()), response.content


def start_floor(workdir: Path, bodies: dict[str, bytes], tls: bool,
                workers: int = 1) -> tuple[subprocess.Popen, str]:
    """Serve ``bodies`` (path?query -> bytes) from ``bench.floor`` on uvicorn (``workers``
    processes, a listening socket each as the gateway's: ``python -m bench.floor``); return
    it and its URL."""
    directory = workdir / "floor"
    directory.mkdir(parents=True, exist_ok=True)
    index = {}
    for i, (target, body) in enumerate(bodies.items()):
        (directory / f"{i}.json").write_bytes(body)
        index[target] = f"{i}.json"
    (directory / "index.json").write_text(json.dumps(index))
    port = free_port()
    command = ([sys.executable, "-m", "uvicorn", "bench.floor:app", "--port", str(port),
                "--log-level", "warning", "--no-access-log"] if workers == 1 else
               [sys.executable, "-m", "bench.floor", "--port", str(port), "--workers",
                str(workers)])
    verify: ssl.SSLContext | bool = True
    if tls:
        cert, key = self_signed_cert(directory, "floor")
        command += ["--ssl-certfile", str(cert), "--ssl-keyfile", str(key)]
        verify = ssl.create_default_context(cafile=str(cert))
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    proc = subprocess.Popen(command, env=dict(os.environ, KCG_FLOOR_BODIES=str(directory)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/", timeout=2, verify=verify)
            return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    proc.wait()
    raise RuntimeError("the floor server did not start")


def _apiserver_pid(cluster: LocalCluster) -> int:
    assert cluster.primary.process is not None
    return cluster.primary.process.pid


def run(pods: int = 10_000, configmaps: int = 1_000, seconds: float = 5.0, rounds: int = 3,
        connections: tuple[int, ...] = (1, 8), profile: Path | None = None,
        cluster: LocalCluster | None = None, log=print, warm_up: int = 1) -> dict:
    """Seed (unless ``cluster`` is given, already seeded), measure; return the results.
    ``warm_up``: seconds of load before each side's first measurement (0: none, for a run
    that checks the machinery, whose figures mean nothing)."""
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed (make bench, or apt-get install wrk)")
    if cluster is None:
        with LocalCluster() as own:
            log(f"seeding {pods} pods and {configmaps} configmaps ...")
            seed(KubeAPI.for_cluster(own), pods=pods, configmaps=configmaps, log=log)
            return run(pods, configmaps, seconds, rounds, connections, profile, own, log, warm_up)
    workdir = Path(tempfile.mkdtemp(prefix="kcg-queries-"))
    gateways = {}
    floors = {}
    try:
        args = ("--prewarm", "pods", "--sync-timeout", "120")
        for side in SIDES[1:]:
            gateways[side] = start_gateway(
                cluster, workdir / side.replace(" ", "-"), *args, "--workers", str(workers_of(side)),
                tls=side.split()[1] == "HTTPS")
        token = cluster.admin.token
        api_verify = ssl.create_default_context(cafile=str(cluster.primary.ca_file))
        api_verify.check_hostname = False


        def target(side: str, query: Query) -> tuple[str, str, int, ssl.SSLContext | bool]:
            if side == "apiserver":
                return (query.url(cluster.primary.url, True), token, _apiserver_pid(cluster),
                        api_verify)
            if side in floors:
                proc, url = floors[side]
                return query.url(url, False), "", proc.pid, False
            gw = gateways[side]
            return query.url(gw.url, False), "", gw.pid, gw.verify

        answers: dict = {}
        floor_bodies: dict[str, bytes] = {}
        for query in QUERIES:
            names = {}
            for side in SIDES:
                url, tok, _, verify = target(side, query)
                names[side], body = _answer(url, tok, verify)
                answers.setdefault(query.name, {})[side] = {"objects": len(names[side]),
                                                             "bytes": len(body)}
                if side == "gateway HTTP":
                    floor_bodies[query.path] = body
            if len({tuple(n) for n in names.values()}) != 1 or not names["apiserver"]:
                raise RuntimeError(f"{query.name}: the sides answer different objects: "
                                   f"{ {s: len(n) for s, n in names.items()} }")
            log(f"{query.name}: {len(names['apiserver'])} objects; bytes "
                f"{ {s: a['bytes'] for s, a in answers[query.name].items()} }")
        for side in FLOOR_SIDES:
            floors[side] = start_floor(workdir / side.replace(" ", "-"), floor_bodies,
                                       tls=side.split()[1] == "HTTPS", workers=workers_of(side))
        runs: dict = {}
        for r in range(rounds):
            for query in QUERIES:
                duration = seconds * 2 if query.name == "Q5" else seconds
                for conns in connections:
                    for side in round_order(r):
                        url, tok, pid, _ = target(side, query)
                        if r == 0 and warm_up:
                            wrk(url, conns, warm_up, tok)
                        result = wrk(url, conns, duration, tok, pid)
                        runs.setdefault(f"{query.name}|{conns}|{side}", []).append(result)
                        log(f"round {r + 1} {query.name} c{conns} {side}: "
                            f"p50 {result['p50_ms']:.2f} ms p99 {result['p99_ms']:.2f} ms "
                            f"{result['requests_per_second']:.0f} req/s "
                            f"(server CPU {result['server_cpu_percent']:.0f}%, "
                            f"wrk {result['wrk_cpu_percent']:.0f}%)")
        profiles = {}
        if profile is not None:
            for query in (QUERIES[0], QUERIES[4]):
                url, _, pid, _ = target("gateway HTTP", query)
                profiles[query.name] = profile_under_load(pid, url, profile / f"{query.name}.txt",
                                                          seconds=seconds * 2)
        return {"answers": answers, "runs": runs, "profiles": profiles, "rounds": rounds,
                "seconds": seconds, "connections": list(connections)}
    finally:
        for gw in gateways.values():
            gw.stop()
        for proc, _ in floors.values():
            proc.terminate()
            proc.wait(30)
        shutil.rmtree(workdir, ignore_errors=True)


def profile_under_load(pid: int, url: str, out: Path, seconds: float) -> dict:
    """Sample the gateway with py-spy while wrk loads ``url`` at 8 connections.

    Writes the folded stacks to ``out`` and returns the functions that hold
    the most samples, by own time and including callees.
    """
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    out.parent.mkdir(parents=True, exist_ok=True)
    sampler = subprocess.Popen([spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "250",
                                "--gil", "--duration", str(int(seconds) + 1), "--output", str(out)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.5)
    wrk(url, 8, seconds)
    _, err = sampler.communicate(timeout=seconds + 60)
    if sampler.returncode != 0 or not out.exists():
        raise RuntimeError(f"py-spy failed: {err.decode(errors='replace')[-2000:]}")
    return summarize_folded(out.read_text())


def summarize_folded(text: str, top: int = 12) -> dict:
    """Own and inclusive sample shares per function from py-spy's folded stacks."""
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    for line in text.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        total += count
        frames = [_short(f) for f in stack.split(";")]
        own[frames[-1]] = own.get(frames[-1], 0) + count
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + count

    def share(table_: dict[str, int]) -> list[tuple[str, float]]:
        ranked = sorted(table_.items(), key=lambda kv: -kv[1])[:top]
        return [(name, round(100 * n / total, 1)) for name, n in ranked]

    # The trunk every sample passes through (the event loop, the CLI) says nothing.
    branches = {name: n for name, n in inclusive.items()
                if n < 0.97 * total and name.split(" (")[0] not in _TRUNK
                and "app/launch/cli.py" not in name}
    return {"samples": total, "own": share(own), "inclusive": share(branches)}


_TRUNK = {"<module>", "_run_code", "_run_module_as_main", "asyncio_run", "Server.run", "Server.serve", "Runner.run", "run_forever", "_run_once",
          "_run", "run"}


def _short(frame: str) -> str:
    """``handle (starlette/routing.py:123)`` -> ``handle (starlette/routing.py)``."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "/lib/python3.11/", "/work/", "/main/"):
        if marker in where:
            where = where.split(marker, 1)[1]
    return f"{name} ({where})" if where else name


def median_of(rows: list[dict], key: str) -> float:
    """The median of ``key`` over a row's rounds: the figure every table and target reads."""
    return statistics.median(r[key] for r in rows)


def _fmt_ms(ms: float) -> str:
    return f"{ms:.2f} ms" if ms < 10 else f"{ms:.1f} ms" if ms < 100 else f"{ms:.0f} ms"


def table(results: dict) -> str:
    """The results as a markdown table, with ratios against the API server."""
    lines = ["| query | conns | side | objects | bytes | p50 | p99 | req/s | MB/s | objects/s "
             "| p50 ÷ apiserver | req/s ÷ apiserver | server CPU | wrk CPU |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    answers, runs = results["answers"], results["runs"]
    for query in QUERIES:
        for conns in results["connections"]:
            base = runs[f"{query.name}|{conns}|apiserver"]
            base_p50, base_rps = median_of(base, "p50_ms"), median_of(base, "requests_per_second")
            for side in SIDES:
                rows = runs.get(f"{query.name}|{conns}|{side}")
                if not rows:  # a run from before the side was measured
                    continue
                p50, p99 = median_of(rows, "p50_ms"), median_of(rows, "p99_ms")
                rps = median_of(rows, "requests_per_second")
                answer = answers[query.name][side]
                ratio_p50 = "" if side == "apiserver" else f"{p50 / base_p50:.3f} ({base_p50 / p50:.0f}× lower)"
                ratio_rps = "" if side == "apiserver" else f"{rps / base_rps:.1f}×"
                lines.append(
                    f"| {query.name} | {conns} | {side} | {answer['objects']} | {answer['bytes']:,} "
                    f"| {_fmt_ms(p50)} | {_fmt_ms(p99)} | {rps:,.0f} "
                    f"| {median_of(rows, 'bytes_per_second') / 1e6:,.1f} | {rps * answer['objects']:,.0f} "
                    f"| {ratio_p50} | {ratio_rps} | {median_of(rows, 'server_cpu_percent'):.0f} % "
                    f"| {median_of(rows, 'wrk_cpu_percent'):.0f} % |")
    return "\n".join(lines)


def floor_table(results: dict) -> str:
    """The gateway next to the bare ASGI app answering the same bytes on the same server."""
    lines = ["| query | conns | scheme | workers | floor p50 | gateway p50 | floor req/s "
             "| gateway req/s | gateway's share of the floor's rate | busiest worker's share "
             "of the CPU: floor, gateway |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    runs = results["runs"]
    for query in QUERIES:
        for conns in results["connections"]:
            for side, floor_side in FLOOR_OF.items():
                floor = runs.get(f"{query.name}|{conns}|{floor_side}")
                gw = runs.get(f"{query.name}|{conns}|{side}")
                if not floor or not gw:
                    continue
                f_rps, g_rps = median_of(floor, "requests_per_second"), median_of(gw, "requests_per_second")
                lines.append(f"| {query.name} | {conns} | {floor_side.split()[1]} "
                             f"| {workers_of(floor_side)} | {_fmt_ms(median_of(floor, 'p50_ms'))} "
                             f"| {_fmt_ms(median_of(gw, 'p50_ms'))} | {f_rps:,.0f} | {g_rps:,.0f} "
                             f"| {100 * g_rps / f_rps:.0f} % "
                             f"| {busiest_share(floor)}, {busiest_share(gw)} |")
    return "\n".join(lines)


def busiest_share(rows: list[dict]) -> str:
    """The busiest worker's share of the workers' CPU in a row's rounds (their median), "—"
    for one worker or a run that did not measure it: 50 % is an even spread between two."""
    shares = [max(r["worker_cpu_percent"]) / sum(r["worker_cpu_percent"])
              for r in rows if sum(r.get("worker_cpu_percent") or [0]) > 0]
    return f"{100 * statistics.median(shares):.0f} %" if shares else "—"


def profile_table(results: dict) -> str:
    """The py-spy summaries as markdown lists."""
    parts = []
    for name, summary in results.get("profiles", {}).items():
        parts.append(f"**{name}** ({summary['samples']} samples) — own time: "
                     + "; ".join(f"`{f}` {p} %" for f, p in summary["own"][:8])
                     + ". Including callees: "
                     + "; ".join(f"`{f}` {p} %" for f, p in summary["inclusive"][:12]) + ".")
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--configmaps", type=int, default=1_000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", type=Path, default=None,
                        help="also sample the gateway with py-spy under Q1 and Q5; folded stacks here")
    parser.add_argument("--out", type=Path, default=None, help="write the raw results as JSON")
    args = parser.parse_args()
    started = time.monotonic()
    results = run(args.pods, args.configmaps, args.seconds, args.rounds, profile=args.profile)
    print(table(results))
    print(profile_table(results))
    print(f"(benchmark took {time.monotonic() - started:.0f} s)")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
