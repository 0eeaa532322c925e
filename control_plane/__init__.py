"""The local control plane: a real etcd + kube-apiserver on loopback.

It is the product's embedded default (``kube-cache-gateway demo`` serves a demo
workload from it, with no cluster of the user's own) and the test suite's real
API server. The informer library never imports it; the gateway imports it only
for ``demo``.

- ``cluster``: ``LocalCluster`` starts, stops, restarts and compacts it;
- ``binaries``: finds etcd and kube-apiserver, or installs/builds them once
  (``python -m control_plane.binaries``);
- ``kubeapi``: ``KubeAPI``, a small JSON REST client for seeding and checking;
- ``fake``: ``FakeCluster``, an API server in memory for tests about what the
  gateway and the informers do with answers (the same calls as ``KubeAPI``);
- ``faults``: ``FaultProxy``, a TCP relay that stalls, slows or cuts the way
  to an API server;
- ``pytest_plugin``: the ``local_cluster`` fixtures and ``unavailable()``.


The names below are imported when first asked for, so that ``python -m
control_plane.binaries`` runs its module once, as ``__main__``, rather than after
the package has already imported it (runpy's RuntimeWarning).
"""

from importlib import import_module
from typing import Any

__all__ = ["APIServer", "ClusterUnavailableError", "FakeCluster", "KubeAPI", "LocalCluster", "User",
           "free_port", "widget_crd"]

_HOMES = {"APIServer": "cluster", "LocalCluster": "cluster", "User": "cluster",
          "free_port": "cluster", "ClusterUnavailableError": "errors", "FakeCluster": "fake",
          "KubeAPI": "kubeapi", "widget_crd": "kubeapi"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'control_plane' has no attribute {name!r}")
    return getattr(import_module(f"control_plane.{home}"), name)
