"""How old an answer may be, said on the answer itself.

A cache keeps answering when the API server is gone (never a 5xx, never a
hang), but it must not pretend: a list or get from a cache that is not
following the API server carries

- ``Age: N`` — seconds since the cache was last known to hold the API
  server's state (RFC 9111's "time since the response was validated at the
  origin"), and
- ``Warning: 299 - "..."`` — the same in words, with the time; kubectl prints
  Warning headers as it does the API server's deprecation warnings.

A cache follows the API server while its watch is open and the API server
answers the gateway's heartbeat (``/api`` every few seconds): answers then
carry neither header (nor in the moment between a list and its watch, or while
a watch that timed out is reopened). Its state was last known current when its watch ended,
or, with the watch still open, when the API server last answered (a watch
that is stalled, not broken, looks open).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable

from informer_core.reflector import ReflectorStats

__all__ = ["HEARTBEAT_EVERY", "stale_since", "staleness", "staleness_headers", "warning_header"]

HEARTBEAT_EVERY = 5.0  # seconds between the gateway's heartbeats (GET /api)
_GRACE = 2 * HEARTBEAT_EVERY + 2.0  # a missed probe or two is not yet staleness
_BETWEEN_WATCHES = 2.0  # a list just made, or a watch being reopened, is not yet staleness


def stale_since(stats: ReflectorStats | None, confirmed_at: float,
                now: float | None = None) -> float | None:
    """When the cache was last known current (``time.time()``), or ``None`` if it is now."""
    now = time.time() if now is None else now
    if stats is None:
        return None
    if not stats.watching:
        since = stats.unwatched_since or stats.last_event_time or now
        return since if now - since > _BETWEEN_WATCHES else None
    if now - confirmed_at > _GRACE:
        return confirmed_at
    return None


def staleness(resource: str, since: float, now: float | None = None,
              cluster: str = "") -> tuple[int, str]:
    """(the age in seconds, the warning's text) of an answer from a cache current until
    ``since`` (the text names ``cluster`` when the gateway serves several)."""
    now = time.time() if now is None else now
    age = max(0, int(now - since))
    when = dt.datetime.fromtimestamp(since, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    who = f"cluster {cluster}" if cluster else "kube-cache-gateway"
    return age, (f"{who}: the cache of {resource} has not followed the API server since "
                 f"{when}; this answer may be {age} s old")


def staleness_headers(resource: str, since: float, now: float | None = None,
                      cluster: str = "") -> dict[str, str]:
    """The ``Age`` and ``Warning`` headers of an answer from a cache current until ``since``."""
    age, text = staleness(resource, since, now, cluster)
    return {"Age": str(age), "Warning": warning_header([text])}


def warning_header(texts: Iterable[str]) -> str:
    """One ``Warning`` header value of miscellaneous warnings (code 299, as kube-apiserver
    sends its own), each text quoted and cut at 300 characters so that a long cluster error
    cannot swell the header past what proxies accept."""
    quoted = (text[:300].replace("\\", "\\\\").replace('"', '\\"') for text in texts)
    return ", ".join(f'299 - "{text}"' for text in quoted)
