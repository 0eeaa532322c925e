"""Authorization decided from the gateway's own caches, beside a review for everything.

    .venv/bin/python -m bench.local_authz [--callers 1000] [--json FILE]

One kube-apiserver + etcd; two gateways over it, plain HTTP, ``--authz kubernetes``: one as
by default (``--authz-local-rbac auto``: the cluster's RBAC, followed, decides, a review only
where it allows nothing; ``--authn-local-tokens``: ServiceAccount tokens verified with the
issuer's keys and the objects they are bound to, followed), one with both off (every new
token a ``TokenReview`` and every new access a ``SubjectAccessReview``, as before). Side by
side, in the same run:

- reviews sent to the API server for N new ServiceAccount callers, each listing Pods once
  (both gateways' ``kcg_access_reviews_total`` and ``kcg_token_reviews_total``);
- a new caller's first request against a known caller's next one, p50 and p99;
- from a RoleBinding's deletion to the gateway's first refusal, and to the end of the
  caller's open watch; the same from the deletion of the Pod a caller's token is bound to
  (the gateway with both off keeps its answers for ``--authz-cache-ttl`` and
  ``--authn-cache-ttl`` by design: 300 s and 120 s by default, not waited for here);
- what RBAC's churn costs open streams (every change wakes each stream to check its caller
  again): the default gateway with S event streams (``bench.fanout``'s receiver, 10 changes a
  second), its CPU and the deliveries' latency, without RBAC changes and with a RoleBinding
  created or deleted every 0.2 s;
- the RBAC index's memory for 10,000 bindings (in-process, ``tracemalloc``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

import httpx

from bench import fanout
from bench.procs import start_gateway
from bench.scale import receiver_threads
from control_plane.cluster import LocalCluster
from control_plane.kubeapi import KubeAPI

__all__ = ["MODES", "index_memory", "run", "table"]

MODES = {"auto": (), "false": ("--authz-local-rbac", "false", "--authn-local-tokens", "false")}
NS = "bench-callers"
REVOKED = "bench-revoked"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
PODS = f"/api/v1/namespaces/{NS}/pods"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _counter(url: str, token: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"},
                     timeout=10).text
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith(name + "{") or line.startswith(name + " ")]
    if not values:  # a figure read as 0 that the gateway never served would pass unseen
        raise RuntimeError(f"the gateway's /metrics has no {name}")
    return sum(values)


def _prepare(kube: KubeAPI, callers: int, log) -> list[str]:
    """``callers`` ServiceAccounts of ``NS`` allowed to read its Pods (through their group,
    as a namespace's accounts usually are), and a token of each."""
    kube.ensure_namespace(NS)
    kube.delete(f"{RBAC}/clusterroles/bench-read-pods")
    kube.create(f"{RBAC}/clusterroles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "bench-read-pods"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]})
    _bind(kube, "bench-callers", {"kind": "Group", "name": f"system:serviceaccounts:{NS}",
                                  "apiGroup": "rbac.authorization.k8s.io"})
    log(f"making {callers} ServiceAccounts and their tokens ...")
    return [kube.service_account_token(NS, f"caller-{i}") for i in range(callers)]


def _bind(kube: KubeAPI, name: str, subject: dict) -> str:
    path = f"{RBAC}/namespaces/{NS}/rolebindings"
    kube.delete(f"{path}/{name}")
    kube.create(path, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                       "metadata": {"name": name, "namespace": NS}, "subjects": [subject],
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                   "kind": "ClusterRole", "name": "bench-read-pods"}})
    return f"{path}/{name}"


def _new_callers(url: str, admin: str, tokens: list[str]) -> dict:
    """Each token's first request and its second, timed; the reviews they caused."""
    before = {k: _counter(url, admin, f"kcg_{k}_reviews_total") for k in ("access", "token")}
    first, known = [], []
    for i, token in enumerate(tokens):
        # each caller from an address of its own, as callers come: the gateway reviews at
        # most 10 new tokens a second from one address (bursts of 20)
        address = f"127.0.{1 + i // 200}.{1 + i % 200}"
        with httpx.Client(base_url=url, timeout=30,
                          transport=httpx.HTTPTransport(local_address=address)) as client:
            client.get("/healthz")  # connected: the two requests below time the gateway
            headers = {"Authorization": f"Bearer {token}"}
            for times in (first, known):
                began = time.perf_counter()
                answer = client.get(PODS, headers=headers)
                times.append(time.perf_counter() - began)
                assert answer.status_code == 200, answer.text
    after = {k: _counter(url, admin, f"kcg_{k}_reviews_total") for k in ("access", "token")}
    return {"access_reviews": after["access"] - before["access"],
            "token_reviews": after["token"] - before["token"],
            "first_p50_ms": statistics.median(first) * 1000,
            "first_p99_ms": _percentile(first, 0.99) * 1000,
            "known_p50_ms": statistics.median(known) * 1000,
            "known_p99_ms": _percentile(known, 0.99) * 1000}


def _until_refused(url: str, headers: dict, revoke, code: int) -> tuple[float, float]:
    """Seconds from ``revoke()`` to the caller's first request answered ``code``, and to the
    end of its watch opened before (with an ``ERROR`` of that code)."""
    done = threading.Event()
    watch_ended: list[float] = []

    def watch() -> None:
        with httpx.stream("GET", f"{url}{PODS}?watch=true", headers=headers,
                          timeout=httpx.Timeout(30, read=None)) as answer:
            for line in answer.iter_lines():
                if f'"code":{code}' in line:
                    watch_ended.append(time.monotonic())
                    break
        done.set()

    threading.Thread(target=watch, daemon=True).start()
    time.sleep(0.5)  # the watch is open
    revoke()
    began = time.monotonic()
    while httpx.get(url + PODS, headers=headers, timeout=10).status_code != code:
        assert time.monotonic() - began < 30, f"not {code} after 30 s"
        time.sleep(0.005)
    refused = time.monotonic() - began
    assert done.wait(30), "the watch did not end"
    return refused, watch_ended[0] - began


def _revocation(kube: KubeAPI, url: str, rounds: int) -> dict:
    """From a RoleBinding's deletion to the first refusal, and to its caller's watch's end."""
    refused, ended = [], []
    kube.ensure_namespace(REVOKED)
    for i in range(rounds):
        account = f"revoked-{i}"
        # an account of another namespace: the group binding of NS's accounts does not hold it
        token = kube.service_account_token(REVOKED, account)
        binding = _bind(kube, account, {"kind": "ServiceAccount", "name": account,
                                        "namespace": REVOKED})
        headers = {"Authorization": f"Bearer {token}"}
        deadline = time.monotonic() + 10
        while httpx.get(url + PODS, headers=headers, timeout=10).status_code != 200:
            assert time.monotonic() < deadline, "the binding was not in effect"
            time.sleep(0.01)
        took = _until_refused(url, headers, lambda: kube.delete(binding), 403)
        refused.append(took[0])
        ended.append(took[1])
    return {"refused_ms": [round(t * 1000, 1) for t in refused],
            "watch_end_ms": [round(t * 1000, 1) for t in ended],
            "refused_p50_ms": statistics.median(refused) * 1000,
            "refused_max_ms": max(refused) * 1000,
            "watch_end_p50_ms": statistics.median(ended) * 1000,
            "watch_end_max_ms": max(ended) * 1000, "rounds": rounds}


def _pod_revocation(kube: KubeAPI, url: str, rounds: int) -> dict:
    """From the deletion of the Pod a caller's token is bound to, to the first refusal (401)
    and to the end of the caller's open watch."""
    refused, ended = [], []
    for i in range(rounds):
        name = f"bound-{i}"
        kube.delete(f"{PODS}/{name}")
        pod = kube.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                 "spec": {"serviceAccountName": "caller-0",
                                          "containers": [{"name": "c", "image": "nginx"}]}})
        token = kube.service_account_token(NS, "caller-0", bound_to=pod)
        headers = {"Authorization": f"Bearer {token}"}
        deadline = time.monotonic() + 10
        while httpx.get(url + PODS, headers=headers, timeout=10).status_code != 200:
            assert time.monotonic() < deadline, "the token was not taken"
            time.sleep(0.01)
        # not scheduled: gone at once
        took = _until_refused(url, headers, lambda: kube.delete(f"{PODS}/{name}"), 401)
        refused.append(took[0])
        ended.append(took[1])
    return {"pod_refused_p50_ms": statistics.median(refused) * 1000,
            "pod_refused_max_ms": max(refused) * 1000,
            "pod_watch_end_p50_ms": statistics.median(ended) * 1000,
            "pod_watch_end_max_ms": max(ended) * 1000}


def sweep_cost(cluster: LocalCluster, workdir: Path, streams: int, seconds: float = 30.0,
               settle: float = 10.0, churn_every: float = 0.2, log=print) -> dict:
    """The default gateway's CPU and delivery latency with ``streams`` event streams of an
    authorized caller, still and with RBAC changing every ``churn_every`` seconds."""
    kube = KubeAPI.for_cluster(cluster)
    fanout.prepare(kube, 10)
    receiver = fanout.build_receiver(workdir)
    gateway = start_gateway(cluster, workdir / "sweep", "--authz", "kubernetes", "--prewarm",
                            "configmaps", "--max-streams", "20000",
                            "--max-streams-per-client", "20000")
    rows: dict = {"streams": streams, "churn_every": churn_every}
    try:
        for churning in (False, True):
            stop = threading.Event()
            changes = [0]

            def churn() -> None:
                kube.ensure_namespace(NS)
                while not stop.is_set():
                    path = _bind(kube, "bench-churn", {"kind": "User", "name": "nobody",
                                                       "apiGroup": "rbac.authorization.k8s.io"})
                    stop.wait(churn_every / 2)
                    kube.delete(path)
                    changes[0] += 2
                    stop.wait(churn_every / 2)

            churner = threading.Thread(target=churn, daemon=True)
            if churning:
                churner.start()
            row = fanout.run_scenario(
                receiver, kube, f"{gateway.url}/core/v1/namespaces/{fanout.NS}/configmaps",
                "sse", streams, 10.0, seconds, 10, token=cluster.admin.token,
                gateway_pid=gateway.pid, settle=settle, receiver_threads=receiver_threads(streams))
            stop.set()
            if churning:
                churner.join(10)
            row["rbac_changes"] = changes[0]
            rows["churn" if churning else "still"] = row
            log(f"  {streams:,} streams, RBAC {'churning' if churning else 'still'}: {row}")
    finally:
        gateway.stop()
    return rows


def index_memory(bindings: int = 10_000, seed: int = 1) -> dict:
    """Bytes the RBAC index holds for ``bindings`` RoleBindings (three subjects each, over
    100 namespaces, 50 roles), measured with ``tracemalloc``."""
    from app.auth.rbac import RBAC

    rng = random.Random(seed)
    roles = [{"metadata": {"name": f"role-{i}"}, "rules": [
        {"apiGroups": [""], "resources": ["pods", "configmaps"], "verbs": ["get", "list"]}]}
        for i in range(50)]
    objects = [{"metadata": {"name": f"b-{i}", "namespace": f"ns-{i % 100}"},
                "roleRef": {"kind": "ClusterRole", "name": f"role-{rng.randrange(50)}"},
                "subjects": [{"kind": "User", "name": f"user-{rng.randrange(5000)}"},
                             {"kind": "Group", "name": f"group-{rng.randrange(500)}"},
                             {"kind": "ServiceAccount", "name": f"sa-{rng.randrange(5000)}"}]}
               for i in range(bindings)]
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    rbac = RBAC()
    for role in roles:
        rbac.set_cluster_role(role)
    for obj in objects:
        rbac.set_binding("RoleBinding", obj)
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert len(rbac) == bindings
    return {"bindings": bindings, "bytes": held, "per_binding": held / bindings}


def run(callers: int = 1000, revocations: int = 10, cluster: LocalCluster | None = None,
        log=print, streams: int = 10_000, sweep_seconds: float = 30.0) -> dict:
    """Measure (on a cluster of our own unless one is given); return the results."""
    if cluster is None:
        with LocalCluster() as own:
            return run(callers, revocations, own, log, streams, sweep_seconds)
    kube = KubeAPI.for_cluster(cluster)
    tokens = _prepare(kube, callers, log)
    results: dict = {"callers": callers, "modes": {}}
    with tempfile.TemporaryDirectory(prefix="kcg-local-authz-") as tmp:
        for mode, flags in MODES.items():
            work = Path(tmp) / mode
            work.mkdir()
            gateway = start_gateway(cluster, work, "--authz", "kubernetes", *flags,
                                    "--prewarm", "pods")
            try:
                admin = cluster.admin.token
                if mode == "auto":
                    deadline = time.monotonic() + 30
                    while (_counter(gateway.url, admin, "kcg_rbac_deciding") < 1
                           or _counter(gateway.url, admin, "kcg_tokens_deciding") < 1):
                        assert time.monotonic() < deadline, "RBAC or tokens never decided"
                        time.sleep(0.1)
                log(f"{callers} new callers, {' '.join(flags) or 'as by default'} ...")
                row = _new_callers(gateway.url, admin, tokens)
                if mode == "auto":
                    log("revocations ...")
                    row.update(_revocation(kube, gateway.url, revocations))
                    row.update(_pod_revocation(kube, gateway.url, revocations))
                    # reviews its RBAC allowed as the gateway's copy did not: the API server's
                    # copy a moment behind (a deletion seen here first): asked again
                    row["disagreements"] = _counter(gateway.url, admin,
                                                    "kcg_rbac_disagreements_total")
                results["modes"][mode] = row
                log(f"  {row}")
            finally:
                gateway.stop()
        if streams:
            log(f"RBAC churning under {streams:,} open streams ...")
            results["sweep"] = sweep_cost(cluster, Path(tmp), streams, sweep_seconds, log=log)
    results["index"] = index_memory()
    return results


def table(results: dict) -> str:
    """The results as Markdown."""
    auto, before = results["modes"]["auto"], results["modes"]["false"]
    n = results["callers"]
    lines = [
        f"| {n:,} new ServiceAccount callers, one list each | decided here (by default) | "
        f"reviewed (`--authz-local-rbac false --authn-local-tokens false`) |", "|---|---|---|",
        f"| SubjectAccessReviews sent | {auto['access_reviews']:,.0f} | "
        f"{before['access_reviews']:,.0f} |",
        f"| TokenReviews sent | {auto['token_reviews']:,.0f} | {before['token_reviews']:,.0f} |",
        f"| a new caller's first request, p50 / p99 | {auto['first_p50_ms']:.2f} / "
        f"{auto['first_p99_ms']:.2f} ms | {before['first_p50_ms']:.2f} / "
        f"{before['first_p99_ms']:.2f} ms |",
        f"| a known caller's request, p50 / p99 | {auto['known_p50_ms']:.2f} / "
        f"{auto['known_p99_ms']:.2f} ms | {before['known_p50_ms']:.2f} / "
        f"{before['known_p99_ms']:.2f} ms |",
        f"| first ÷ known, p50 | {auto['first_p50_ms'] / auto['known_p50_ms']:.1f}× | "
        f"{before['first_p50_ms'] / before['known_p50_ms']:.1f}× |",
        f"| a RoleBinding deleted → refused (p50 / max of {auto['rounds']}) | "
        f"{auto['refused_p50_ms']:.0f} / {auto['refused_max_ms']:.0f} ms | up to "
        f"`--authz-cache-ttl` (300 s) |",
        f"| a RoleBinding deleted → its caller's open watch ends | "
        f"{auto['watch_end_p50_ms']:.0f} / {auto['watch_end_max_ms']:.0f} ms | up to 300 s |",
        f"| reviews the API server's RBAC allowed, the gateway's copy not (a moment apart) | "
        f"{auto.get('disagreements', 0):,.0f} | — |",
        f"| a token's Pod deleted → refused (p50 / max of {auto['rounds']}) | "
        f"{auto['pod_refused_p50_ms']:.0f} / {auto['pod_refused_max_ms']:.0f} ms | up to "
        f"`--authn-cache-ttl` (120 s) |",
        f"| a token's Pod deleted → its caller's open watch ends | "
        f"{auto['pod_watch_end_p50_ms']:.0f} / {auto['pod_watch_end_max_ms']:.0f} ms | up to "
        f"300 s |",
    ]
    sweep = results.get("sweep")
    if sweep:
        still, churn = sweep["still"], sweep["churn"]
        lines += ["", f"| {sweep['streams']:,} open event streams, 10 changes/s | RBAC still | "
                      f"a RoleBinding changed every {sweep['churn_every']} s |", "|---|---|---|",
                  f"| RBAC changes in the run | 0 | {churn['rbac_changes']:,} |",
                  f"| the gateway's CPU | {still['gateway_cpu_percent']:.0f} % | "
                  f"{churn['gateway_cpu_percent']:.0f} % |",
                  f"| delivery latency p50 / p99 | {still['p50_ms']:.0f} / {still['p99_ms']:.0f} ms"
                  f" | {churn['p50_ms']:.0f} / {churn['p99_ms']:.0f} ms |",
                  f"| deliveries (lost) | {still['deliveries']:,} ({still['lost']:,})"
                  f" | {churn['deliveries']:,} ({churn['lost']:,}) |"]
    index = results["index"]
    lines.append("")
    lines.append(f"The RBAC index holds {index['bindings']:,} RoleBindings (three subjects "
                 f"each) in {index['bytes'] / 2**20:.1f} MiB, {index['per_binding']:,.0f} bytes "
                 f"a binding (`tracemalloc`).")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.local_authz",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--callers", type=int, default=1000)
    parser.add_argument("--revocations", type=int, default=10)
    parser.add_argument("--streams", type=int, default=10_000,
                        help="open streams while RBAC churns (0: not measured)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results = run(args.callers, args.revocations, streams=args.streams)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
