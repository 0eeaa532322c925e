"""kube-cache-gateway: a read-only HTTP gateway serving Kubernetes resources from informer caches.

``create_app(settings, factory=None)`` builds the ASGI application; the
``kube-cache-gateway`` command (``app.cli``) serves it.
"""

from app.main import create_app

__all__ = ["create_app"]
