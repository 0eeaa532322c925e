"""The ListerWatcher contract: options, pages, events, streams, and how errors are raised.

The implementation over the Kubernetes REST API is ``informer_core.rest``
(``ApiListerWatcher``); tests plug in their own (an in-memory cluster, a fake
that injects faults).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

from informer_core.errors import APIStatusError, NotFoundError, ResourceExpiredError

__all__ = [
    "Abortable",
    "ListOptions",
    "ListPage",
    "ListerWatcher",
    "WatchEvent",
    "WatchStream",
    "status_error",
    "tweaked",
]


@runtime_checkable
class Abortable(Protocol):
    """A lister-watcher whose requests in flight can be ended from any thread.

    client-go cancels a request's context; here a reflector being stopped calls
    ``abort()``, so a list or watch blocked on the network ends at once instead of
    at its read timeout. Lister-watchers that wrap another pass it on.
    """

    def abort(self) -> None: ...


@dataclass
class ListOptions:
    """Options of a list or watch call, as ``metav1.ListOptions``."""

    label_selector: str = ""
    field_selector: str = ""
    resource_version: str = ""
    resource_version_match: str = ""
    limit: int = 0
    continue_token: str = ""
    timeout_seconds: int = 0
    allow_watch_bookmarks: bool = False

    def to_query(self, watch: bool = False) -> dict[str, str]:
        """Return the query parameters the API server expects."""
        query: dict[str, str] = {}
        if watch:
            query["watch"] = "true"
        if self.label_selector:
            query["labelSelector"] = self.label_selector
        if self.field_selector:
            query["fieldSelector"] = self.field_selector
        if self.resource_version:
            query["resourceVersion"] = self.resource_version
        if self.resource_version_match:
            query["resourceVersionMatch"] = self.resource_version_match
        if self.limit:
            query["limit"] = str(self.limit)
        if self.continue_token:
            query["continue"] = self.continue_token
        if self.timeout_seconds:
            query["timeoutSeconds"] = str(self.timeout_seconds)
        if self.allow_watch_bookmarks:
            query["allowWatchBookmarks"] = "true"
        return query


def tweaked(options: ListOptions, tweak: Callable[[ListOptions], None] | None) -> ListOptions:
    """Return ``options`` as ``tweak`` changes them, on a copy (``options`` itself stays)."""
    if tweak is None:
        return options
    options = ListOptions(**vars(options))
    tweak(options)
    return options


class ListPage(NamedTuple):
    """One page of a list: its items, the list's resourceVersion, and where to continue."""

    items: list[Any]
    resource_version: str
    continue_token: str = ""


class WatchEvent(NamedTuple):
    """One watch event; ``type`` is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR."""

    type: str
    object: Any


class WatchStream(Protocol):
    """An iterable of ``WatchEvent``; ``stop()`` (from any thread) ends the iteration."""

    def __iter__(self) -> Iterator[WatchEvent]: ...

    def stop(self) -> None: ...


class ListerWatcher(Protocol):
    """What a reflector needs: list a page, and watch from a resourceVersion."""

    def list(self, options: ListOptions) -> ListPage: ...

    def watch(self, options: ListOptions) -> WatchStream: ...


def status_error(code: int, status: Any, fallback: str = "") -> APIStatusError:
    """Turn an HTTP error code and ``Status`` body into the matching exception."""
    message = fallback
    reason = ""
    if isinstance(status, dict):
        message = status.get("message") or fallback
        reason = status.get("reason") or ""
        code = int(status.get("code") or code)
    if code == 410 or reason in ("Expired", "Gone"):
        return ResourceExpiredError(message or "resource version too old", code=410,
                                    reason=reason or "Expired", status=status)
    if code == 404:
        return NotFoundError(message or "not found", code=404, reason=reason or "NotFound",
                             status=status)
    return APIStatusError(message or f"HTTP {code}", code=code, reason=reason, status=status)
