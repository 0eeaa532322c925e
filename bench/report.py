"""``docs/benchmarks.md`` from one run's results: tables, ratios, and the targets checked.

The prose around the tables says how each figure was measured; the verdicts
are computed from the figures of the same run, never written by hand. The
reading of the figures — why a target is missed, what the profiles show — is
``bench/notes.md``, written by hand and included as it is.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

from bench import (authz, clients, dashboard, fanout, local_authz, merged, past, queries, scale,
                   send_cost, sync_pods, workers)

__all__ = ["render", "targets"]

MiB = 1024 * 1024
_NOTES = Path(__file__).with_name("notes.md")


def _machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs ({model or platform.machine()}), Python {platform.python_version()}"


# how many times the API server's figures Q1–Q3's rows ask for (lower p50, more req/s)
TIMES_THE_API_SERVER = 20


def query_ratios(q: dict, name: str, conns: int, side: str) -> tuple[float, float]:
    """(apiserver p50 ÷ side p50, side req/s ÷ apiserver req/s), each the median of the
    run's rounds; ``bench.history`` reads committed runs with it."""
    base = q["runs"][f"{name}|{conns}|apiserver"]
    rows = q["runs"][f"{name}|{conns}|{side}"]
    return (queries.median_of(base, "p50_ms") / queries.median_of(rows, "p50_ms"),
            queries.median_of(rows, "requests_per_second") / queries.median_of(base, "requests_per_second"))


def _floor_beside(q: dict, name: str, conns: int, side: str) -> str:
    """The floor's own ratios to the API server, for a gateway side's row, where the run
    measured that floor: a server doing no work on the same stack, so a ratio it does not
    reach was out of any gateway's reach at that hour."""
    floor = side.replace("gateway", "floor", 1)
    if f"{name}|{conns}|{floor}" not in q["runs"]:
        return ""
    lower, faster = query_ratios(q, name, conns, floor)
    return f" (the floor: {lower:.1f}× lower, {faster:.1f}× req/s)"


# the share of the floor's requests a second each query must reach with one worker at eight
# connections: label and namespace lists do the most work per byte, single objects the
# least bytes per request, a whole list is nearly all bytes
_FLOOR_SHARE = {("Q1", "HTTP"): 0.60, ("Q2", "HTTP"): 0.60, ("Q3", "HTTP"): 0.60,
                ("Q4", "HTTP"): 0.75, ("Q5", "HTTP"): 0.90,
                **{(f"Q{n}", "HTTPS"): 0.75 for n in range(1, 6)}}
_OWN_CPU_US = 2.0  # the gateway's CPU per delivery above the floor's
_KIB_PER_SUBSCRIBER = 8
_RSS_PER_OBJECT = 1.7  # RSS per cached object against its stripped JSON, at 150,000 Pods
_Q1_FLAT = 1.5  # Q1 p50 at the largest size against the smallest: "flat"
_MERGED_TIME, _MERGED_ALLOCATED = 1.3, 2.0  # a merged list against one cluster's of its size


def targets(results: dict) -> list[tuple[str, str, bool]]:
    """Each target of the performance design: (target, what was measured, met)."""
    rows: list[tuple[str, str, bool]] = []
    q = results["queries"]
    for side in ("gateway HTTPS", "gateway HTTP"):
        for name in ("Q1", "Q2", "Q3"):
            for conns in q["connections"]:
                lower, faster = query_ratios(q, name, conns, side)
                times = TIMES_THE_API_SERVER
                rows.append((f"{name} p50 ≥ {times}× lower, req/s ≥ {times}× higher ({side}, "
                             f"{conns} conn)", f"{lower:.1f}× lower, {faster:.1f}× req/s"
                             + _floor_beside(q, name, conns, side),
                             lower >= times and faster >= times))
        for conns in q["connections"]:
            _, faster = query_ratios(q, "Q4", conns, side)
            rows.append((f"Q4 req/s ≥ the apiserver's ({side}, {conns} conn)", f"{faster:.2f}×",
                         faster >= 1))
        for conns in q["connections"]:
            _, faster = query_ratios(q, "Q5", conns, side)  # same objects each: req/s ratio
            rows.append((f"Q5 objects/s ≥ 10× ({side}, {conns} conn)", f"{faster:.1f}×", faster >= 10))
    if "gateway HTTP ×2" in q["answers"].get("Q1", {}):
        for name in ("Q1", "Q2", "Q3"):
            _, faster = query_ratios(q, name, 8, "gateway HTTP ×2")
            rows.append((f"{name} req/s ≥ {TIMES_THE_API_SERVER}× the apiserver's with --workers 2 "
                         "(HTTP, 8 conn)", f"{faster:.1f}×", faster >= TIMES_THE_API_SERVER))
        for name in ("Q1", "Q2", "Q3"):
            _, faster = query_ratios(q, name, 8, "gateway HTTPS ×2")
            _, single = query_ratios(q, name, 8, "gateway HTTPS")
            rows.append((f"{name} over HTTPS with --workers 2: the gain (8 conn; reported)",
                         f"{faster:.1f}× the apiserver's (1 worker: {single:.1f}×)", True))
        for workers_ in (1, 2):
            for scheme in ("HTTP", "HTTPS"):
                for query in queries.QUERIES:
                    suffix = "" if workers_ == 1 else f" ×{workers_}"
                    floor = q["runs"].get(f"{query.name}|8|floor {scheme}{suffix}")
                    gw = q["runs"].get(f"{query.name}|8|gateway {scheme}{suffix}")
                    if not floor or not gw:
                        continue
                    share = queries.median_of(gw, "requests_per_second") / queries.median_of(floor, "requests_per_second")
                    least = _FLOOR_SHARE.get((query.name, scheme)) if workers_ == 1 else None
                    where = (f"{scheme}, {workers_} worker{'s' if workers_ > 1 else ''}, 8 conn")
                    if least is None:  # two workers: reported beside the targets of one
                        rows.append((f"{query.name}: the floor's req/s reached ({where}; reported)",
                                     f"{share:.0%}", True))
                    else:
                        rows.append((f"{query.name} ≥ {least:.0%} of the floor's req/s ({where})",
                                     f"{share:.0%}", share >= least))
    if "authz" in results:
        for (name, conns), ratio in authz.ratios(results["authz"]).items():
            rows.append((f"{name} with --authz kubernetes ≥ 0.9× the req/s of none ({conns} conn)",
                         f"{ratio:.2f}×", ratio >= 0.9))
    if "past" in results:
        rows += past.targets(results["past"])
    if "past_restart" in results:
        rows += past.restart_targets(results["past_restart"])
    if "local_authz" in results:
        auto = results["local_authz"]["modes"]["auto"]
        rows.append((f"access reviews for {results['local_authz']['callers']:,} new callers an "
                     f"RBAC-only cluster allows: 0", f"{auto['access_reviews']:,.0f}",
                     auto["access_reviews"] == 0))
        if "pod_refused_max_ms" in auto:
            rows.append((f"token reviews for {results['local_authz']['callers']:,} new "
                         f"ServiceAccount callers: 0", f"{auto['token_reviews']:,.0f}",
                         auto["token_reviews"] == 0))
            rows.append(("a token's deleted Pod refused, and an open stream ended, within 1 s",
                         f"{auto['pod_refused_max_ms']:.0f} / "
                         f"{auto['pod_watch_end_max_ms']:.0f} ms",
                         max(auto["pod_refused_max_ms"], auto["pod_watch_end_max_ms"]) <= 1000))
        first = auto["first_p50_ms"] / auto["known_p50_ms"]
        rows.append(("a new caller's first request ≤ 1.5× a known caller's (p50)",
                     f"{first:.1f}×", first <= 1.5))
        rows.append(("a removed binding refused, and an open stream ended, within 1 s",
                     f"{auto['refused_max_ms']:.0f} / {auto['watch_end_max_ms']:.0f} ms",
                     max(auto["refused_max_ms"], auto["watch_end_max_ms"]) <= 1000))
    s = results["sync"]
    stripped = s["raw"][0]["stripped_bytes"]
    heap = s["ours-heap"][0]["traced_bytes"] / stripped
    rss = queries.median_of(s["ours"], "rss_growth")
    rows.append(("retained heap ≤ 1.5× the stripped JSON held", f"{heap:.2f}×", heap <= 1.5))
    rows.append(("RSS growth ≤ 2.5× the stripped JSON held", f"{rss / stripped:.2f}×", rss / stripped <= 2.5))
    official_rss = queries.median_of(s["official"], "rss_growth")
    rows.append(("RSS growth ≤ 1/10 of the official informer's", f"{rss / official_rss:.3f}",
                 rss / official_rss <= 0.1))
    ours, raw, off = (queries.median_of(s[k], "seconds") for k in ("ours", "raw", "official"))
    rows.append(("initial sync ≤ 2× the raw transfer", f"{ours / raw:.2f}×", ours / raw <= 2))
    rows.append(("initial sync ≤ 1/5 of the official informer's", f"{ours / off:.3f}", ours / off <= 0.2))
    for scenario, sides in results["fanout"].items():
        watch = sides["apiserver watch"]
        for side, sse in sides.items():
            if not side.startswith("gateway"):
                continue
            rows.append((f"fan-out {scenario} ({side}): p99 no worse than the apiserver's, 0 lost",
                         f"{sse['p99_ms']:.1f} vs {watch['p99_ms']:.1f} ms, {sse['lost']} lost",
                         sse["p99_ms"] <= watch["p99_ms"] and sse["lost"] == 0))
            floor = sides.get(fanout.FLOOR_SIDE)
            own = fanout.own_cpu(sse, floor) if "×" not in side and floor else None
            if own is not None:
                rows.append((f"fan-out {scenario} ({side}): the gateway's own CPU ≤ "
                             f"{_OWN_CPU_US:g} µs per delivery above the floor's",
                             _above_floor(sse, floor, results.get("send_cost", {}).get(scenario)),
                             own[0] <= _OWN_CPU_US))
    for count, row in results.get("scale", {}).get("subscribers", {}).items():
        sse, watch = row["gateway"], row["apiserver"]
        measured = (f"p99 {sse['p99_ms']:.1f} ms (the apiserver's {watch['p99_ms']:.1f}), "
                    f"{sse['lost']} lost, {sse['rss_per_subscriber_kib']:.1f} KiB each")
        if int(count) == 5000:
            rows.append((f"5,000 subscribers × {results['scale']['rate']:g}/s on one worker: p99 ≤ "
                         f"the apiserver's, 0 lost, ≤ {_KIB_PER_SUBSCRIBER} KiB each", measured,
                         sse["p99_ms"] <= watch["p99_ms"] and sse["lost"] == 0
                         and sse["rss_per_subscriber_kib"] <= _KIB_PER_SUBSCRIBER))
        else:
            rows.append((f"{int(count):,} subscribers × {results['scale']['rate']:g}/s on one worker: "
                         "0 lost (p99, memory reported)", measured, sse["lost"] == 0))
        if "gateway_cpu_us_per_delivery" in sse:
            rows.append((f"{int(count):,} subscribers: gateway CPU per delivery (reported)",
                         f"{sse['gateway_cpu_us_per_delivery']} µs (user "
                         f"{sse.get('gateway_user_us_per_delivery', '—')}; the apiserver's "
                         f"watchers {watch.get('apiserver_cpu_us_per_delivery', '—')})", True))
    large = results.get("scale_large", {}).get("objects", {})
    if large:
        sizes = sorted(large.values(), key=lambda row: row["pods"])
        top, least = sizes[-1], sizes[0]
        growth = top["rss_per_object"] / top["stripped_per_object"]
        rows.append((f"{top['pods']:,} Pods: RSS per object ≤ {_RSS_PER_OBJECT:g}× the stripped "
                     "JSON (make bench-scale)", f"{growth:.2f}× ({top['rss_per_object'] / 1024:.1f} "
                     f"against {top['stripped_per_object'] / 1024:.1f} KiB)",
                     growth <= _RSS_PER_OBJECT))
        flat = top["q1_gateway"]["p50_ms"] / least["q1_gateway"]["p50_ms"]
        rows.append((f"{top['pods']:,} Pods: Q1 p50 flat (≤ {_Q1_FLAT:g}× the {least['pods']:,} "
                     "Pods' figure)", f"{flat:.2f}× ({top['q1_gateway']['p50_ms']:.2f} against "
                     f"{least['q1_gateway']['p50_ms']:.2f} ms; the API server's "
                     f"{top['q1_apiserver']['p50_ms']:.2f} ms)", flat <= _Q1_FLAT))
        rows.append((f"{top['pods']:,} Pods: initial sync, Q5, a dashboard's refresh (reported)",
                     f"sync {top['sync_seconds']:.1f} s (raw transfer {top['raw_seconds']:.1f} s); "
                     f"Q5 {top['q5_gateway']['requests_per_second'] * top['pods']:,.0f} against "
                     f"{top['q5_apiserver']['requests_per_second'] * top['pods']:,.0f} objects/s; "
                     f"refresh {top['refresh_ms']:.0f} against {top['q5_apiserver']['p50_ms']:.0f} "
                     "ms", True))
    rows += merged_targets(results.get("merged", {}))
    for name, row in results.get("dashboard", {}).get("queries", {}).items():
        rows.append((f"dashboard {name}: ≤ 5 ms p50 once warm", f"{row['p50_ms']:.2f} ms",
                     row["p50_ms"] <= 5))
    return rows



def merged_targets(merged: dict) -> list[tuple[str, str, bool]]:
    """The merged list's targets (``bench.merged``'s results): time and allocation, each
    encoding against one cluster's."""
    rows: list[tuple[str, str, bool]] = []
    answers = merged.get("answers", {})
    for encoding in ("identity", "gzip"):
        mixed, one = answers.get(f"merged {encoding}"), answers.get(f"one {encoding}")
        if not mixed or not one:
            continue
        slower = mixed["p50_ms"] / one["p50_ms"]
        rows.append((f"merged list 3 × {merged['pods']:,} within {_MERGED_TIME:g}× "
                     f"one cluster's {3 * merged['pods']:,} ({encoding}, p50)",
                     f"{slower:.2f}× ({mixed['p50_ms']:.0f} against {one['p50_ms']:.0f} ms)",
                     slower <= _MERGED_TIME))
        # made against made: as served, one cluster's repeated list is kept and sent as it
        # is (nothing made), which no merged answer's making can be within 2x of
        field = "allocated_made_mib" if "allocated_made_mib" in mixed else "allocated_mib"
        if field in mixed and field in one:
            more = mixed[field] / max(one[field], 0.01)
            made = ", each answer made" if field == "allocated_made_mib" else ""
            rows.append((f"merged list: allocated per answer within {_MERGED_ALLOCATED:g}× one "
                         f"cluster's ({encoding}{made})",
                         f"{more:.2f}× ({mixed[field]:.2f} against {one[field]:.2f} MiB)",
                         more <= _MERGED_ALLOCATED))
    return rows


def _above_floor(sse: dict, floor: dict | None, send: dict | None = None) -> str:
    """The gateway's CPU per delivery; beside it, where the run had them, the floor's (the
    least a Python server of the same streams takes here), what the gateway adds to it, and
    what one ``send`` per delivery costs the kernel alone at that fan-out."""
    cpu = sse["gateway_cpu_us_per_delivery"]
    alone = f"one send() alone {send['cpu_us_per_write']} µs" if send else ""
    if not floor or "gateway_cpu_us_per_delivery" not in floor:
        return f"{cpu} µs ({alone})" if alone else f"{cpu} µs"
    least = floor["gateway_cpu_us_per_delivery"]
    own, differences = fanout.own_cpu(sse, floor)  # both sides measured: never None here
    rounds = (f", the median of {len(differences)} rounds' "
              + ", ".join(f"{d:.1f}" for d in differences)) if len(differences) > 1 else ""
    return (f"{cpu} µs (the floor {least} µs; the gateway's own {own:.1f} µs{rounds}"
            + (f"; {alone})" if alone else ")"))


_INTRO = """\
# Benchmarks

All figures below come from one run of

```sh
make bench        # = setup, then: {command}
```

on {machine}, {date}, against the project's own kube-apiserver 1.20.2 + etcd 3.4
on loopback (`control_plane.LocalCluster`), seeded once with {pods:,}
realistic Pods (two containers, env, resources; labels `app` (100 values),
`tier` (3), `track`; 100 namespaces) and {configmaps:,} ConfigMaps. Every
comparison is measured in the same run, interleaved. Results vary by up to 2×
between runs on this machine: compare ratios within a table, not across runs.
The whole run took {minutes:.0f} minutes.
"""

_TARGETS = """\
## Targets

Computed from the figures below: "gateway HTTPS" is the like-for-like
comparison (the API server speaks only TLS); "gateway HTTP" is how the gateway
is usually reached inside a cluster or behind a TLS-terminating proxy.
"""

_QUERIES = """\
## Queries: the API server's watch cache vs the gateway

`bench/queries.py`. Each query goes to the API server with
`resourceVersion=0` (answered from its watch cache, the fastest it can be) and
to two gateways, each its own `kube-cache-gateway serve` process with Pods
pre-warmed: one serving HTTPS with a self-signed certificate, one plain HTTP.
Load: `wrk` with one thread, {seconds:g} s per measurement (Q5: twice that),
{rounds} rounds interleaved, medians; Q1 `labelSelector=app=app-7` (1%), Q2
`app in (app-7,app-8),tier!=db`, Q3 one namespace, Q4 one Pod by name, Q5 every
Pod. Before measuring, every side's answer is checked to hold the same
objects. *Bytes* is one answer's size: the API server's objects carry
`managedFields`, the gateway's do not (stripped by default), so compare
objects/s, not MB/s. *Server CPU* is the server process's CPU over the
measurement (200 % = both cores); *wrk CPU* is the load generator's own share.
"""

_FLOOR = """\
### The floor: the same bytes from a bare ASGI app

`bench/floor.py` answers each query with the gateway's own answer bytes, fixed
in memory, on the same uvicorn (same event loop, HTTP parser and TLS), measured
in every round right beside the gateway side it is compared with (which of the two
goes first alternates by round). It does no work at all, so its figures are the most
any server on this stack could do; the share column is how much of that the
gateway reaches with selection, authorization, metrics and encoding included. With
two workers, the last column is how evenly the connections were spread: the busiest
worker's share of the workers' CPU (50 % is even). The gateway's workers accept each
from a socket of its own (`SO_REUSEPORT`); uvicorn's, the floor's, share one.
"""

_PROFILE = """\
### Where the gateway's time goes

py-spy sampled the plain-HTTP gateway (250 Hz, `--gil`: only the thread
holding the interpreter, i.e. where the CPU goes) while wrk loaded Q1 and Q5 at
8 connections. Own time is the function itself, including any C it calls
(`RequestResponseCycle.send` is uvicorn writing to the socket); "including
callees" is everything under it. The event loop and CLI frames every sample
passes through are left out.
"""

_AUTHZ = """\
## Authorization's cost: `--authz kubernetes` vs `none`

`bench/authz.py`. Two gateways over the same API server, plain HTTP, Pods
pre-warmed, one authorizing each caller (TokenReview + SubjectAccessReview,
kept in its caches), one not; wrk sends the same bearer token to both, so the
figure is the cached path's cost, what a busy gateway pays per request. Q1 (a
label query over all namespaces) and Q4 (one Pod by name, the cheapest
answer), {seconds:g} s per measurement, {rounds} rounds with the two gateways'
order alternating, medians. Load figures on this machine wander by about ±15 %
between runs, more than what is measured here; so the second table measures
the application alone, in-process: the same request handed straight to the
ASGI app thousands of times in each mode, medians of alternating rounds.
"""

_LOCAL_AUTHZ = """\
## Authorization from the gateway's own caches

`bench/local_authz.py` (alone: `python -m bench.local_authz`). Two gateways over the same
API server, plain HTTP, `--authz kubernetes`: one as by default, deciding from the cluster's
RBAC it follows (`--authz-local-rbac auto`) and verifying ServiceAccount tokens itself
(`--authn-local-tokens`), one reviewing every new token and access (`--authz-local-rbac
false --authn-local-tokens false`, what every gateway did before). {callers:,}
ServiceAccounts, allowed through their namespace's group, each list the namespace's Pods
twice: the first request of a new caller, then a known one's. The revocations: a
RoleBinding of a caller with an open watch deleted, or the Pod its token is bound to, then
the caller's requests every 5 ms until one is refused.
"""

_PAST = """\
## History: what keeping it costs, and what it gives

`bench/past.py` (alone: `python -m bench.past`), on an API server and a PostgreSQL of its
own, seeded with {pods:,} Pods. Three gateways side by side, Pods pre-warmed: without
history, with `--history sqlite:///…` and with `--history postgresql://…`. The queries run
while the API server takes 50 changes a second (the history written meanwhile), {seconds:g} s
per measurement, {rounds} rounds with the order alternating, medians. Then {changes:,}
patches through the API server as fast as it takes them; an Exact list of every Pod at the
version from before them (p50 of 20, beside a current list's on the same gateway); a watch
from that version, every change since; and the restarts: the SQLite gateway stopped and
started on its file, a new gateway started on the PostgreSQL store while the first runs —
the LISTs are the API server's own count (`apiserver_request_total`). The write rate is the
store's own: 50,000 changes of the seed's Pods written in the writer's batches.
"""

_SYNC = """\
## Initial sync of {pods:,} Pods

`bench/sync_pods.py`. Each measurement runs in a fresh process, {rounds} rounds
interleaved; medians. *Sync time* is from the first request to `has_synced`
(ours) or to the last ADDED event (official `kubernetes.informer`). *RSS growth*
is the process's resident memory after sync and a `gc.collect()`, minus before
the first request; *retained heap* is what `tracemalloc` counts as live after
sync (a separate run, since tracing slows everything). The raw transfer is the
informer's own first request (`resourceVersion=0`, answered in one piece), body
read and nothing else.
"""

_FANOUT = """\
## Change fan-out: Server-Sent Events vs watches on the API server

`bench/fanout.py`. The gateway runs as its own process (its CPU and memory are
read from `/proc`); a compiled receiver (`bench/fanout/receiver.go`) holds every
stream, so that receiving does not eat the machine. The driver patches 10
ConfigMaps round-robin at a fixed rate through the API server; each patch
carries its send time, and latency is from that send to the receiver reading
the change. `lost` counts expected deliveries that had not arrived by the receiver's deadline:
the changes' {seconds:g} s plus {settle:g} s from the receiver's start, connecting included, so late
ones count too. The same load
then goes to direct watches on the API server. The gateway is itself a watcher
of the API server, so its latency is the API server's delivery to one watcher
plus the fan-out. Its CPU per delivery is the whole process's CPU over the run
(its own watch of the API server and idle timers included) divided by the
deliveries; the receiver's CPU is the load generator's share of the two cores.
The floor (`bench/fanout_floor.py`) serves the same streams with nothing but a
watch of its own and one loop writing each change's frame to every connection:
on loopback the kernel charges the writer for the whole delivery, the reading
side's included, so its CPU per delivery is the least any Python server takes
here, and the gateway's less the floor's is the gateway's own. Below both,
`bench/send_cost.py` writes a frame of 600 bytes to as many loopback connections
at the same rate from a bare loop of `socket.sendall`: what one write per delivery
costs the kernel alone, whatever the server (the "one send() alone" of the targets).
"""

_CPU_ROUNDS = """\
The gateway's own CPU is measured in {rounds} rounds: the first run of each scenario, then the
gateway with one worker and the floor alone, taking turns, first one then the other. Its
figure is the median of the rounds' differences: the same code measured twice in a row moves
by more than the 2 µs a delivery it is held to (`python -m bench.threads`, the same tree
twice). The table's rows are the first round's; each round's CPU per delivery follows it.
"""


_SCALE = """\
## How cost grows: objects and subscribers

`bench/scale.py`, on an API server of its own filled in steps ({sizes}), the
Pods of the workload above, each also labelled `group=g-<i/100>` so that Q1 here
(`group=g-7`) selects the same 100 Pods at every size. At each size: the initial
sync of a fresh informer process beside the raw transfer of the same list, its
RSS growth per object beside the stripped JSON it holds, Q1 and Q5 with wrk at one
connection ({seconds:g} s; Q5 twice that) against the API server's watch cache, and
a dashboard's refresh — the first `summary=status.phase,metadata.namespace`
answer after one Pod changed (median of 10) — beside what the same counts cost a
dashboard on the API server (its full list, p50). Then subscribers at
{rate:g} changes a second for {fan_seconds:g} s, a fresh one-worker gateway for each
count, against as many watches on the API server; the gateway's RSS before and
with its subscribers gives memory per subscriber.
"""


_SCALE_LARGE = """\
### To 150,000 Pods (`make bench-scale`)

The Kubernetes scalability limit is 150,000 Pods per cluster. The same table, the same
way, to that size: seeding 150,000 Pods takes minutes, so it is a run of its own
(`make bench-scale`: `{command}`, {date}), not part of every `make bench`.
"""


_WORKERS = """\
## What `--workers N` costs the pod and the API server

`bench/workers.py`. For each N, a gateway with N worker processes and Pods
pre-warmed ({pods:,} of them), until every worker has synced; then the pod's
memory (the supervisor and every worker, `/proc`), the Pod watches the API
server holds for it (its own `apiserver_registered_watchers` gauge), and the
API server's CPU while {rate:g} Pod changes a second pass for {seconds:g} s —
beside the same churn with no gateway at all. Each worker keeps its own cache
and watch: the design's price (`docs/workers.md`).
"""


_DASHBOARD = """\
## Queries for dashboards

`bench/dashboard.py`, on the same {pods:,} Pods: each query for dashboards (`docs/queries.md`)
against what a dashboard does without them — list every Pod from the API server's
watch cache and sort, search, project or count itself. Warm: wrk, 1 connection,
{seconds:g} s × {rounds} rounds, medians, nothing changing (the answer is kept per
version). First answer: a fresh gateway process per query, its columns empty
(every Pod read once). After one change: a warm gateway's first answer after one
Pod changed, median of 10 (what a refresh under churn costs).
"""

_MERGED = """\
## Several clusters: one merged list

`bench/merged.py`: the {pods:,} Pods' API server named three times in one gateway's
clusters file (three informers and caches, as three clusters would have), beside a second
API server holding {triple:,} Pods of the same shape, served by the same gateway process.
Each answer read to its last byte, {rounds} rounds, interleaved. Memory two ways: what one
answer allocated at most (`tracemalloc`, the same gateway in the benchmark's process,
`curl` asking from another; as served, where a repeated list is kept and sent as it is, and
with nothing kept, each answer made: the target compares those), and the gateway process's resident peak over its resting
{resting:.0f} MiB (the peak reset before each request; memory freed earlier and still
resident serves an answer without raising it). A merged item is a copy with the cluster
annotation (only its metadata decoded and encoded again), made a slice at a time as the
client reads: what a merged answer holds is its order (a reference and a place per item),
never its items joined.
"""


_CLIENTS = """\
## Today's clients: watch-list's first state, and `--metadata-only`

`bench/clients.py`, on the benchmark's API server. Watch-list, as every client-go 1.35
reflector asks it first: the time to the `BOOKMARK` annotated `k8s.io/initial-events-end`
(the whole state received as `ADDED` events), beside a LIST of the same Pods from the
gateway and from the API server's watch cache; each read to its last byte over a kept
connection, uncompressed (a watch never is), not decoded; the median of {rounds} rounds
after one to warm. The 1.20 API server refuses watch-list (it came in 1.27): its client falls
back to that LIST and a watch. Then memory: a gateway with `--prewarm pods`, with and
without `--metadata-only pods`, each once synced (its resident memory less an idle
gateway's, per Pod).
"""


def render(results: dict) -> str:
    """The whole ``docs/benchmarks.md``."""
    size = results["size"]
    parts = [_INTRO.format(command=results["command"], machine=_machine(),
                           date=results.get("date") or time.strftime("%Y-%m-%d"), pods=size["pods"],
                           configmaps=size["configmaps"], minutes=results["seconds"] / 60)]
    parts.append(_TARGETS)
    lines = ["| target | measured | met |", "|---|---|:---:|"]
    lines += [f"| {t} | {m} | {'yes' if ok else '**no**'} |" for t, m, ok in targets(results)]
    parts.append("\n".join(lines) + "\n")
    if _NOTES.exists():  # the hand-written reading of the figures
        parts.append(_NOTES.read_text())
    q = results["queries"]
    parts.append(_QUERIES.format(seconds=q["seconds"], rounds=q["rounds"]))
    parts.append(queries.table(q) + "\n")
    if any("floor" in key for key in q["runs"]):
        parts.append(_FLOOR)
        parts.append(queries.floor_table(q) + "\n")
    if q.get("profiles"):
        parts.append(_PROFILE)
        parts.append(queries.profile_table(q) + "\n")
    if "authz" in results:
        a = results["authz"]
        parts.append(_AUTHZ.format(seconds=a["seconds"], rounds=a["rounds"]))
        parts.append(authz.table(a) + "\n")
        parts.append(authz.app_cost_table(a) + "\n")
    if "local_authz" in results:
        parts.append(_LOCAL_AUTHZ.format(callers=results["local_authz"]["callers"]))
        parts.append(local_authz.table(results["local_authz"]) + "\n")
    if "past" in results:
        p = results["past"]
        parts.append(_PAST.format(pods=p["pods"], changes=p["changes"], seconds=p["seconds"],
                                  rounds=p["rounds"]))
        parts.extend(_apart(p))
        parts.append(past.table(p) + "\n")
        parts.append(past.figures_table(p) + "\n")
    if "past_restart" in results:  # make bench-history: a run of its own
        r = results["past_restart"]
        parts.append(past.restart_text(r) + "\n")
    parts.append(_SYNC.format(pods=size["pods"], rounds=len(results["sync"]["ours"])))
    parts.append(sync_pods.table(results["sync"]) + "\n")
    parts.append(_FANOUT.format(seconds=size["fan_seconds"], settle=size["settle"]))
    if size.get("cpu_rounds", 1) > 1:  # results from before rounds say nothing of them
        parts.append(_CPU_ROUNDS.format(rounds=size["cpu_rounds"]))
    parts.append(fanout.table(results["fanout"]) + "\n")
    if "send_cost" in results:
        parts.append(send_cost.table(results["send_cost"]) + "\n")
    if "scale" in results:
        s = results["scale"]
        parts.append(_SCALE.format(sizes=" / ".join(f"{int(n):,}" for n in s["objects"]),
                                   seconds=s["query_seconds"], rate=s["rate"],
                                   fan_seconds=s["fan_seconds"]))
        if "settle" in s:  # results from before it was recorded say nothing of it
            parts.append(f"A subscriber count's `lost` is counted as above, its receiver's deadline "
                         f"the changes' {s['fan_seconds']:g} s plus {s['settle']:g} s.\n")
        parts.extend(_apart(s))
        parts.append(scale.objects_table(s) + "\n")
        parts.append(scale.subscribers_table(s) + "\n")
    if "scale_large" in results:  # make bench-scale: a run of its own
        s = results["scale_large"]
        parts.append(_SCALE_LARGE.format(command=s.get("command", "python -m bench.scale"),
                                         date=s.get("date", "")))
        parts.append(scale.objects_table(s) + "\n")
    if "workers" in results:
        w = results["workers"]
        parts.append(_WORKERS.format(pods=w["pods"], seconds=w["seconds"], rate=w["rate"]))
        parts.append(workers.table(w) + "\n")
    if "dashboard" in results:
        d = results["dashboard"]
        parts.append(_DASHBOARD.format(pods=size["pods"], seconds=d["seconds"], rounds=d["rounds"]))
        if d.get("command"):  # measured apart from the rest, and said so
            parts.append(f"These rows come from a run of their own, on the same machine and day: "
                         f"`{d['command']}` (its own API server, seeded the same way).\n")
        parts.append(dashboard.table(d) + "\n")
    if "merged" in results:
        m = results["merged"]
        parts.append(_MERGED.format(pods=m["pods"], triple=3 * m["pods"], rounds=m["rounds"],
                                    resting=m["resting_rss_mib"]))
        if m.get("command"):  # measured apart from the rest, and said so
            parts.append(f"These rows come from a run of their own, on the same machine and day: "
                         f"`{m['command']}`.\n")
        parts.append(merged.table(m) + "\n")
    if "clients" in results:
        c = results["clients"]
        parts.append(_CLIENTS.format(rounds=c["watch_list"]["rounds"]))
        if c.get("command"):  # measured apart from the rest, and said so
            parts.append(f"These rows come from a run of their own, on the same machine and day: "
                         f"`{c['command']}` (its own API server, seeded the same way).\n")
        parts.append(clients.table(c) + "\n")
    return "\n".join(parts)


def _apart(section: dict) -> list[str]:
    """The line saying a section's rows were measured apart from the rest (by its command)."""
    if not section.get("command"):
        return []
    return [f"These rows come from a run of their own, on the same machine and day: "
            f"`{section['command']}`.\n"]
