"""Every exception the library defines, in one place.

Each is also importable from the module that raises it and from the package root.
"""

from __future__ import annotations

__all__ = [
    "ClusterUnavailableError",
    "FIFOClosedError",
    "InformerError",
    "NotFoundError",
    "ResourceExpiredError",
    "SelectorError",
    "UnsupportedResourceError",
]


class InformerError(Exception):
    """Base class of the library's own errors."""


class SelectorError(InformerError, ValueError):
    """A label or field selector could not be parsed or is invalid."""


class FIFOClosedError(InformerError):
    """``DeltaFIFO.pop`` was called on a closed, drained queue."""


class ResourceExpiredError(InformerError):
    """The API server answered 410 Gone: the requested resourceVersion is too old."""


class NotFoundError(InformerError, LookupError):
    """An object, or a resource, does not exist."""


class UnsupportedResourceError(InformerError):
    """The resource exists but cannot be listed and watched."""


class ClusterUnavailableError(InformerError, RuntimeError):
    """A local control plane (etcd + kube-apiserver) could not be provided or started."""
