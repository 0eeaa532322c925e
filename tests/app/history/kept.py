"""What the live history tests share: the ConfigMaps they change, and when the store has one."""

from __future__ import annotations


def configmap(name: str, **labels) -> dict:
    """A ConfigMap to create, labelled ``labels``."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": labels}, "data": {"v": "0"}}


def kept(running, version: int) -> bool:
    """Whether the gateway's store holds ``version`` of configmaps (its writer caught up)."""
    history = running.gateway.default.history
    return any(lo <= version <= hi for lo, hi in history.store.spans(history.cluster,
                                                                      "core/v1/configmaps"))
