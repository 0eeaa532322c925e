"""Every exception the library defines, in one place.

Each is also importable from the module that raises it and from the package root.
"""

from __future__ import annotations

__all__ = [
    "APIStatusError",
    "FIFOClosedError",
    "InformerError",
    "NotFoundError",
    "ResourceExpiredError",
    "SelectorError",
    "UnsupportedResourceError",
    "WatchAbortedError",
]


class InformerError(Exception):
    """Base class of the library's own errors."""


class SelectorError(InformerError, ValueError):
    """A label or field selector could not be parsed or is invalid."""


class FIFOClosedError(InformerError):
    """``DeltaFIFO.pop`` was called on a closed, drained queue."""


class APIStatusError(InformerError):
    """The API server answered an error; ``status`` is its ``Status`` object, if any."""

    default_code = 0

    def __init__(self, message: str = "", *, code: int | None = None, reason: str = "",
                 status: object = None) -> None:
        super().__init__(message)
        self.code = self.default_code if code is None else code
        self.reason = reason
        self.status = status


class ResourceExpiredError(APIStatusError):
    """410 Gone: the requested resourceVersion (or continue token) is too old."""

    default_code = 410


class NotFoundError(APIStatusError, LookupError):
    """An object, or a resource, does not exist (404)."""

    default_code = 404


class WatchAbortedError(InformerError):
    """A list or watch call was aborted because its caller is stopping."""


class UnsupportedResourceError(InformerError):
    """The resource exists but cannot be listed and watched."""
