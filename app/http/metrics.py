"""Prometheus metrics: request latencies, open streams, and per-resource cache figures.

Per-resource figures carry the ``cluster`` (``default`` for a gateway of one
cluster) and the ``resource``.

Cache figures (objects, sync state, relists, watch restarts, last event age)
are read from the informers when scraped, so the hot path pays only for one
histogram observation per request; so are the reviews that failed (the API server did not
answer a ``TokenReview`` or ``SubjectAccessReview``: callers got 503).

The chart's ``PrometheusRule`` alerts on these names, and its dashboard plots them: a test
evaluates every alert against what ``/metrics`` exposes, so renaming one fails there.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Info,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from app.version import PYTHON, VERSION

__all__ = ["Latencies", "Metrics"]

_LABELS = ["cluster", "resource"]  # per-resource figures: which cluster's, which resource
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class Latencies(Collector):
    """``kcg_http_request_duration_seconds``: every request's time to its first byte, by
    route and code, counted with two list operations.

    prometheus_client's ``Histogram`` takes a lock for the sum and another for the bucket,
    and finds the bucket by a loop in Python: about 1 µs a request in process, a tenth of
    the application's whole time for one object by name. Every request is timed on the
    event loop, one thread (each worker process has its own), so the counts need no lock:
    one list per route and code (each bucket's own count, then the sum), the bucket found
    by ``bisect``; when scraped, exposed as the same histogram, cumulative as Prometheus
    reads it.
    """

    NAME = "kcg_http_request_duration_seconds"

    def __init__(self, buckets: tuple[float, ...] = _BUCKETS) -> None:
        self._bounds = buckets
        self._series: dict[tuple[str, int], list[float]] = {}

    def observe(self, route: str, status: int, seconds: float) -> None:
        series = self._series.get((route, status))
        if series is None:
            series = self._series[(route, status)] = [0] * (len(self._bounds) + 1) + [0.0]
        series[bisect_left(self._bounds, seconds)] += 1  # le: the first bound not below it
        series[-1] += seconds

    def observed(self, route: str, status: int) -> tuple[int, float]:
        """(how many, their sum in seconds) observed for ``route`` and ``status``."""
        series = self._series.get((route, status))
        return (0, 0.0) if series is None else (int(sum(series[:-1])), series[-1])

    def collect(self) -> Iterable[Any]:
        family = HistogramMetricFamily(self.NAME, "Time to the first byte of the answer, by "
                                       "route and code", labels=["route", "code"])
        for (route, status), series in list(self._series.items()):
            counts, total = series[:-1], 0
            buckets = []
            for bound, count in zip((*map(floatToGoString, self._bounds), "+Inf"), counts):
                total += count
                buckets.append((bound, total))
            family.add_metric([route, str(status)], buckets, series[-1])
        yield family


class _CacheCollector(Collector):
    def __init__(self, clusters: Callable[[], Mapping[str, Any]],
                 identity: Callable[[], tuple[str, Any]]) -> None:
        self._clusters = clusters
        self._identity = identity  # (the identity cluster's name, the authenticator or None)

    def collect(self) -> Iterable[Any]:
        objects = GaugeMetricFamily("kcg_cache_objects", "Objects cached per resource", labels=_LABELS)
        synced = GaugeMetricFamily("kcg_informer_synced", "1 when the resource's informer has synced",
                                   labels=_LABELS)
        lists = CounterMetricFamily("kcg_informer_lists", "LISTs the informer sent its API "
                                    "server (its first included; none when it began from the "
                                    "history store)", labels=_LABELS)
        seeded = GaugeMetricFamily("kcg_informer_seeded", "1 when the informer began from the "
                                   "history store instead of a list", labels=_LABELS)
        relists = CounterMetricFamily("kcg_informer_relists", "Relists after the initial list",
                                      labels=_LABELS)
        restarts = CounterMetricFamily("kcg_informer_watch_errors",
                                       "Failed lists and failed or broken watches", labels=_LABELS)
        events = CounterMetricFamily("kcg_informer_events", "Watch events received", labels=_LABELS)
        age = GaugeMetricFamily("kcg_informer_last_event_age_seconds",
                                "Seconds since the last watch event or list", labels=_LABELS)
        subscribers = GaugeMetricFamily("kcg_stream_subscribers", "Open streams per resource",
                                        labels=_LABELS)
        now = time.time()
        for cluster, gvr, entry in self._entries():
            name = (cluster, str(gvr))
            informer = entry.informer
            objects.add_metric(name, len(entry.hub.view))
            synced.add_metric(name, 1.0 if informer.has_synced() else 0.0)
            stats = informer.reflector_stats()
            subscribers.add_metric(name, len(entry.hub.subscribers))
            if stats is not None:
                lists.add_metric(name, stats.lists)
                seeded.add_metric(name, 1.0 if stats.seeded else 0.0)
                relists.add_metric(name, stats.relists)
                restarts.add_metric(name, stats.watch_errors)
                events.add_metric(name, stats.events)
                if stats.last_event_time:
                    age.add_metric(name, max(0.0, now - stats.last_event_time))
        up = GaugeMetricFamily("kcg_cluster_up", "1 when the cluster's API server answered "
                               "the last heartbeat", labels=["cluster"])
        failed = CounterMetricFamily("kcg_reviews_failed", "Token and access reviews the API "
                                     "server could not answer (callers got 503)",
                                     labels=["cluster", "review"])
        sent = CounterMetricFamily("kcg_access_reviews", "SubjectAccessReviews sent to the "
                                   "cluster (the accesses its RBAC, read here, did not allow)",
                                   labels=["cluster"])
        local = CounterMetricFamily("kcg_rbac_local_allows", "Accesses allowed by the "
                                    "cluster's RBAC read here, with no review", labels=["cluster"])
        disagreed = CounterMetricFamily("kcg_rbac_disagreements", "Reviews the cluster's "
                                        "RBAC allowed that its RBAC read here did not (the "
                                        "two a moment apart: asked again, then kept a second)",
                                        labels=["cluster"])
        deciding = GaugeMetricFamily("kcg_rbac_deciding", "1 while the cluster's RBAC, followed "
                                     "here, decides (synced and following)", labels=["cluster"])
        for cluster_name, cluster in list(self._clusters().items()):
            up.add_metric((cluster_name,), 1.0 if cluster.caches.api_server_answers() else 0.0)
            if cluster.access is not None:
                failed.add_metric((cluster_name, "access"), cluster.access.failures)
                sent.add_metric((cluster_name,), cluster.access.sent)
                local.add_metric((cluster_name,), cluster.access.local_allows)
                disagreed.add_metric((cluster_name,), cluster.access.disagreements)
                rbac = cluster.access.rbac
                deciding.add_metric((cluster_name,), 1.0 if rbac and rbac.deciding else 0.0)
        tokens = CounterMetricFamily("kcg_token_reviews", "TokenReviews sent to the identity "
                                     "cluster", labels=["cluster"])
        verified = CounterMetricFamily("kcg_tokens_verified_locally", "ServiceAccount tokens "
                                       "verified here, with no review", labels=["cluster"])
        refused = CounterMetricFamily("kcg_tokens_refused_locally", "Tokens refused here (a "
                                      "signature, time or audience the API server refuses "
                                      "too), with no review", labels=["cluster"])
        judging = GaugeMetricFamily("kcg_tokens_deciding", "1 while the identity cluster's "
                                    "ServiceAccount tokens are verified here", labels=["cluster"])
        identity, authenticator = self._identity()
        if authenticator is not None:
            failed.add_metric((identity, "token"), getattr(authenticator, "failures", 0))
            tokens.add_metric((identity,), getattr(authenticator, "sent", 0))
            verified.add_metric((identity,), getattr(authenticator, "verified", 0))
            refused.add_metric((identity,), getattr(authenticator, "refused", 0))
            local_tokens = getattr(authenticator, "local", None)
            judging.add_metric((identity,), 1.0 if local_tokens and local_tokens.deciding else 0.0)
        written = CounterMetricFamily("kcg_history_changes_written", "Changes written to the "
                                      "history store", labels=["cluster"])
        waiting = GaugeMetricFamily("kcg_history_changes_waiting", "Changes handed to the "
                                    "history writer and not written yet", labels=["cluster"])
        writable = GaugeMetricFamily("kcg_history_writable", "1 while the history store takes "
                                     "this cluster's changes", labels=["cluster"])
        forgotten = CounterMetricFamily("kcg_history_changes_forgotten", "Changes retention "
                                        "took out of the history store", labels=["cluster"])
        for cluster_name, cluster in list(self._clusters().items()):
            history = getattr(cluster, "history", None)
            if history is None:
                continue
            writer = history.writer
            written.add_metric((cluster_name,), writer.written)
            waiting.add_metric((cluster_name,), len(writer.inbox) + len(writer.pending))
            writable.add_metric((cluster_name,), 0.0 if history.problem() else 1.0)
            forgotten.add_metric((cluster_name,), writer.forgotten)
        yield from (objects, synced, lists, seeded, relists, restarts, events, age, subscribers,
                    up, failed, sent, local, disagreed, deciding, tokens, verified, refused,
                    judging, written, waiting, writable, forgotten)
        try:  # scraped on the loop (/metrics is async): its tasks, a leak's first sign
            tasks = len(asyncio.all_tasks())
        except RuntimeError:
            return
        yield GaugeMetricFamily("kcg_event_loop_tasks", "Tasks on the serving event loop", value=tasks)


    def _entries(self) -> Iterator[tuple[str, Any, Any]]:
        for name, cluster in list(self._clusters().items()):
            for gvr, entry in cluster.caches.entries().items():
                yield name, gvr, entry


class Metrics:
    """The gateway's registry and the instruments the code updates."""

    def __init__(self, clusters: Callable[[], Mapping[str, Any]],
                 identity: Callable[[], tuple[str, Any]] = lambda: ("", None)) -> None:
        self.registry = CollectorRegistry()
        # the standard figures every Python exporter gives (process_*, python_*)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        Info("kcg_build", "The gateway's version and its Python's", registry=self.registry).info(
            {"version": VERSION, "python_version": PYTHON})
        self.latency = Latencies()
        self.registry.register(self.latency)
        self.streams = Gauge("kcg_open_streams", "Open watch and event streams", ["kind"],
                             registry=self.registry)
        self.cut_off = Counter("kcg_streams_cut_off", "Streams ended because their reader fell "
                               "behind (it resumes from where it was)", ["kind"],
                               registry=self.registry)
        for kind in ("watch", "sse"):  # at 0 from the start: an alert's increase needs a start,
            self.cut_off.labels(kind)  # and a dashboard's panel a series
            self.streams.labels(kind)
        self.registry.register(_CacheCollector(clusters, identity))

    def stream_opened(self, kind: str) -> None:
        self.streams.labels(kind).inc()

    def stream_closed(self, kind: str) -> None:
        self.streams.labels(kind).dec()

    def stream_cut_off(self, kind: str) -> None:
        """A stream ended because its reader fell behind."""
        self.cut_off.labels(kind).inc()
