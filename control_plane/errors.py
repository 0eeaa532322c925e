"""The control plane's one error."""

from __future__ import annotations

__all__ = ["ClusterUnavailableError"]


class ClusterUnavailableError(RuntimeError):
    """A local control plane (etcd + kube-apiserver) could not be provided or started."""
