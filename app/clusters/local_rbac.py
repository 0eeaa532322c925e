"""A cluster's RBAC followed here, so that the gateway decides as the API server decides.

The API server authorizes every request against the RBAC objects it holds in memory. A
gateway that asks it instead (``SubjectAccessReview``) and keeps the answers for minutes
serves a revoked binding for minutes, and costs every new caller a round trip. So each
cluster's Roles, ClusterRoles, RoleBindings and ClusterRoleBindings are followed by
informers of their own — one LIST, then a WATCH, as for any resource — into the
cluster's ``RBAC`` (``app.auth.rbac``), which ``AccessReviews`` reads first.

When it may decide (``RBAC.deciding``), and why it fails closed:

- only once all four are synced: until then every question is the cluster's, as before,
  so a gateway that starts answers no early 403 while its index fills;
- only while all four follow the cluster: a watch that ended and has not been opened
  again within ``stale_after`` seconds (the API server away, the gateway's own right to
  watch RBAC revoked) stops local decisions until it follows again — the reviews that
  then decide fail as the API server does (503), rather than allow from a past state.
  ``stale_after`` is the time an allow of a review was kept before (``--authz-cache-ttl``,
  at least ``STALE_AFTER``): while it cannot see its cluster the gateway goes on as it did
  with its kept answers, no longer — so an API server restarting, or away for a minute,
  does not end every open stream with a 503;
- never where the cluster's authorizer chain may deny before RBAC allows: a webhook
  authorizer (or ``AlwaysDeny``) in front of RBAC refuses what RBAC would allow. With
  ``--authz-local-rbac auto`` (the default) that is detected as the API server tells it,
  by a ``SelfSubjectRulesReview`` whose rules are ``incomplete`` (a webhook cannot list
  its rules); ``false`` is the operator's word where a detection cannot see (an
  ``AlwaysDeny``, a webhook the review does not report), ``true`` skips the detection.
  The setting is the operator's alone: a flag, or the clusters file — never a Secret.

How far behind it may be: as far as the API server's watch is behind its storage (the
API server's own RBAC is followed the same way, through the same watch cache), plus
the informer's handling of one change — measured in ``tests/app/clusters/
test_local_rbac_live.py``. A change is in effect for the next request once its event has
arrived; open streams are woken to check again (``Cluster.access_changed``).

The informers are the cluster's but not its caches': a factory of their own, so that no
``--metadata-only`` setting, idle unloading or policy of the served resources reaches
them (they are never served from here; a caller reading roles gets the served cache).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from app.auth.rbac import RBAC
from app.bridge import run_blocking
from app.clusters.config import LOCAL_RBAC_MODES as MODES
from informer_core.errors import APIStatusError, NotFoundError
from informer_core.factory import GenericInformer, GroupVersionResource, SharedInformerFactory
from informer_core.tombstone import DeletedFinalStateUnknown

__all__ = ["MODES", "STALE_AFTER", "LocalRBAC", "following"]

log = logging.getLogger(__name__)

GROUP, VERSION = "rbac.authorization.k8s.io", "v1"
KINDS = {"roles": "Role", "clusterroles": "ClusterRole", "rolebindings": "RoleBinding",
         "clusterrolebindings": "ClusterRoleBinding"}
STALE_AFTER = 5.0  # the least seconds an RBAC watch may be closed and RBAC still decide
CHECK_EVERY = 1.0  # seconds between looks at whether the watches follow
DETECT_RETRY = 5.0  # seconds between tries of the detection while the cluster cannot answer


def following(informers: Iterable[GenericInformer], stale_after: float) -> bool:
    """Whether every one of ``informers`` follows its cluster: running, and its watch open or
    closed for no longer than ``stale_after`` seconds (what may decide from them)."""
    now = time.time()
    for generic in informers:
        stats = generic.informer().reflector_stats()
        if stats is None or generic.stopped():
            return False
        if not stats.watching and now - stats.unwatched_since > stale_after:
            return False
    return True


class _Feed:
    """The handler of one RBAC informer: each change into ``RBAC``, on the informer's own
    thread (``InlineHandler``: a lock and a few dictionaries, never I/O)."""

    runs_inline = True

    def __init__(self, rbac: RBAC, kind: str, synced: Callable[[str], None]) -> None:
        self._rbac, self._kind, self._synced = rbac, kind, synced

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        self._set(obj)

    def on_update(self, old: Any, new: Any) -> None:
        self._set(new)

    def on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        if not isinstance(obj, dict):
            return
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        rbac, kind = self._rbac, self._kind
        if kind == "Role":
            rbac.delete_role(namespace, name)
        elif kind == "ClusterRole":
            rbac.delete_cluster_role(name)
        else:
            rbac.delete_binding(kind, namespace, name)

    def on_synced(self) -> None:
        self._synced(self._kind)

    def _set(self, obj: Any) -> None:
        if not isinstance(obj, dict):
            return
        rbac, kind = self._rbac, self._kind
        if kind == "Role":
            rbac.set_role(obj)
        elif kind == "ClusterRole":
            rbac.set_cluster_role(obj)
        else:
            rbac.set_binding(kind, obj)


class LocalRBAC:
    """One cluster's RBAC, followed, and whether it may decide (see the module).

    Args:
        factory: makes a factory of the cluster's own (``SharedInformerFactory.sibling``;
            blocking: it may load the cluster's configuration).
        mode: ``auto``, ``true`` or ``false`` (see the module).
        rules_review: ``fn(namespace) -> status`` of a ``SelfSubjectRulesReview`` by the
            gateway's own identity (blocking), for ``auto``; ``None``: cannot detect, so
            ``auto`` decides nothing here.
        on_change: called after each change of what decides (on the writing thread).
        stale_after: seconds a watch of RBAC may stay closed before RBAC stops deciding.
    """

    def __init__(self, name: str, factory: Callable[[], SharedInformerFactory], mode: str,
                 rules_review: Callable[[str], dict] | None,
                 on_change: Callable[[], None] | None = None,
                 stale_after: float = STALE_AFTER) -> None:
        if mode not in MODES:
            raise ValueError(f"local RBAC must be one of {', '.join(MODES)}, not {mode!r}")
        self.rbac = RBAC()
        self.name = name  # the cluster's, for the log
        self.stale_after = stale_after
        self.mode = mode
        self._make_factory = factory
        self._factory: SharedInformerFactory | None = None
        self._rules_review = rules_review
        self._synced: set[str] = set()
        self._informers: list[GenericInformer] = []
        self._stop = threading.Event()
        self._task: asyncio.Task | None = None
        self.started_at = 0.0  # monotonic
        self._refused = False  # the gateway may not list or watch RBAC here (said once)
        self.state = "off: --authz-local-rbac false" if mode == "false" else "starting"
        if on_change is not None:
            self.rbac.on_change(on_change)

    @property
    def settled(self) -> bool:
        """Whether it decides, or will not (so a cluster's readiness need not wait for it):
        a gateway refused the right to list RBAC will not, until an operator grants it."""
        return self._refused or not self.state.startswith(("starting", "syncing", "detecting"))

    def waited(self, seconds: float) -> bool:
        """Whether it has been following (or trying to) for ``seconds`` or more."""
        return bool(self.started_at) and time.monotonic() - self.started_at >= seconds

    async def start(self) -> None:
        """Begin following (in the background: a cluster is served at once, asking the
        cluster until RBAC is synced here)."""
        if self.mode == "false" or self._task is not None:
            return
        self.started_at = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop deciding and following; join the informers' threads."""
        self.rbac.decide(False)
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        if self._factory is not None:
            await run_blocking(self._factory.shutdown)

    async def _run(self) -> None:
        if self.mode == "auto" and not await self._detect():
            return
        self.state = "syncing"
        self._factory = factory = await run_blocking(self._make_factory)
        factory.set_on_watch_error(self._failed)
        for resource, kind in KINDS.items():
            while True:
                try:
                    generic = await run_blocking(factory.for_resource,
                                                 (GROUP, VERSION, resource))
                    break
                except NotFoundError:
                    self.state = "off: the cluster serves no RBAC API"
                    log.warning("cluster %s: its RBAC is not followed: the API server serves no "
                                "%s/%s %s", self.name, GROUP, VERSION, resource)
                    return
                except Exception as exc:  # discovery failed: the API server away
                    log.info("cluster %s: cannot yet follow its RBAC: %s", self.name, exc)
                    await asyncio.sleep(DETECT_RETRY)
            generic.informer().add_event_handler(_Feed(self.rbac, kind, self._synced.add))
            self._informers.append(generic)
        factory.start(self._stop)
        while not self._stop.is_set():
            deciding = self._follows()
            if deciding != self.rbac.deciding:
                (log.info if deciding else log.warning)(
                    "cluster %s: its RBAC %s", self.name,
                    "is followed: accesses RBAC allows are decided here" if deciding else
                    "is not followed now: every access is asked of the cluster")
            self.rbac.decide(deciding)
            if deciding:
                self.state = "deciding"
            elif len(self._synced) == len(KINDS):
                self.state = "behind: an RBAC watch is closed"
            await asyncio.sleep(CHECK_EVERY)

    def _failed(self, gvr: GroupVersionResource, exc: BaseException) -> None:
        """A list or watch of RBAC failed (its informer tries again): a 403 is the operator's
        to mend, said once; meanwhile reviews decide."""
        if isinstance(exc, APIStatusError) and exc.code == 403 and not self._refused:
            self._refused = True
            log.warning("cluster %s: the gateway may not list and watch %s, so accesses are "
                        "asked of the cluster, not decided here: give its ClusterRole get, "
                        "list and watch on roles, clusterroles, rolebindings and "
                        "clusterrolebindings (the chart's has them)", self.name, gvr.resource)

    def _follows(self) -> bool:
        """Synced, and every watch open or reopened within ``stale_after``."""
        return len(self._synced) == len(KINDS) and following(self._informers, self.stale_after)

    async def _detect(self) -> bool:
        """Whether the cluster's authorizers let RBAC's allows stand (``auto``): a rules
        review of the gateway's own that is not ``incomplete``. Tried until answered."""
        if self._rules_review is None:
            self.state = "off: the cluster's authorizers cannot be asked"
            return False
        self.state = "detecting"
        while True:
            try:
                status = await run_blocking(self._rules_review, "default")
                break
            except Exception as exc:  # the API server away: ask again, ask reviews meanwhile
                log.info("cluster %s: cannot yet ask whether RBAC decides alone: %s",
                         self.name, exc)
                await asyncio.sleep(DETECT_RETRY)
        if status.get("incomplete"):
            self.state = ("off: the cluster's authorizers include one that lists no rules "
                          "(a webhook); set localRBAC true if it never denies")
            log.warning("cluster %s: RBAC is not decided here: the cluster's authorizers include "
                        "one whose rules cannot be listed (a webhook), which may deny what RBAC "
                        "allows; every access is asked of the cluster (set --authz-local-rbac "
                        "true, or localRBAC: true for this cluster, if it never denies)",
                        self.name)
            return False
        return True
