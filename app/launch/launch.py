"""Launching: one serving process, or a supervisor of several (``--workers N``).

Used by ``serve`` and ``demo`` alike (``app.launch.cli``, ``app.launch.demo``).
"""

from __future__ import annotations

from typing import Any

from app.clusters.connect import load_default_client
from app.launch.server import run_server
from app.launch.supervisor import Supervisor

__all__ = ["serve"]


def serve(settings: Any, on_ready: Any = None) -> int:
    """Serve ``settings.workers`` processes on one address until SIGINT/SIGTERM.

    One is served here; more are supervised (``app.launch.supervisor``), each loading the
    Kubernetes configuration for itself. Returns 2 when the configuration cannot be
    loaded (said why on stderr).
    """
    if settings.workers > 1:
        return Supervisor(settings, settings.workers).run(on_ready)
    api_client = load_default_client(settings)
    if api_client is None:
        return 2
    return run_server(settings, api_client, on_ready)
