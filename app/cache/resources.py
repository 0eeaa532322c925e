"""A cluster's caches as the HTTP layer sees them: one ``ResourceCache`` per resource, loaded lazily.

The first request for a resource resolves it (discovery), asks the factory for
its informer, attaches the resource's ``EventHub``, starts the informer and
waits for the sync; concurrent first requests share that one load. A request
that has waited ``sync_timeout`` seconds gets 503 with ``Retry-After`` while the
load goes on for the next one. Later requests find the cache ready and never
touch the API server.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from app.bridge import HubHandler, call_on_loop, run_blocking
from app.cache.answer_age import HEARTBEAT_EVERY, stale_since
from app.cache.hub import EventHub
from app.cache.kept_lists import KeptLists
from app.cache.openapi_documents import OpenAPIDocuments
from app.cache.query_engine import QueryEngine
from app.cache.tagged_copies import TaggedCopies
from app.kube.printers import DEFAULT_PRINTER, PRINTERS, crd_columns
from app.kube.request import ResourcePath
from app.kube.status import StatusError, not_found
from app.kube.table import Printer
from app.query.budget import QueryMemory
from app.settings import Settings
from informer_core.discovery import APIResource, Discovery, GroupVersionResource
from informer_core.errors import NotFoundError, UnsupportedResourceError
from informer_core.factory import GenericInformer, SharedInformerFactory
from informer_core.informer import HandlerRegistration
from informer_core.rest import RawClient
from informer_core.stop import StopEvent
from informer_core.store import Indexer

__all__ = ["ClusterCache", "ResourceCache"]

log = logging.getLogger(__name__)

# seconds start-up waits for the pre-warm names to be resolved before leaving it to the background
PREWARM_RESOLVE_WAIT = 5.0

_REFUSED_FOR = 5.0  # seconds a resource the gateway may not list is answered 403 without asking
# seconds over which the informers try again when the heartbeat finds the API server back:
# at once, not up to a minute later (their backoff), yet not all in the same instant
CATCH_UP_WITHIN = 3.0


@dataclass
class ResourceCache:
    """One resource as the HTTP layer serves it: informer, hub, printer."""

    resource: APIResource
    generic: GenericInformer
    hub: EventHub
    registration: HandlerRegistration
    printer: Printer
    prewarmed: bool = False
    last_used: float = field(default_factory=time.monotonic)
    queries: QueryEngine = field(default_factory=QueryEngine)  # kept values, results and answers
    lists: KeptLists = field(default_factory=lambda: KeptLists(QueryMemory()))  # kept answers
    tagged: TaggedCopies = field(default_factory=lambda: TaggedCopies(QueryMemory()))  # merged

    def __post_init__(self) -> None:
        # read on every request: fixed for the informer's life, so looked up once
        self.informer = self.generic.informer()
        self.indexer: Indexer = self.informer.get_indexer()
        self._stop = self.generic.stop_event

    def resource_version(self) -> str:
        """The hub's version, what it has applied (an ETag names it; a list itself carries the
        version its indexer read was exactly at, ``app.http.resources``)."""
        return str(self.hub.rv)

    def usable(self) -> bool:
        return not self._stop.is_set()  # (``generic.stopped()``, without two calls)


def _raw_get(factory: SharedInformerFactory) -> Callable[[str, str, str], tuple[int, bytes, dict]]:
    """GETs of raw documents with the factory's client, made when first needed (a factory
    over an in-memory cluster has none, and never needs one for its lists)."""
    client: RawClient | None = None

    def get(path: str, accept: str, if_none_match: str) -> tuple[int, bytes, dict]:
        nonlocal client
        if client is None:
            try:
                client = RawClient(factory.api_client)
            except Exception as exc:  # noqa: BLE001 - no client to be had: the server cannot be asked
                raise ConnectionError(f"no API client: {exc}") from None
        return client.get_raw(path, accept, if_none_match)

    return get


class ClusterCache:
    """One cluster's resources by GVR, loaded on first use; all methods run on the event loop."""

    def __init__(self, settings: Settings, factory: SharedInformerFactory,
                 memory: QueryMemory | None = None) -> None:
        self.settings = settings
        self.factory = factory
        self.memory = memory if memory is not None else QueryMemory()  # the process's
        self.openapi = OpenAPIDocuments(_raw_get(factory))  # the API server's, kept once asked
        self._entries: dict[GroupVersionResource, ResourceCache] = {}
        self._pending: dict[GroupVersionResource, asyncio.Task] = {}
        self._syncing: dict[GroupVersionResource, asyncio.Future] = {}  # loads awaiting the sync
        # Resources the gateway's own identity may not list: (until, the 403), briefly
        # remembered so that each request does not cost a refused LIST.
        self._refused: dict[GroupVersionResource, tuple[float, StatusError]] = {}
        self._background: set[asyncio.Task] = set()
        self._stop = StopEvent()  # tells the threads it stops (informer_core.stop)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reaper: asyncio.Task | None = None
        self._reachable: tuple[float, bool] = (0.0, False)
        self.confirmed_at = time.time()  # the API server last answered the heartbeat
        self._confirmed_once = False  # whether it ever has
        self.credentials_problem: str | None = None  # the API server refuses our credentials
        self._heartbeat: asyncio.Task | None = None
        self._probing = False
        self._next_discovery: asyncio.Future | None = None  # the refresh misses wait for
        self._discovery_turns = asyncio.Lock()  # misses' refreshes, one after another
        self._refreshing: asyncio.Future | None = None  # the refresh stale discovery waits for
        self._prewarm_gvrs: set[GroupVersionResource] = set()
        self._prewarm_resolved = not settings.prewarm  # the names' resources are known
        self._prewarmed_once = False
        self._prewarm_task: asyncio.Task | None = None
        # told of each resource this process begins to load on a request (its siblings
        # load it too: see app.process.peers)
        self.announce: Callable[[GroupVersionResource], None] | None = None
        # the recorder a loading resource's hub tells its changes (``app.history``): kept history
        self.recorder_for: Callable[[str, str, str], Any] | None = None
        # the kept state a loading resource's informer may begin from instead of a list
        # (``ClusterHistory.seed``: a restart, a replica started later on a shared store)
        self.seed_for: Callable[[str, str, str], Awaitable[Any]] | None = None

    # -- lifecycle ----------------------------------------------------------------

    async def start(self, permits: Callable[[APIResource], bool] = lambda r: True) -> None:
        """Bind to the running loop, start the idle reaper, and begin pre-warming.

        Pre-warm names are resolved now, so a typo or a denied resource stops
        start-up with a clear error; the loads themselves go on in the background
        (``/readyz`` reports when they are done). An API server that cannot be asked —
        unreachable, refusing the credentials, an exec plugin failing, or slower than
        ``PREWARM_RESOLVE_WAIT`` — stops nothing: the names are resolved in the
        background, tried again with a backoff, and the pre-warm is not ready until
        then (one cluster away must not keep a gateway of several from starting).

        Raises:
            ValueError: a pre-warm resource is unknown, unwatchable or denied.
        """
        self._loop = asyncio.get_running_loop()
        self.factory.set_on_resource_gone(self._gone_from_thread)
        self.factory.set_on_watch_error(self._watch_error_from_thread)
        if self.settings.idle_unload > 0:
            self._reaper = asyncio.create_task(self._reap_idle())
        self._heartbeat = asyncio.create_task(self._beat())
        if self.settings.metadata_only:
            task = asyncio.create_task(self._name_metadata_only())
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        if not self.settings.prewarm:
            return
        resolving = asyncio.create_task(self._resolve_prewarm(permits))
        await asyncio.wait({resolving}, timeout=PREWARM_RESOLVE_WAIT)
        if resolving.done() and isinstance(resolving.exception(), ValueError):
            raise resolving.exception()  # a typo, or denied: said at start
        self._prewarm_task = asyncio.create_task(self._prewarm(permits, resolving))

    async def _resolve_prewarm(self, permits: Callable[[APIResource], bool]) -> list[APIResource]:
        resources = []
        for text in self.settings.prewarm:
            try:
                resource = await self.resolve_text(text)
            except (NotFoundError, UnsupportedResourceError) as exc:
                raise ValueError(f"--prewarm {text}: {exc}") from None
            if not permits(resource):
                raise ValueError(f"--prewarm {text}: denied by the resource policy")
            resources.append(resource)
        return resources

    async def _name_metadata_only(self) -> None:
        """Say in the log which ``--metadata-only`` names name nothing here (a typo would
        otherwise keep whole objects without a word); an API server that cannot be asked
        now is left alone."""
        for text in self.settings.metadata_only:
            try:
                await self.resolve_text(text)
            except (NotFoundError, UnsupportedResourceError) as exc:
                log.warning("--metadata-only %s: %s; nothing is cached as metadata only for "
                            "it", text, exc)
            except Exception as exc:  # noqa: BLE001 - discovery cannot be asked now
                log.debug("--metadata-only %s not checked: %s", text, exc)
                return

    async def _prewarm(self, permits: Callable[[APIResource], bool],
                       resolving: asyncio.Task) -> None:
        """Resolve the pre-warm names (tried again while discovery cannot be asked), then load."""
        delay = 1.0
        while True:
            try:
                resources = await resolving
                break
            except ValueError as exc:  # found only once the API server answered
                log.error("the pre-warmed resources will not be loaded: %s", exc)
                return
            except Exception as exc:  # noqa: BLE001 - discovery cannot be asked: try again
                log.warning("the pre-warmed resources cannot be resolved yet (%s: %s); "
                            "trying again in %.0f s", type(exc).__name__, exc, delay)
            await asyncio.sleep(delay)
            delay = min(2 * delay, 30.0)
            resolving = asyncio.create_task(self._resolve_prewarm(permits))
        self._prewarm_gvrs = {r.gvr for r in resources}
        self._prewarm_resolved = True
        for resource in resources:
            entry = await self.load(resource, wait=None)
            entry.prewarmed = True

    async def close(self, error: StatusError | None = None) -> None:
        """End every stream (``error`` its last word), stop every informer and join their threads."""
        if self._reaper is not None:
            self._reaper.cancel()
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        if self._prewarm_task is not None:
            self._prewarm_task.cancel()
        for task in list(self._pending.values()):
            task.cancel()
        for entry in self._entries.values():
            entry.hub.close_all(error)
        await run_blocking(self._stop.set)  # off the loop: its informers stop as it is set
        await run_blocking(self.factory.shutdown)

    # -- resolving ------------------------------------------------------------------

    async def resolve(self, target: ResourcePath) -> APIResource:
        """Return the resource a path names.

        Raises:
            StatusError: 404 if the server has no such resource, 405 if it cannot
                be listed and watched.
        """
        gvr = GroupVersionResource(target.group, target.version, target.resource)
        discovery = self.factory.discovery
        found = discovery.lookup(gvr) if discovery.loaded() else None
        if found is None:
            try:
                if discovery.loaded():
                    # a view fetched after this question: a CRD created a moment ago is found
                    await self._rediscover()
                    found = discovery.lookup(gvr)
                    if found is None:
                        raise NotFoundError(str(gvr))
                else:
                    found = await run_blocking(discovery.resolve, gvr)
            except NotFoundError:
                raise not_found(
                    f"the server could not find the requested resource "
                    f"({target.resource}.{target.version}{'.' + target.group if target.group else ''})",
                    resource=target.resource, group=target.group) from None
            except UnsupportedResourceError as exc:
                raise StatusError(405, str(exc), "MethodNotAllowed") from None
            except ConnectionError as exc:
                log.warning("discovery failed: %s", exc)  # the cause, with its address: logged
                raise StatusError(503, "the API server cannot be reached for discovery",
                                  headers={"Retry-After": "1"}) from None
        if not found.can_list_and_watch():
            raise StatusError(405, f"resource {found.gvr} cannot be listed and watched "
                                   f"(verbs: {', '.join(sorted(found.verbs))})", "MethodNotAllowed")
        return found

    async def _rediscover(self) -> None:
        """Wait for a discovery refresh that starts after now, shared by every miss.

        Unknown resources are what hostile or mistaken callers send most: each
        miss must not hold a thread while it waits for its turn (refreshes are
        spaced by the discovery's minimum interval), nor cost a refresh of its
        own. The first miss schedules the next refresh; every miss until it
        starts joins it. Refreshes take turns: the next one waits for the one on its
        way, then for the interval since that one began (a view's age counts from the
        start of the refresh that fetched it, so while one is on its way the age of the
        view before would let another begin at once).
        """
        if self._next_discovery is None or self._next_discovery.done():
            self._next_discovery = asyncio.ensure_future(self._discover_in_turn())
        await asyncio.shield(self._next_discovery)

    async def _discover_in_turn(self) -> None:
        discovery = self.factory.discovery
        async with self._discovery_turns:
            await asyncio.sleep(max(0.0, discovery.min_refresh_interval - discovery.age()))
            self._next_discovery = None  # misses from now on wait for the refresh after this one
            await run_blocking(discovery.refresh)

    async def discovery_within(self, max_age: float) -> Discovery:
        """The cluster's discovery, refreshed first if older than ``max_age`` seconds.

        One refresh at a time, shared by every request that finds the view old (as
        misses for unknown resources share theirs): two hundred concurrent ``/apis``
        on a stale view cost one refresh, not two hundred. A refresh that fails keeps
        the view there was.

        Raises:
            StatusError: 503 when discovery could never be fetched.
        """
        discovery = self.factory.discovery
        if discovery.age() > max_age:
            if self._refreshing is None or self._refreshing.done():
                self._refreshing = asyncio.ensure_future(run_blocking(discovery.refresh))
            try:
                await asyncio.shield(self._refreshing)
            except ConnectionError as exc:
                if not discovery.loaded():
                    log.warning("discovery failed: %s", exc)
                    raise StatusError(503, "discovery is not available yet",
                                      headers={"Retry-After": "1"}) from None
        return discovery

    async def resolve_text(self, text: str) -> APIResource:
        """Resolve ``pods``, ``deployments.apps``, ... (for configuration)."""
        return await run_blocking(self.factory.discovery.resolve_text, text)

    # -- loading --------------------------------------------------------------------

    def ready_entry(self, gvr: GroupVersionResource) -> ResourceCache | None:
        entry = self._entries.get(gvr)
        if entry is not None and entry.usable():
            entry.last_used = time.monotonic()
            return entry
        return None

    async def load(self, resource: APIResource, wait: float | None,
                   announce: bool = True) -> ResourceCache:
        """Return the ready cache of ``resource``, loading it if needed.

        Args:
            wait: seconds to wait for a load in progress; ``None`` waits for good.
            announce: tell ``announce`` of a load this begins.

        Raises:
            StatusError: 503 with Retry-After once ``wait`` has passed.
        """
        gvr = resource.gvr
        entry = self.ready_entry(gvr)
        if entry is not None:
            return entry
        refused = self._refused.get(gvr)
        if refused is not None:
            if refused[0] > time.monotonic():
                raise refused[1]
            del self._refused[gvr]
        task = self._pending.get(gvr)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._load(resource))
            self._pending[gvr] = task
            task.add_done_callback(lambda _t, g=gvr: self._pending.pop(g, None))
            if announce and self.announce is not None:
                self.announce(gvr)
        try:
            if wait is None:
                return await asyncio.shield(task)
            return await asyncio.wait_for(asyncio.shield(task), wait)
        except asyncio.TimeoutError:
            raise StatusError(
                503, f"the cache of {resource.resource} is still syncing with the API server; "
                     f"retry shortly", "ServiceUnavailable",
                headers={"Retry-After": "1"}) from None

    def warm(self, gvr: GroupVersionResource, permits: Callable[[APIResource], bool]) -> None:
        """Begin loading ``gvr`` in the background (a sibling process began to), unless it
        is loaded or loading here already, or ``permits`` refuses it; failures are the
        next request's to report."""
        if self.ready_entry(gvr) is not None or gvr in self._pending:
            return

        async def load() -> None:
            discovery = self.factory.discovery
            found = discovery.lookup(gvr) if discovery.loaded() else None
            if found is None:
                found = await run_blocking(discovery.resolve, gvr)
            if found.can_list_and_watch() and permits(found):
                await self.load(found, wait=None, announce=False)

        task = asyncio.get_running_loop().create_task(load())
        self._background.add(task)
        task.add_done_callback(self._warmed)

    def _warmed(self, task: asyncio.Task) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("loading for a sibling failed: %s", task.exception())

    async def _load(self, resource: APIResource) -> ResourceCache:
        loop = asyncio.get_running_loop()
        old = self._entries.pop(resource.gvr, None)
        if old is not None:
            old.hub.close_all()
            old.lists.clear()
            old.tagged.clear()
        generic = await run_blocking(self.factory.for_resource, resource.gvr)
        hub = EventHub(self.settings.event_ring_size)
        gvr = resource.gvr
        if self.recorder_for is not None:
            hub.recorder = self.recorder_for(gvr.group, gvr.version, gvr.resource)
        seed = None
        if self.seed_for is not None and not generic.informer().has_started():
            seed = await self.seed_for(gvr.group, gvr.version, gvr.resource)
        if seed is not None:
            # served from what the store kept at once (stale-marked until its watch opens),
            # its watch from the stored version: no list, where the API server still has it
            generic.informer().begin_from(seed.objects, str(seed.hi), seed.at)
            if hub.recorder is not None:
                hub.recorder.resume(seed.lo, seed.hi)
            log.info("cache of %s begins from the history store: %d objects at resourceVersion "
                     "%d", gvr, len(seed.objects), seed.hi)
        synced = self._syncing[resource.gvr] = loop.create_future()
        try:
            registration = await run_blocking(
                generic.informer().add_event_handler,
                HubHandler(loop, hub.apply, hub.settle,
                           lambda: synced.done() or synced.set_result(None)))
            printer = await self._printer(resource)
            self.factory.start(self._stop)
            await synced  # signalled after the initial list's last object reached the hub
        finally:
            self._syncing.pop(resource.gvr, None)
        hub.mark_ready()
        entry = ResourceCache(resource, generic, hub, registration, printer,
                              queries=QueryEngine(self.memory), lists=KeptLists(self.memory),
                              tagged=TaggedCopies(self.memory))
        self._entries[resource.gvr] = entry
        log.info("cache of %s ready: %d objects at resourceVersion %s", resource.gvr,
                 len(hub.view), hub.rv)
        return entry

    async def _printer(self, resource: APIResource) -> Printer:
        known = PRINTERS.get((resource.group, resource.resource))
        if known is not None:
            return known
        if "." in resource.group:  # maybe a custom resource: use its printer columns
            status, crd = await run_blocking(
                self.factory.discovery.get,
                f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                f"{resource.resource}.{resource.group}")
            if status == 200 and isinstance(crd, dict):
                for version in (crd.get("spec") or {}).get("versions") or []:
                    if version.get("name") == resource.version:
                        return crd_columns(version.get("additionalPrinterColumns") or [])
        return DEFAULT_PRINTER

    # -- unloading ------------------------------------------------------------------

    def _gone_from_thread(self, gvr: GroupVersionResource, reason: str) -> None:
        if self._loop is not None:
            call_on_loop(self._loop, self._drop, gvr)

    def _drop(self, gvr: GroupVersionResource) -> None:
        entry = self._entries.pop(gvr, None)
        if entry is not None:
            entry.lists.clear()
            entry.tagged.clear()
            named = f"{gvr.resource}.{gvr.group}" if gvr.group else gvr.resource
            entry.hub.close_all(not_found(
                f"the resource {named} went away from the API server (its "
                f"CustomResourceDefinition or API service was deleted)",
                resource=gvr.resource, group=gvr.group))
        loading = self._syncing.get(gvr)
        if loading is not None and not loading.done():
            loading.set_exception(not_found(
                f"the resource {gvr} went away while its cache loaded",
                resource=gvr.resource, group=gvr.group))

    def _watch_error_from_thread(self, gvr: GroupVersionResource, exc: BaseException) -> None:
        if self._loop is not None and getattr(exc, "code", None) == 403:
            call_on_loop(self._loop, self._forbidden, gvr, exc)

    def _forbidden(self, gvr: GroupVersionResource, exc: BaseException) -> None:
        """The gateway itself may not list or watch ``gvr``: a load waiting for it fails with 403.

        Its informer is stopped rather than left retrying for good; a request a
        little later tries again (the permission may have been granted since).
        """
        loading = self._syncing.get(gvr)
        if loading is None or loading.done():
            return  # a running cache whose rights were revoked: its informer retries, as client-go's
        error = StatusError(
            403, f"the gateway's own identity may not list and watch {gvr.resource}"
                 f"{'.' + gvr.group if gvr.group else ''}: grant its ServiceAccount get, list and "
                 f"watch on it (the API server said: {exc})", "Forbidden",
            {"kind": gvr.resource, **({"group": gvr.group} if gvr.group else {})})
        self._refused[gvr] = (time.monotonic() + _REFUSED_FOR, error)
        loading.set_exception(error)
        stopping = asyncio.get_running_loop().create_task(
            run_blocking(self.factory.stop_informer, gvr, "forbidden"))
        self._background.add(stopping)
        stopping.add_done_callback(self._background.discard)

    async def _reap_idle(self) -> None:
        interval = max(1.0, min(30.0, self.settings.idle_unload / 4))
        while True:
            await asyncio.sleep(interval)
            cutoff = time.monotonic() - self.settings.idle_unload
            for gvr, entry in list(self._entries.items()):
                if entry.prewarmed or entry.hub.subscribers or entry.last_used > cutoff:
                    continue
                log.info("unloading idle cache of %s", gvr)
                self._drop(gvr)
                await run_blocking(self.factory.stop_informer, gvr, "idle")

    # -- status -----------------------------------------------------------------------

    def entries(self) -> dict[GroupVersionResource, ResourceCache]:
        return dict(self._entries)

    def pending(self) -> list[GroupVersionResource]:
        return list(self._pending)

    async def api_server_reachable(self, max_age: float = HEARTBEAT_EVERY) -> bool:
        """Return whether the API server answered recently (asked at most every ``max_age`` s).

        It is asked ``/api``, a document the API server gives only to callers it
        authenticates (``/version`` it gives anyone): so the heartbeat also tells whether
        the gateway's own credentials still work. A 401 or 403 there is kept as
        ``credentials_problem`` (the cluster is then not ready: ``app.http.ops``) until
        the API server answers again. Never waits on a check in progress (a stopped API
        server takes seconds to not answer): meanwhile the last answer stands.

        The first answer after none: every informer backing off from the API server tries
        again within ``CATCH_UP_WITHIN`` seconds (``SharedInformerFactory.retry_now``), so
        the caches follow again seconds after the API server returns, not up to a minute.
        """
        checked_at, ok = self._reachable
        if time.monotonic() - checked_at < max_age or self._probing:
            return ok
        self._probing = True
        try:
            status, _ = await run_blocking(self.factory.discovery.get, "/api", 2.0)
            ok = status == 200
            if status in (401, 403):
                if self.credentials_problem is None:
                    log.error("the API server answers %d to the gateway's own credentials: the "
                              "caches cannot follow it (an expired token, or an exec plugin "
                              "that fails to refresh it?)", status)
                self.credentials_problem = (
                    f"the API server answers {status} {'Unauthorized' if status == 401 else 'Forbidden'}"
                    f" to the gateway's own credentials")
            elif ok:
                self.credentials_problem = None
        except ConnectionError:
            ok = False
        finally:
            self._probing = False
        if ok and self.api_server_away():
            log.info("the API server answers again: the caches follow it within %.0f s",
                     CATCH_UP_WITHIN)
            self.factory.retry_now(CATCH_UP_WITHIN)
        self._reachable = (time.monotonic(), ok)
        if ok:
            self.confirmed_at = time.time()
            self._confirmed_once = True
        return ok

    def ever_confirmed(self) -> bool:
        """Whether the API server has answered a heartbeat since this cache began."""
        return self._confirmed_once

    async def _beat(self) -> None:
        """The heartbeat: ask the API server every few seconds (see ``app.cache.answer_age``)."""
        while True:
            await self.api_server_reachable()
            await asyncio.sleep(HEARTBEAT_EVERY)

    def stale_since(self, entry: ResourceCache) -> float | None:
        """When ``entry`` was last known current, or ``None`` if it is now."""
        return stale_since(entry.informer.reflector_stats(), self.confirmed_at)

    def prewarm_ready(self) -> bool:
        """Return whether every pre-warmed resource has been loaded and synced once.

        Once true it stays true: a cache that synced keeps serving whatever happens to
        its API server afterwards (``app.http.ops``: readiness).
        """
        if not self._prewarmed_once and self._prewarm_resolved:
            self._prewarmed_once = all(self.ready_entry(g) is not None for g in self._prewarm_gvrs)
        return self._prewarmed_once

    def api_server_answers(self) -> bool:
        """Whether the API server answered the last heartbeat (no request made here)."""
        return self._reachable[1]

    def api_server_away(self) -> bool:
        """Whether the last heartbeat went unanswered (not before the first has been asked)."""
        checked_at, ok = self._reachable
        return checked_at > 0 and not ok
