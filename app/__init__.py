"""kube-cache-gateway: a read-only HTTP gateway serving Kubernetes resources from informer caches.

``create_app(settings, factory=None)`` builds the ASGI application; the
``kube-cache-gateway`` command (``app.launch.cli``) serves it. ``create_app`` is imported
when first asked for: the command's supervisor of several workers (``app.launch.supervisor``)
runs without the web stack it never uses.
"""

from typing import Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from app.main import create_app

        return create_app
    raise AttributeError(f"module 'app' has no attribute {name!r}")
