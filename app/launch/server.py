"""Serving one process: the gateway on uvicorn until SIGINT/SIGTERM, streams ended first,
informers last.

A single gateway (``app.launch.launch``) and each worker of several
(``app.launch.supervisor``) run ``run_server``.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

__all__ = ["run_server", "uvicorn_config"]


def uvicorn_config(app: Any, settings: Any, **overrides: Any) -> Any:
    """uvicorn's configuration for ``app`` from ``settings`` (``overrides`` win).

    Serving TLS with authorization, the context asks for client certificates and checks
    them against the identity cluster's client CAs (``app.auth.client_certs``).

    ``X-Forwarded-For`` and ``X-Forwarded-Proto`` are believed only from the proxies
    ``--forwarded-allow-ips`` names: uvicorn believes loopback by default, so a
    port-forward or a sidecar could pass any client address, and the access log and
    the per-client stream limit would read the forgery.
    """
    import uvicorn

    from app.http.limits import guarded_protocol

    options: dict[str, Any] = {
        "host": settings.host, "port": settings.port, "workers": 1,
        "http": guarded_protocol(settings), "log_level": settings.log_level.lower(),
        "access_log": False, "timeout_graceful_shutdown": 10, "lifespan": "on",
        "ssl_certfile": settings.tls_cert_file or None,
        "ssl_keyfile": settings.tls_private_key_file or None,
        # no logging configuration of its own: its lines go through the process's handlers,
        # JSON with --log-json (app.process.logs)
        "log_config": None,
        "proxy_headers": bool(settings.forwarded_allow_ips),
        "forwarded_allow_ips": list(settings.forwarded_allow_ips) or None,
    }
    options.update(overrides)
    config = uvicorn.Config(app, **options)
    client_cas = getattr(app, "client_cas", None)
    if client_cas is not None and config.is_ssl:
        config.load()  # makes the TLS context now (serve() would): it must ask for certificates
        client_cas.install(config.ssl)
        # each request's certificate is checked against the CAs trusted then (a class per server)
        if isinstance(options["http"], type):
            options["http"].client_cas = client_cas
    return config


def run_server(settings: Any, api_client: Any, on_ready: Any = None, sockets: Any = None,
               worker: Any = None) -> int:
    """Serve until SIGINT/SIGTERM; end open streams first, then stop the informers.

    ``sockets``: listening sockets to accept from (a worker's, shared); ``worker``:
    the worker's ``WorkerInfo`` when it is one of several.
    """
    from app.bridge import call_on_loop
    from app.main import create_app
    from app.process.ticks import SecondTickServer

    app = create_app(settings, api_client=api_client, worker=worker)

    class Server(SecondTickServer):
        def handle_exit(self, sig: int, frame: Any) -> None:
            gateway = getattr(app.state, "gateway", None)
            loop = getattr(self, "_kcg_loop", None)
            if gateway is not None and loop is not None:
                call_on_loop(loop, gateway.begin_shutdown)
            super().handle_exit(sig, frame)

        async def startup(self, sockets: Any = None) -> None:
            self._kcg_loop = asyncio.get_running_loop()
            await super().startup(sockets)
            if on_ready is not None and self.started:
                on_ready()

    server = Server(uvicorn_config(app, settings))
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then raises the signal again
    # with the previous handlers back: make that an orderly exit, so callers'
    # cleanup (the demo's local API server) still runs.
    previous = signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        server.run(sockets=sockets)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0 if server.started else 1


def _exit_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(0)
