"""Discovery and REST mapping from the API server's ``/api`` and ``/apis`` documents.

``Discovery`` resolves a ``GroupVersionResource`` — or a resource written as
kubectl writes it (``pods``, ``po``, ``deployments.apps``,
``deployments.v1.apps``) — to an ``APIResource``: kind, list kind,
namespaced-or-not and verbs. A miss refreshes discovery (rate-limited), so
resources of CRDs created later resolve without a restart. The documents are
kept as the server sent them, so a gateway can serve discovery unchanged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from informer_core.errors import NotFoundError, UnsupportedResourceError
from informer_core.rest import RawClient

__all__ = ["APIResource", "Discovery", "GroupVersionResource", "names_resource"]

log = logging.getLogger(__name__)


class GroupVersionResource(NamedTuple):
    """A resource of one API group version; ``group`` ``""`` is the core (legacy) group."""

    group: str
    version: str
    resource: str

    def __str__(self) -> str:
        return f"{self.resource}.{self.version}.{self.group}" if self.group else \
            f"{self.resource}.{self.version}"

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclass(frozen=True)
class APIResource:
    """What discovery says about one resource."""

    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    verbs: frozenset[str] = frozenset()
    short_names: tuple[str, ...] = ()
    singular: str = ""
    categories: tuple[str, ...] = ()
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def gvr(self) -> GroupVersionResource:
        return GroupVersionResource(self.group, self.version, self.resource)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def path(self) -> str:
        """The collection path across all namespaces (or of a cluster-scoped resource)."""
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        return f"{prefix}/{self.resource}"

    def can_list_and_watch(self) -> bool:
        return {"list", "watch"} <= self.verbs


class Discovery:
    """A cached view of the server's discovery documents; thread-safe.

    Args:
        api_client: a ``kubernetes.client.ApiClient``.
        min_refresh_interval: a miss refreshes at most this often (seconds).
        fetch: ``fetch(path, timeout=...) -> (status, doc)``; defaults to a GET with
            the client's credentials. It is the one way this object reads the server.
    """

    def __init__(self, api_client: Any = None, min_refresh_interval: float = 1.0,
                 fetch: Callable[[str], tuple[int, Any]] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if fetch is None:
            if api_client is None:
                raise ValueError("Discovery needs an api_client or a fetch function")
            fetch = RawClient(api_client).get_json
        self._fetch = fetch
        self._min_refresh = min_refresh_interval
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()  # guards the caches below
        self._refresh_lock = threading.Lock()  # one refresh at a time
        self._loaded = False
        self._last_refresh = -1e18  # when the last refresh started
        self._resources: dict[GroupVersionResource, APIResource] = {}
        self._preferred: dict[str, str] = {}  # group -> preferred version
        self._group_order: list[str] = []  # "" first, then /apis order
        self.api_versions_doc: dict = {}
        self.api_groups_doc: dict = {}
        self.resource_lists: dict[str, dict] = {}  # group_version -> APIResourceList
        self.version_doc: dict = {}
        self.failed_group_versions: set[str] = set()

    # -- loading ----------------------------------------------------------------

    def refresh(self) -> None:
        """Fetch every discovery document now.

        Raises:
            ConnectionError: ``/api`` or ``/apis`` could not be read.
        """
        with self._refresh_lock:
            self._refresh_locked()

    def _refresh_locked(self) -> None:
        started = self._clock()
        status, api_doc = self._fetch("/api")
        if status != 200 or not isinstance(api_doc, dict):
            raise ConnectionError(f"discovery: GET /api answered {status}")
        status, apis_doc = self._fetch("/apis")
        if status != 200 or not isinstance(apis_doc, dict):
            raise ConnectionError(f"discovery: GET /apis answered {status}")
        _, version_doc = self._fetch("/version")
        resources: dict[GroupVersionResource, APIResource] = {}
        lists: dict[str, dict] = {}
        failed: set[str] = set()
        preferred: dict[str, str] = {"": (api_doc.get("versions") or ["v1"])[0]}
        order = [""]
        group_versions: list[tuple[str, str, str]] = [
            ("", v, f"/api/{v}") for v in api_doc.get("versions") or []]
        for group in apis_doc.get("groups") or []:
            name = group.get("name", "")
            order.append(name)
            pref = (group.get("preferredVersion") or {}).get("version")
            versions = [v.get("version") for v in group.get("versions") or [] if v.get("version")]
            preferred[name] = pref or (versions[0] if versions else "")
            group_versions.extend((name, v, f"/apis/{name}/{v}") for v in versions)
        for group, version, path in group_versions:
            status, doc = self._fetch(path)
            gv = f"{group}/{version}" if group else version
            if status != 200 or not isinstance(doc, dict):
                failed.add(gv)  # e.g. an aggregated API that is down
                continue
            lists[gv] = doc
            for entry in doc.get("resources") or []:
                name = entry.get("name", "")
                if not name or "/" in name:
                    continue  # subresources (pods/log) are not listable collections
                res = APIResource(
                    group=group, version=version, resource=name, kind=entry.get("kind", ""),
                    namespaced=bool(entry.get("namespaced")),
                    verbs=frozenset(entry.get("verbs") or ()),
                    short_names=tuple(entry.get("shortNames") or ()),
                    singular=entry.get("singularName") or "",
                    categories=tuple(entry.get("categories") or ()), raw=entry)
                resources[res.gvr] = res
        with self._lock:
            self._resources = resources
            self._preferred = preferred
            self._group_order = order
            self.api_versions_doc = api_doc
            self.api_groups_doc = apis_doc
            self.resource_lists = lists
            self.version_doc = version_doc if isinstance(version_doc, dict) else {}
            self.failed_group_versions = failed
            self._loaded = True
            self._last_refresh = started

    def get(self, path: str, timeout: float = 30.0) -> tuple[int, Any]:
        """GET any document with discovery's transport (e.g. a CRD, ``/version``).

        Raises:
            ConnectionError: the server could not be reached.
        """
        return self._fetch(path, timeout)

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self.refresh()

    def _refresh_since(self, asked_at: float) -> None:
        """Make sure the view was fetched after ``asked_at``, refreshing if needed.

        Concurrent callers share one refresh; refreshes are spaced by at least
        ``min_refresh_interval`` (a caller waits for its turn rather than being
        answered from a view older than its question).
        """
        with self._refresh_lock:
            if self._last_refresh >= asked_at:
                return  # someone refreshed after we asked
            wait = self._last_refresh + self._min_refresh - self._clock()
            if wait > 0:
                self._sleep(wait)
            self._refresh_locked()

    # -- queries ----------------------------------------------------------------

    def resources(self) -> list[APIResource]:
        """Return every listable-collection resource known now."""
        self._ensure_loaded()
        with self._lock:
            return list(self._resources.values())

    def preferred_version(self, group: str) -> str | None:
        self._ensure_loaded()
        with self._lock:
            return self._preferred.get(group)

    def resolve(self, gvr: GroupVersionResource | tuple[str, str, str]) -> APIResource:
        """Return the resource for ``gvr``, refreshing once on a miss.

        Raises:
            NotFoundError: the server does not serve it.
            UnsupportedResourceError: it cannot be listed and watched.
        """
        gvr = GroupVersionResource(*gvr)
        asked_at = self._clock()
        self._ensure_loaded()
        found = self._lookup(gvr)
        if found is None:
            self._refresh_since(asked_at)
            found = self._lookup(gvr)
        if found is None:
            raise NotFoundError(f"the server does not serve resource {gvr.resource!r} in "
                                f"group version {gvr.group_version!r}", reason="NotFound")
        return self._check_verbs(found)

    @property
    def min_refresh_interval(self) -> float:
        """Seconds a miss waits at most between two refreshes."""
        return self._min_refresh

    def lookup(self, gvr: GroupVersionResource | tuple[str, str, str]) -> APIResource | None:
        """Return what the current view says of ``gvr`` (no I/O; ``None`` if unknown or not loaded)."""
        return self._lookup(GroupVersionResource(*gvr))

    @property
    def view(self) -> object:
        """The current view's identity: a new object each time discovery is fetched again
        (what a memo of resolved resources is checked against)."""
        return self._resources

    def age(self) -> float:
        """Seconds since the current view was fetched (infinite before the first fetch)."""
        return self._clock() - self._last_refresh if self._loaded else float("inf")

    def loaded(self) -> bool:
        """Return whether discovery has been fetched at least once."""
        return self._loaded

    def _lookup(self, gvr: GroupVersionResource) -> APIResource | None:
        with self._lock:
            return self._resources.get(gvr)

    @staticmethod
    def _check_verbs(res: APIResource) -> APIResource:
        if not res.can_list_and_watch():
            raise UnsupportedResourceError(
                f"resource {res.gvr} cannot be listed and watched "
                f"(verbs: {', '.join(sorted(res.verbs)) or 'none'})")
        return res

    def resolve_text(self, text: str) -> APIResource:
        """Resolve ``pods``, ``po``, ``pod``, ``Pod``, ``deployments.apps`` or ``deployments.v1.apps``.

        Raises:
            NotFoundError, UnsupportedResourceError: as ``resolve``.
        """
        asked_at = self._clock()
        self._ensure_loaded()
        found = self._match_text(text)
        if found is None:
            self._refresh_since(asked_at)
            found = self._match_text(text)
        if found is None:
            raise NotFoundError(f"the server doesn't have a resource type {text!r}",
                                reason="NotFound")
        return self._check_verbs(found)

    def _match_text(self, text: str) -> APIResource | None:
        candidates = _text_candidates(text)
        if not candidates:
            return None
        with self._lock:
            resources = list(self._resources.values())
            preferred = dict(self._preferred)
            order = list(self._group_order)
        lowered = text.strip().partition(".")[0].lower()
        for version, group in candidates:
            pool = [r for r in resources if _named(r, lowered, version, group)]
            if not pool:
                continue
            if version is None:
                # Prefer the group's preferred version, then the legacy group, then /apis order.
                def rank(r: APIResource) -> tuple[int, int, int]:
                    group_rank = order.index(r.group) if r.group in order else len(order)
                    exact = 0 if r.resource == lowered else 1
                    return (exact, group_rank, 0 if preferred.get(r.group) == r.version else 1)
                pool.sort(key=rank)
            return pool[0]
        return None

    def resource_gone(self, gvr: GroupVersionResource) -> bool:
        """Return True only when the server positively confirms ``gvr`` is gone.

        Right after an API server restart custom-resource endpoints answer 404
        until the CRDs are loaded again, and discovery may lag too; so for a
        resource of a non-built-in group the CRD object itself must be absent.
        A discovery failure answers False (not confirmed).
        """
        try:
            with self._refresh_lock:
                self._refresh_locked()
        except ConnectionError:
            return False
        if self._lookup(gvr) is not None:
            return False
        group_version = gvr.group_version
        with self._lock:
            if group_version in self.failed_group_versions:
                return False
            crd_api = "apiextensions.k8s.io/v1" in self.resource_lists
        if gvr.group and "." in gvr.group and crd_api:
            status, _ = self._fetch(
                f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{gvr.resource}.{gvr.group}")
            return status == 404
        return True


def _text_candidates(text: str) -> list[tuple[str | None, str | None]]:
    """How kubectl reads ``name[.version].group``: (version or None, group) in the order
    tried; group ``None`` for a bare name (any group, the legacy one ranked first)."""
    name, _, rest = text.strip().partition(".")
    if not name:
        return []
    if not rest:
        return [(None, None)]
    version, _, group = rest.partition(".")
    candidates: list[tuple[str | None, str | None]] = []
    if group:
        candidates.append((version, group))  # resource.version.group
    candidates.append((None, rest))  # resource.group
    return candidates


def _named(resource: APIResource, name: str, version: str | None, group: str | None) -> bool:
    if name not in (resource.resource, resource.singular, resource.kind.lower(),
                    *resource.short_names):
        return False
    return group is None or (resource.group == group
                             and (version is None or resource.version == version))


def names_resource(text: str, resource: APIResource) -> bool:
    """Whether ``text``, written as kubectl writes a resource (``pods``, ``po``,
    ``deployments.apps``, ``deployments.v1.apps``), names ``resource`` (any version of it
    unless one is written). Unlike ``Discovery.resolve_text`` it needs no discovery, so
    it can be asked of each resource as its informer is made."""
    lowered = text.strip().partition(".")[0].lower()
    return any(_named(resource, lowered, version, group)
               for version, group in _text_candidates(text))
