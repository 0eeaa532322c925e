"""The identity cluster's ServiceAccount tokens, judged here: its keys and the objects they
are bound to, followed.

The API server verifies a ServiceAccount token with its own public keys, then checks that
the account, and the Pod or Node the token is bound to, still exist with the UIDs the token
names. ``ServiceAccountTokens`` (``app.auth.service_account_tokens``) does the same from what
this module keeps current for it:

- the issuer and its keys: ``/.well-known/openid-configuration`` and ``/openid/v1/jwks``,
  always asked of the API server itself, with the gateway's own credentials (the discovery
  document's ``jwks_uri`` names an address the API server advertises, which the gateway
  need not reach), fetched again every ``KEYS_EVERY`` seconds and whenever a token names a
  ``kid`` not held (at most once a second, one fetch for every caller waiting on it);
- the ServiceAccounts, Pods and Nodes of every namespace, metadata only, and of that only
  name, UID and deletion time (about 0.4 KiB an object): informers of a factory of their
  own, so no setting of the served caches (``--namespace``, ``--metadata-only``, idle
  unloading) reaches them. Each change is handed to the verifier, which revokes the
  identities resting on an object deleted or replaced; open streams are then woken
  (``on_change``) and end with their next check.

It fails closed, towards ``TokenReview``: until the keys are held and the three informers
synced, while one of their watches has been closed for more than ``stale_after`` seconds
(as for RBAC: ``app.clusters.local_rbac``), where the gateway may not read the keys or list
the objects (said once in the log), every token is asked of the cluster, as before. It is an
operator's setting, ``--authn-local-tokens`` (on by default), never read from a Secret.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from app.auth.service_account_tokens import ServiceAccountTokens, SigningKeys
from app.bridge import run_blocking
from app.clusters.local_rbac import following
from informer_core.errors import APIStatusError, NotFoundError
from informer_core.factory import GenericInformer, GroupVersionResource, SharedInformerFactory
from informer_core.pages import metadata_transform
from informer_core.tombstone import DeletedFinalStateUnknown

__all__ = ["KINDS", "LocalTokens", "identity_metadata"]

log = logging.getLogger(__name__)

KINDS = ("serviceaccounts", "pods", "nodes")  # what tokens are bound to, core/v1
KEYS_EVERY = 300.0  # seconds between two fetches of the keys (a rotation drops a key)
REFETCH_AT_MOST_EVERY = 1.0  # seconds between fetches for a kid not held
CHECK_EVERY = 1.0  # seconds between looks at the watches and at objects being deleted
RETRY_EVERY = 30.0  # seconds between tries while the keys cannot be had
_KEPT = ("name", "namespace", "uid", "deletionTimestamp", "resourceVersion")


@metadata_transform
def identity_metadata(obj: dict) -> dict:
    """What a token's checks read of an object: its name, UID and deletion time."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        obj["metadata"] = {k: meta[k] for k in _KEPT if k in meta}
    return obj


class _Follow:
    """One informer's changes, into the verifier (``InlineHandler``: a lock, a few sets)."""

    runs_inline = True

    def __init__(self, tokens: ServiceAccountTokens, kind: str,
                 synced: Callable[[str], None]) -> None:
        self._tokens, self._kind, self._synced = tokens, kind, synced

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        self._changed(obj, True)

    def on_update(self, old: Any, new: Any) -> None:
        self._changed(new, True)

    def on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        self._changed(obj, False)

    def on_synced(self) -> None:
        self._synced(self._kind)

    def _changed(self, obj: Any, present: bool) -> None:
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if not isinstance(meta, dict):
            return
        self._tokens.object_changed(self._kind, str(meta.get("namespace") or ""),
                                    str(meta.get("name") or ""), meta if present else None)


class LocalTokens:
    """The identity cluster's keys and bound objects, followed for ``tokens``; see the module.

    Args:
        factory: makes the factory of its informers (blocking: it may load the cluster's
            configuration); all namespaces, metadata only, ``identity_metadata``.
        fetch: ``fn(path) -> (status, document)``: a GET of the API server (blocking).
        on_change: called after identities were revoked (on the thread that revoked them).
        stale_after: seconds a watch may stay closed before tokens are asked again.
    """

    def __init__(self, name: str, tokens: ServiceAccountTokens,
                 factory: Callable[[], SharedInformerFactory],
                 fetch: Callable[[str], tuple[int, Any]],
                 on_change: Callable[[], None] | None = None,
                 stale_after: float = 5.0) -> None:
        self.name = name  # the cluster's, for the log
        self.tokens = tokens
        self.stale_after = stale_after
        self._make_factory = factory
        self._fetch = fetch
        self._factory: SharedInformerFactory | None = None
        self._informers: dict[str, GenericInformer] = {}
        self._synced: set[str] = set()
        self._stop = threading.Event()
        self._task: asyncio.Task | None = None
        self._fetching: asyncio.Task | None = None
        self._fetched_at = 0.0  # monotonic, when the last fetch of the keys began
        self._refused: set[str] = set()  # what the gateway may not read here (said once)
        self.state = "starting"
        self._started_at = 0.0  # monotonic
        tokens.objects = self
        tokens.following = self._follows
        tokens.refresh = self.refresh
        if on_change is not None:
            tokens.on_revoke = on_change

    @property
    def deciding(self) -> bool:
        return self.tokens.deciding

    @property
    def started(self) -> bool:
        return self._task is not None

    @property
    def settled(self) -> bool:
        """Whether it judges tokens, or will not soon (so readiness need not wait for it): the
        gateway may not read the keys or the objects, until an operator lets it."""
        return self.deciding or bool(self._refused) or self.state.startswith("off")

    def waited(self, seconds: float) -> bool:
        """Whether it has been following (or trying to) for ``seconds`` or more."""
        return bool(self._started_at) and time.monotonic() - self._started_at >= seconds

    def start(self) -> None:
        """Begin following (in the background, on the running loop: until it decides, tokens
        are reviewed)."""
        if self._task is None and not self._stop.is_set():
            self._started_at = time.monotonic()
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop judging tokens and following; join the informers' threads."""
        self._stop.set()
        self.tokens.following = lambda: False
        for task in (self._task, self._fetching):
            if task is not None:
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
        if self._factory is not None:
            await run_blocking(self._factory.shutdown)
        self.tokens.forget_all()

    async def refresh(self) -> None:
        """Fetch the keys again, for a ``kid`` not held: one fetch for all who wait, begun
        after they asked, and none sooner than ``REFETCH_AT_MOST_EVERY`` after the last."""
        asked_at = time.monotonic()
        while True:
            fetching = self._fetching
            if fetching is not None and not fetching.done():
                await asyncio.shield(fetching)
                if self._fetched_at >= asked_at:
                    return
                continue
            if self._fetched_at >= asked_at:
                return
            wait = self._fetched_at + REFETCH_AT_MOST_EVERY - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            self._fetching = asyncio.get_running_loop().create_task(self._fetch_keys())
            await asyncio.shield(self._fetching)
            return

    async def _fetch_keys(self) -> bool:
        """The issuer and its keys, from the API server; ``False`` (logged) when not had."""
        self._fetched_at = time.monotonic()
        try:
            code, config = await run_blocking(self._fetch, "/.well-known/openid-configuration")
            if code == 200 and isinstance(config, dict) and config.get("issuer"):
                code, jwks = await run_blocking(self._fetch, "/openid/v1/jwks")
                if code == 200 and isinstance(jwks, dict):
                    keys = SigningKeys.from_jwks(str(config["issuer"]), jwks)
                    if self.tokens.keys != keys:
                        self.tokens.keys_changed(keys)
                    return True
        except Exception as exc:  # the API server away, a document unlike the API server's
            self._say_once("keys", f"its keys cannot be read now ({exc}): every token is "
                                   f"reviewed (TokenReview)")
            return False
        why = ("the gateway's identity needs get on /.well-known/openid-configuration and "
               "/openid/v1/jwks (the ClusterRole system:service-account-issuer-discovery grants "
               "it)" if code in (401, 403) else "the API server does not publish them "
               "(ServiceAccountIssuerDiscovery, Kubernetes 1.18 and later)")
        self._say_once("keys", f"its ServiceAccount issuer keys cannot be read (HTTP {code}): "
                               f"every token is reviewed (TokenReview); {why}")
        return False

    async def _run(self) -> None:
        self.state = "fetching keys"
        while not await self._fetch_keys():
            await asyncio.sleep(RETRY_EVERY)
        self._refused.discard("keys")
        try:
            _, version = await run_blocking(self._fetch, "/version")
            self.tokens.server_minor = int(str(version.get("minor", "0")).rstrip("+") or 0)
        except Exception:  # noqa: BLE001 - unknown: the extra of the oldest API servers
            self.tokens.server_minor = 0
        self.state = "syncing"
        self._factory = factory = await run_blocking(self._make_factory)
        factory.set_on_watch_error(self._failed)
        for kind in KINDS:
            while not self._stop.is_set():
                try:
                    generic = await run_blocking(factory.for_resource, ("", "v1", kind))
                    break
                except NotFoundError:
                    self.state = f"off: the cluster serves no {kind}"
                    return
                except Exception as exc:  # discovery failed: the API server away
                    log.info("cluster %s: cannot yet follow %s for tokens: %s", self.name, kind, exc)
                    await asyncio.sleep(RETRY_EVERY)
            generic.informer().add_event_handler(_Follow(self.tokens, kind, self._synced.add))
            self._informers[kind] = generic
        factory.start(self._stop)
        keys_at = time.monotonic()
        while not self._stop.is_set():
            deciding = self.tokens.deciding
            if deciding != (self.state == "deciding"):
                (log.info if deciding else log.warning)(
                    "cluster %s: %s", self.name,
                    "its ServiceAccount tokens are verified here" if deciding else
                    "its ServiceAccount tokens are reviewed (TokenReview): a watch of the "
                    "objects they are bound to is closed")
            self.state = "deciding" if deciding else (
                "behind: a watch is closed" if len(self._synced) == len(KINDS) else "syncing")
            self.tokens.expire()
            if time.monotonic() - keys_at >= KEYS_EVERY:
                keys_at = time.monotonic()
                await self.refresh()
            await asyncio.sleep(CHECK_EVERY)

    def _failed(self, gvr: GroupVersionResource, exc: BaseException) -> None:
        if isinstance(exc, APIStatusError) and exc.code == 403:
            self._say_once(gvr.resource, f"the gateway may not list and watch {gvr.resource}, "
                                         f"so tokens bound to them are reviewed (TokenReview): "
                                         f"give its ClusterRole get, list and watch on "
                                         f"serviceaccounts, pods and nodes (the chart's has them)")

    def _say_once(self, what: str, message: str) -> None:
        if what not in self._refused:
            self._refused.add(what)
            log.warning("cluster %s: %s", self.name, message)

    def _follows(self) -> bool:
        """Synced, and every watch open or reopened within ``stale_after``."""
        return (len(self._synced) == len(KINDS) and not self._stop.is_set()
                and following(self._informers.values(), self.stale_after))

    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        """``BoundObjects``: the metadata of the object held, or ``None``."""
        generic = self._informers.get(kind)
        if generic is None:
            return None
        key = f"{namespace}/{name}" if namespace else name
        obj = generic.informer().get_indexer().get_by_key(key)
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        return meta if isinstance(meta, dict) else None
