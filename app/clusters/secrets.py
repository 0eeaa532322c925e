"""Clusters from Secrets: Argo CD's cluster-secret shape, watched in the gateway's namespace.

A Secret labelled ``kube-cache-gateway.io/cluster: "true"`` in the gateway's own
namespace names one cluster (``--cluster-secrets``)::

    metadata:
      annotations:                       # optional: how this cluster knows the callers
        kube-cache-gateway.io/user-prefix: "oidc:"
        kube-cache-gateway.io/group-prefix: "oidc:"
    data:
      name:   prod                       # a DNS label: it is used in paths
      server: https://prod.example:6443
      config: {"bearerToken": "...", "tlsClientConfig": {"caData": "..."}}

— the shape Argo CD's cluster Secrets have (``config`` may also hold
``execProviderConfig``, ``tlsClientConfig.certData``/``keyData``/``serverName``/``insecure``
and ``proxyUrl``: ``app.clusters.connect.kubeconfig_of_secret``), so a fleet's Secrets can
be labelled for the gateway too. The Secrets are watched with this project's own informer
(one LIST, then a WATCH, selected by the label on the server), so a cluster comes, changes
and goes as its Secret does. They hold the gateway's credentials to its clusters: they are
never served (``--cluster-secrets`` needs ``secrets`` denied, as by default), and nothing
read from them reaches an answer but the cluster's name.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import threading
from typing import Any

from app.bridge import call_on_loop, run_blocking
from app.clusters.config import ClusterSpec, ClustersError, check_name
from app.clusters.sources import Said
from informer_core.informer import ResourceEventHandlerFuncs, SharedIndexInformer
from informer_core.rest import ApiListerWatcher
from informer_core.stop import StopEvent

__all__ = ["LABEL", "ClusterSecrets", "spec_of_secret", "specs_of_secrets"]

log = logging.getLogger("kube-cache-gateway")

LABEL = "kube-cache-gateway.io/cluster"


def spec_of_secret(secret: dict) -> ClusterSpec:
    """The cluster an Argo CD-shaped cluster Secret names.

    Raises:
        ClustersError: no valid ``name``, no ``server``, or ``config`` that is not a JSON object.
    """
    meta = secret.get("metadata") or {}
    where = f"Secret {meta.get('namespace', '')}/{meta.get('name', '')}"
    data = secret.get("data") or {}

    def field(key: str) -> str:
        try:
            return base64.b64decode(data.get(key) or "", validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise ClustersError(f"{where}: data.{key} is not base64 text") from None

    name = check_name(field("name"), where)
    server = field("server")
    if not server.startswith(("https://", "http://")):
        raise ClustersError(f"{where}: data.server must be the API server's URL")
    text = field("config") or "{}"
    try:
        config = json.loads(text)
    except ValueError:
        raise ClustersError(f"{where}: data.config is not JSON") from None
    if not isinstance(config, dict):
        raise ClustersError(f"{where}: data.config must be a JSON object")
    annotations = meta.get("annotations") or {}
    prefixes = [annotations.get(f"{LABEL.rpartition('/')[0]}/{key}", "")
                for key in ("user-prefix", "group-prefix")]
    if not all(isinstance(p, str) for p in prefixes):
        raise ClustersError(f"{where}: the prefix annotations must be strings")
    return ClusterSpec(name, server=server, config=json.dumps(config, sort_keys=True),
                       user_prefix=prefixes[0], group_prefix=prefixes[1], source=where)


def specs_of_secrets(secrets: list[dict]) -> list[ClusterSpec]:
    """The clusters the Secrets name, by name; a malformed Secret is logged and left out.

    Two Secrets naming one cluster: the one created first is served, the later one is not
    (logged, naming both), so a Secret written later cannot take over a cluster already
    served — its name, its paths, its callers — by naming it too.
    """
    def created(secret: dict) -> tuple[str, str]:
        meta = secret.get("metadata") or {}
        return str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")

    chosen: dict[str, ClusterSpec] = {}
    for secret in sorted(secrets, key=created):
        try:
            spec = spec_of_secret(secret)
        except ClustersError as exc:
            log.error("a cluster Secret is not served: %s", exc)
            continue
        first = chosen.get(spec.name)
        if first is not None:
            log.error("%s is not served: it names cluster %s, which %s, created before it, "
                      "names already", spec.source, spec.name, first.source)
            continue
        chosen[spec.name] = spec
    return sorted(chosen.values(), key=lambda s: s.name)


class ClusterSecrets:
    """Tells ``said`` the clusters of the labelled Secrets in ``namespace``, as they change."""

    def __init__(self, api_client: Any, namespace: str, said: Said, wait: float = 10.0) -> None:
        self.namespace = namespace
        self.said = said
        self.wait = wait  # seconds start-up waits for the Secrets' clusters (``start``)
        lister_watcher = ApiListerWatcher(
            api_client, "/api/v1/secrets", namespace=namespace,
            tweak_list_options=lambda o: setattr(o, "label_selector", f"{LABEL}=true"),
            api_version="v1", kind="Secret")
        self.informer = SharedIndexInformer(lister_watcher, name="cluster-secrets")
        self._stop = StopEvent()  # tells the threads it stops (informer_core.stop)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: asyncio.Task | None = None
        self._again = False

    async def start(self) -> None:
        """Begin watching, and apply the Secrets' clusters before returning — before the port
        serves — when they are listed and connected within ``wait`` seconds (else they are
        applied as soon as they are, and the delay is logged).

        At start-up a Secret's cluster applied only after the port served was a window in
        which its paths answered 404 and the gateway ran with fewer clusters than configured.
        """
        loop = self._loop = asyncio.get_running_loop()
        changed = lambda *_: call_on_loop(loop, self._changed)  # noqa: E731 - any event
        self.informer.add_event_handler(ResourceEventHandlerFuncs(changed, changed, changed))
        self._thread = threading.Thread(target=self.informer.run, args=(self._stop,),
                                        name="cluster-secrets", daemon=True)
        self._thread.start()
        wait = self.wait
        deadline = loop.time() + wait
        while not self.informer.has_synced():
            if loop.time() >= deadline:
                log.warning("the cluster Secrets in %s were not listed within %.0f s: the "
                            "gateway serves meanwhile, and applies them once they are",
                            self.namespace, wait)
                return
            await asyncio.sleep(0.05)
        self._changed()
        if self._pending is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._pending),
                                       max(0.1, deadline - loop.time()))
            except asyncio.TimeoutError:
                log.warning("the clusters of the Secrets in %s were not all connected within "
                            "%.0f s: the gateway serves meanwhile", self.namespace, wait)

    def _changed(self) -> None:
        """On the loop: tell the clusters again (once for a burst of events)."""
        if self._pending is not None and not self._pending.done():
            self._again = True
            return
        self._pending = asyncio.ensure_future(self._tell())

    async def _tell(self) -> None:
        while True:
            self._again = False
            await self.said(specs_of_secrets(self.informer.get_indexer().list()))
            if not self._again:
                return

    async def stop(self) -> None:
        await run_blocking(self._stop.set)  # off the loop: the informer stops as it is set
        if self._pending is not None:
            self._pending.cancel()
        if self._thread is not None:
            await run_blocking(self._thread.join, 10)
