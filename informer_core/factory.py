"""SharedInformerFactory: one shared informer per resource, started and stopped together.

``for_resource(gvr)`` resolves the resource through discovery at once (so an
unknown or unwatchable resource fails the caller, not a background thread)
and returns the one ``GenericInformer`` for it, however many threads ask.

Two seams make the factory run over anything, as client-go's factories run
over a fake clientset: ``lister_watcher_func(resource, namespace)`` builds
each informer's ``ListerWatcher`` (default: ``ApiListerWatcher`` over the
``ApiClient``), and ``discovery`` answers what the server serves. Given both,
no Kubernetes configuration is ever loaded.

A resource can disappear while its informer runs (a deleted CRD). client-go
retries such an informer for ever; here, when a list answers 404 and discovery
positively confirms the resource is gone (see ``Discovery.resource_gone``),
the informer is stopped, ``on_resource_gone`` is told, and the next
``for_resource`` for it builds a fresh one (or raises ``NotFoundError``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from informer_core.discovery import APIResource, Discovery, GroupVersionResource
from informer_core.errors import NotFoundError, UnsupportedResourceError
from informer_core.informer import SharedIndexInformer
from informer_core.lister import GenericLister
from informer_core.listwatch import (
    Abortable,
    ListerWatcher,
    ListOptions,
    ListPage,
    WatchStream,
    tweaked,
)
from informer_core.rest import ApiListerWatcher, RawClient
from informer_core.stop import StopEvent, when_set

__all__ = ["GenericInformer", "GroupVersionResource", "ListerWatcherFunc", "NotFoundError",
           "SharedInformerFactory", "UnsupportedResourceError", "default_api_client"]

ListerWatcherFunc = Callable[[APIResource, "str | None"], ListerWatcher]
"""Builds the ``ListerWatcher`` of one resource, in one namespace (``None``: all)."""

log = logging.getLogger(__name__)

_JOIN_TIMEOUT = 10.0


def default_api_client() -> Any:
    """Return an ``ApiClient`` from the kubeconfig, else from the in-cluster environment."""
    from kubernetes import client, config

    try:
        return config.new_client_from_config()
    except (config.ConfigException, FileNotFoundError, OSError):
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)
        return client.ApiClient(configuration)


_SAME = object()  # ``sibling``: the namespace of the factory it is made from


class GenericInformer:
    """An informer for one resource, with its lister."""

    def __init__(self, informer: SharedIndexInformer, resource: APIResource) -> None:
        self._informer = informer
        self.resource = resource
        self._lister = GenericLister(informer.get_indexer(), resource.resource)
        self.stop_event = StopEvent()  # tells the informer's threads, which need not poll
        self.thread: threading.Thread | None = None
        self.gone_reason: str = ""

    def informer(self) -> SharedIndexInformer:
        return self._informer

    def lister(self) -> GenericLister:
        return self._lister

    @property
    def gvr(self) -> GroupVersionResource:
        return self.resource.gvr

    def stopped(self) -> bool:
        """Return whether this informer was told to stop (gone, unloaded or shut down)."""
        return self.stop_event.is_set()


class SharedInformerFactory:
    """Hands out shared informers per resource and runs them.

    Args:
        api_client: a ``kubernetes.client.ApiClient``; ``None`` loads the default
            configuration (kubeconfig, else in-cluster).
        default_resync: resync period of every informer (0: none).
        namespace: watch only this namespace (``None``: all).
        tweak_list_options: applied to every list and watch request.
        page_size: ``limit`` of each list page.
        transform: applied to every object before it is cached or delivered.
        discovery: a ``Discovery`` to share (one is made otherwise).
        on_resource_gone: ``fn(gvr, reason)`` when an informer is stopped because
            its resource no longer exists (or the informer itself failed).
        configure_informer: ``fn(gvr, informer)`` for each new informer, before it runs
            (to add handlers or indexers).
        lister_watcher_func: ``fn(resource, namespace) -> ListerWatcher`` for each new
            informer (default: ``ApiListerWatcher`` over ``api_client``);
            ``tweak_list_options`` is applied to its calls.
        metadata_only: ``fn(resource) -> bool``: the resources whose informers keep only
            ``PartialObjectMetadata``, asked of the API server in that form (as client-go's
            metadata informer factory does); a ``lister_watcher_func`` decides for itself.
    """

    def __init__(self, api_client: Any = None, default_resync: float = 0.0,
                 namespace: str | None = None,
                 tweak_list_options: Callable[[ListOptions], None] | None = None, *,
                 page_size: int = 500,
                 transform: Callable[[dict], dict] | None = None,
                 discovery: Discovery | None = None,
                 on_resource_gone: Callable[[GroupVersionResource, str], None] | None = None,
                 configure_informer: Callable[[GroupVersionResource, SharedIndexInformer], None] | None = None,
                 lister_watcher_func: ListerWatcherFunc | None = None,
                 metadata_only: Callable[[APIResource], bool] | None = None,
                 ) -> None:
        self._api_client = api_client
        self._on_any_watch_error: Callable[[GroupVersionResource, BaseException], None] | None = None
        self._client_lock = threading.Lock()  # guards loading _api_client
        self._documents: RawClient | None = None  # ``get_document``'s, made on first use
        self._lister_watcher_func = lister_watcher_func
        self.metadata_only = metadata_only or (lambda resource: False)
        self.default_resync = default_resync
        self.namespace = namespace or None
        self._tweak = tweak_list_options
        self._page_size = page_size
        self._transform = transform
        self.discovery = discovery or Discovery(self.api_client)
        self._on_resource_gone = on_resource_gone
        self._configure = configure_informer
        self._lock = threading.Lock()  # guards everything below
        self._informers: dict[GroupVersionResource, GenericInformer] = {}
        self._stops: list[threading.Event] = []
        self._relays: list[threading.Thread] = []  # following stop events that cannot tell
        self._forgets: list[Callable[[], None]] = []  # ... and those that can
        self._retired: list[GenericInformer] = []
        self._shutting_down = False

    def sibling(self, *, transform: Callable[[dict], dict] | None = None,
                metadata_only: Callable[[APIResource], bool] | None = None,
                namespace: str | None | object = _SAME) -> SharedInformerFactory:
        """A factory of its own over the same cluster: the same client, discovery and source
        of lister-watchers, with none of this one's informers, resync, list tweaks or
        metadata-only resources (``transform``, ``metadata_only``: its own; ``namespace``:
        this one's unless given, ``None`` for all). For informers that must not share
        another user's settings or lifetime (client-go's answer is the same: a second
        factory)."""
        client = self._api_client if self._lister_watcher_func is not None else self.api_client
        return SharedInformerFactory(
            client, namespace=self.namespace if namespace is _SAME else namespace,
            page_size=self._page_size, transform=transform, discovery=self.discovery,
            lister_watcher_func=self._lister_watcher_func, metadata_only=metadata_only)

    def get_document(self, path: str,
                     accept: str = "application/json") -> tuple[int, Any]:
        """GET a document of the server that is not an API object (``/openid/v1/jwks``, served
        as ``application/jwk-set+json``): (HTTP status, the parsed JSON or ``None``). On the
        factory's own client; over lister-watchers of its own (an in-memory cluster), its
        discovery's answer, so that such a factory never reaches a real server. Blocking.

        Raises:
            ConnectionError: the server could not be reached.
        """
        if self._lister_watcher_func is not None:
            return self.discovery.get(path)
        with self._client_lock:
            client = self._documents
        if client is None:
            client = RawClient(self.api_client)
            with self._client_lock:
                self._documents = client
        status, body, _ = client.get_raw(path, accept, read_timeout=10.0)
        try:
            return status, orjson.loads(body) if body else None
        except orjson.JSONDecodeError:
            return status, None

    @property
    def api_client(self) -> Any:
        """The ``ApiClient``; the default configuration is loaded on first use."""
        with self._client_lock:
            if self._api_client is None:
                self._api_client = default_api_client()
            return self._api_client

    # -- informers ---------------------------------------------------------------

    def for_resource(self, gvr: GroupVersionResource | tuple[str, str, str]) -> GenericInformer:
        """Return the shared informer for ``gvr``, creating it on first use.

        Raises:
            NotFoundError: the server does not serve the resource.
            UnsupportedResourceError: it cannot be listed and watched.
        """
        gvr = GroupVersionResource(*gvr)
        with self._lock:
            existing = self._informers.get(gvr)
            if existing is not None and not existing.stopped():
                return existing
        resource = self.discovery.resolve(gvr)  # outside the lock: it may do I/O
        with self._lock:
            existing = self._informers.get(gvr)
            if existing is not None and not existing.stopped():
                return existing
            if existing is not None:
                self._retired = [g for g in self._retired if g.thread is not None and g.thread.is_alive()]
                self._retired.append(existing)
            generic = self._new_informer(resource)
            self._informers[gvr] = generic
        if self._configure is not None:
            self._configure(gvr, generic.informer())
        return generic

    def _new_lister_watcher(self, resource: APIResource) -> ListerWatcher:
        namespace = self.namespace if resource.namespaced else None
        if self._lister_watcher_func is None:
            return ApiListerWatcher(
                self.api_client, resource.path, namespaced=resource.namespaced,
                namespace=namespace, tweak_list_options=self._tweak,
                api_version=resource.api_version, kind=resource.kind,
                metadata_only=self.metadata_only(resource))
        inner = self._lister_watcher_func(resource, namespace)
        return inner if self._tweak is None else _TweakedListerWatcher(inner, self._tweak)

    def _new_informer(self, resource: APIResource) -> GenericInformer:
        lister_watcher = self._new_lister_watcher(resource)
        informer = SharedIndexInformer(lister_watcher, resync_period=self.default_resync,
                                       page_size=self._page_size, name=str(resource.gvr))
        if self._transform is not None:
            informer.set_transform(self._transform)
        generic = GenericInformer(informer, resource)
        informer.set_watch_error_handler(lambda exc: self._on_watch_error(generic, exc))
        return generic

    def set_on_resource_gone(
            self, callback: Callable[[GroupVersionResource, str], None] | None) -> None:
        """Set the callback told when an informer is stopped because its resource is gone."""
        self._on_resource_gone = callback

    def set_on_watch_error(
            self, callback: Callable[[GroupVersionResource, BaseException], None] | None) -> None:
        """Set ``fn(gvr, exc)``, told of every failed list or watch of any informer.

        Called on the informer's reflector thread, before the informer retries
        (e.g. to stop waiting for a sync that a 403 will never let happen).
        """
        self._on_any_watch_error = callback

    def informers(self) -> dict[GroupVersionResource, GenericInformer]:
        """Return the current informers by resource (stopped ones included until replaced)."""
        with self._lock:
            return dict(self._informers)

    # -- running -------------------------------------------------------------------

    def retry_now(self, within: float = 0.0) -> None:
        """The API server answers again: every informer backing off from it tries at a
        random moment in the next ``within`` seconds (``Reflector.retry_now``), instead
        of up to a minute later."""
        for generic in self.informers().values():
            generic.informer().retry_now(within)

    def start(self, stop: threading.Event) -> None:
        """Start every informer not yet started; informers stop when ``stop`` is set.

        Idempotent: informers already running are left alone. Does nothing after
        ``shutdown``.
        """
        with self._lock:
            if self._shutting_down:
                return
            new = not any(s is stop for s in self._stops)
            if new:
                self._stops.append(stop)
            pending = [g for g in self._informers.values()
                       if g.thread is None and not g.stopped()]
            for generic in pending:
                if stop.is_set():
                    generic.stop_event.set()
                    continue
                generic.thread = threading.Thread(
                    target=self._run_informer, args=(generic,),
                    name=f"informer-{generic.gvr}", daemon=True)
                generic.thread.start()
        if new:
            self._follow(stop)

    def _follow(self, stop: threading.Event) -> None:
        """Stop every informer when ``stop`` is set: told by it (``informer_core.stop``),
        or, for an event that cannot tell, by a thread looking at it every 0.2 s."""
        forget = when_set(stop, self._stop_all)  # outside the lock: it may call back now
        with self._lock:
            if forget is not None:
                self._forgets.append(forget)
                return
            relay = threading.Thread(target=self._relay_stop, args=(stop,),
                                     name="informer-factory-stop", daemon=True)
            self._relays.append(relay)
            relay.start()

    def _run_informer(self, generic: GenericInformer) -> None:
        try:
            generic.informer().run(generic.stop_event)
        except Exception as exc:  # noqa: BLE001 - a broken informer must not go unnoticed
            log.exception("informer %s failed", generic.gvr)
            self._retire(generic, f"the informer of {generic.gvr} failed: {exc}")

    def _relay_stop(self, stop: threading.Event) -> None:
        while not stop.wait(0.2):
            if self._shutting_down:
                return
        self._stop_all()

    def _stop_all(self) -> None:
        with self._lock:
            informers = list(self._informers.values()) + list(self._retired)
        for generic in informers:
            generic.stop_event.set()

    def wait_for_cache_sync(self, stop: threading.Event | None = None,
                            timeout: float | None = None) -> dict[GroupVersionResource, bool]:
        """Wait until every started informer has synced, ``stop`` is set, or ``timeout`` passes.

        Returns each started informer's sync state.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                started = {gvr: g for gvr, g in self._informers.items() if g.thread is not None}
            state = {gvr: g.informer().has_synced() for gvr, g in started.items()}
            if all(state.values()):
                return state
            if stop is not None and stop.is_set():
                return state
            if deadline is not None and time.monotonic() >= deadline:
                return state
            time.sleep(0.02)

    def stop_informer(self, gvr: GroupVersionResource, reason: str = "stopped") -> bool:
        """Stop one informer (e.g. idle); the next ``for_resource`` makes a fresh one.

        Returns whether there was a running informer to stop.
        """
        gvr = GroupVersionResource(*gvr)
        with self._lock:
            generic = self._informers.get(gvr)
            if generic is None or generic.stopped():
                return False
            generic.gone_reason = reason
            generic.stop_event.set()
            thread = generic.thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(_JOIN_TIMEOUT)
        return True

    def shutdown(self) -> None:
        """Stop every informer and join every thread the factory started."""
        with self._lock:
            self._shutting_down = True
            informers = list(self._informers.values()) + list(self._retired)
            relays = list(self._relays)
            forgets, self._forgets = self._forgets, []
        for forget in forgets:  # the callers' stop events hold nothing of the factory's
            forget()
        for generic in informers:
            generic.stop_event.set()
        for generic in informers:
            if generic.thread is not None:
                generic.thread.join(_JOIN_TIMEOUT)
                if generic.thread.is_alive():
                    log.error("informer %s did not stop within %s s", generic.gvr, _JOIN_TIMEOUT)
        for relay in relays:
            relay.join(_JOIN_TIMEOUT)

    # -- a resource that goes away ----------------------------------------------------

    def _on_watch_error(self, generic: GenericInformer, exc: BaseException) -> None:
        told = self._on_any_watch_error
        if told is not None:
            try:
                told(generic.gvr, exc)
            except Exception:  # noqa: BLE001 - a listener's bug must not stop the informer
                log.exception("on_watch_error callback failed for %s", generic.gvr)
        if not isinstance(exc, NotFoundError) or generic.stopped():
            return
        gvr = generic.gvr
        if not self.discovery.resource_gone(gvr):
            log.info("%s: 404, but discovery does not confirm the resource is gone; retrying", gvr)
            return
        reason = f"resource {gvr} no longer exists on the server"
        log.warning("%s: stopping its informer", reason)
        self._retire(generic, reason)

    def _retire(self, generic: GenericInformer, reason: str) -> None:
        """Stop an informer that cannot go on; the next ``for_resource`` makes a fresh one."""
        generic.gone_reason = reason
        generic.stop_event.set()
        if self._on_resource_gone is not None:
            try:
                self._on_resource_gone(generic.gvr, reason)
            except Exception:  # noqa: BLE001
                log.exception("on_resource_gone callback failed for %s", generic.gvr)


class _TweakedListerWatcher:
    """Applies ``tweak_list_options`` to every call of an injected ``ListerWatcher``."""

    def __init__(self, inner: ListerWatcher, tweak: Callable[[ListOptions], None]) -> None:
        self._inner = inner
        self._tweak = tweak

    def list(self, options: ListOptions) -> ListPage:
        return self._inner.list(tweaked(options, self._tweak))

    def watch(self, options: ListOptions) -> WatchStream:
        return self._inner.watch(tweaked(options, self._tweak))

    def abort(self) -> None:
        if isinstance(self._inner, Abortable):
            self._inner.abort()
