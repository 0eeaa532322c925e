"""What the history tests share: a short history of Pods to write; the ConfigMaps the live
tests change, and when the store has one."""

from __future__ import annotations

import orjson

from app.history.store import ADDED, DELETED, MODIFIED, Change
from tests.helpers import wait_until

PODS = "v1/pods"


def change(kind: int, rv: int, name: str, namespace: str = "shop", **spec) -> Change:
    """A change of Pod ``name`` at ``rv`` (received at ``1000 + rv``)."""
    raw = orjson.dumps({"metadata": {"name": name, "namespace": namespace,
                                     "resourceVersion": str(rv), "uid": f"u-{name}"},
                        "spec": spec})
    return Change(kind, rv, namespace, name, 1000.0 + rv, raw)


# a, b added; a changed; b deleted and added again; a changed again — exact from 10 to 15
HISTORY = [change(ADDED, 10, "a"), change(ADDED, 11, "b"), change(MODIFIED, 12, "a", x=1),
           change(DELETED, 13, "b"), change(ADDED, 14, "b"), change(MODIFIED, 15, "a", x=2)]


def configmap(name: str, **labels) -> dict:
    """A ConfigMap to create, labelled ``labels``."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": labels}, "data": {"v": "0"}}


def kept(running, version: int) -> bool:
    """Whether the gateway's store holds ``version`` of configmaps (its writer caught up)."""
    history = running.gateway.default.history
    return any(lo <= version <= hi for lo, hi in history.store.spans(history.cluster,
                                                                      "core/v1/configmaps"))


def wait_kept(running, made: dict | str | int) -> None:
    """Wait until the gateway's store holds ``made``'s version (an object the API server
    answered with, or a version)."""
    version = int(made["metadata"]["resourceVersion"] if isinstance(made, dict) else made)
    wait_until(lambda: kept(running, version), 10, message=f"the store caught up to {version}")
