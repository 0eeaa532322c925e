"""Prometheus metrics: request latencies, open streams, and per-resource cache figures.

Cache figures (objects, sync state, relists, watch restarts, last event age)
are read from the informers when scraped, so the hot path pays only for one
histogram observation per request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["Metrics"]

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class _CacheCollector(Collector):
    def __init__(self, entries: Callable[[], dict]) -> None:
        self._entries = entries

    def collect(self) -> Iterable[Any]:
        objects = GaugeMetricFamily("kcg_cache_objects", "Objects cached per resource", labels=["resource"])
        synced = GaugeMetricFamily("kcg_informer_synced", "1 when the resource's informer has synced",
                                   labels=["resource"])
        relists = CounterMetricFamily("kcg_informer_relists", "Relists after the initial list",
                                      labels=["resource"])
        restarts = CounterMetricFamily("kcg_informer_watch_errors",
                                       "Failed lists and failed or broken watches", labels=["resource"])
        events = CounterMetricFamily("kcg_informer_events", "Watch events received", labels=["resource"])
        age = GaugeMetricFamily("kcg_informer_last_event_age_seconds",
                                "Seconds since the last watch event or list", labels=["resource"])
        subscribers = GaugeMetricFamily("kcg_stream_subscribers", "Open streams per resource",
                                        labels=["resource"])
        now = time.time()
        for gvr, entry in self._entries().items():
            name = str(gvr)
            informer = entry.generic.informer()
            objects.add_metric([name], len(entry.hub.view))
            synced.add_metric([name], 1.0 if informer.has_synced() else 0.0)
            stats = informer.reflector_stats()
            subscribers.add_metric([name], len(entry.hub.subscribers))
            if stats is not None:
                relists.add_metric([name], stats.relists)
                restarts.add_metric([name], stats.watch_errors)
                events.add_metric([name], stats.events)
                if stats.last_event_time:
                    age.add_metric([name], max(0.0, now - stats.last_event_time))
        yield from (objects, synced, relists, restarts, events, age, subscribers)
        try:  # scraped on the loop (/metrics is async): its tasks, a leak's first sign
            tasks = len(asyncio.all_tasks())
        except RuntimeError:
            return
        yield GaugeMetricFamily("kcg_event_loop_tasks", "Tasks on the serving event loop", value=tasks)


class Metrics:
    """The gateway's registry and the instruments the code updates."""

    def __init__(self, entries: Callable[[], dict]) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram("kcg_http_request_duration_seconds",
                                 "Time to the first byte of the answer, by route and code",
                                 ["route", "code"], buckets=_BUCKETS, registry=self.registry)
        self.streams = Gauge("kcg_open_streams", "Open watch and event streams", ["kind"],
                             registry=self.registry)
        self.registry.register(_CacheCollector(entries))
        self._latency_children: dict[tuple[str, int], Any] = {}

    def latency_for(self, route: str, status: int) -> Any:
        """The latency histogram's child for ``route`` and ``status``, made once.

        Looking a child up by its labels costs more than the observation.
        """
        key = (route, status)
        child = self._latency_children.get(key)
        if child is None:
            child = self._latency_children[key] = self.latency.labels(route, str(status))
        return child

    def stream_opened(self, kind: str) -> None:
        self.streams.labels(kind).inc()

    def stream_closed(self, kind: str) -> None:
        self.streams.labels(kind).dec()
