"""The floor: a bare ASGI app on the same uvicorn, answering each query with fixed bytes.

    KCG_FLOOR_BODIES=dir python -m uvicorn bench.floor:app --port N [--ssl-certfile ...]
    KCG_FLOOR_BODIES=dir python -m bench.floor --workers 2 --port N [--ssl-certfile ...]

``dir`` holds ``index.json`` (``{"<path>?<query>": "<file>"}``) and the answer
files, copied from the gateway's own answers. Whatever this app takes per
request is what uvicorn, the event loop and the kernel cost for an answer of
that size with no work at all: the least any Python server on this stack can
do, and so the yardstick for the gateway's own overhead.

Several workers are spread as the gateway's are (``app.launch.supervisor``): one listening
socket each in one ``SO_REUSEPORT`` group, each uvicorn process serving its own.
uvicorn's own ``--workers`` share one socket, and under keep-alive one of them took every
connection (the busiest worker 100 % of the CPU in most two-worker rows, 2026-12-05): a
floor that used one core of two.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

_DIR = Path(os.environ.get("KCG_FLOOR_BODIES", "."))
_BODIES: dict[str, bytes] = {}
if (_DIR / "index.json").exists():
    for target, name in json.loads((_DIR / "index.json").read_text()).items():
        _BODIES[target] = (_DIR / name).read_bytes()
_MISSING = b'{"kind":"Status","code":404}'


async def app(scope: dict, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    query = scope.get("query_string", b"").decode("latin-1")
    body = _BODIES.get(scope["path"] + ("?" + query if query else ""))
    status = 200 if body is not None else 404
    body = body if body is not None else _MISSING
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    """``python -m bench.floor --workers N``: N uvicorn processes on one address, a socket
    each (see the module); ends them on SIGTERM or SIGINT."""
    from app.launch.supervisor import listen_each

    parser = argparse.ArgumentParser(prog="python -m bench.floor")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--ssl-certfile", default="")
    parser.add_argument("--ssl-keyfile", default="")
    args = parser.parse_args()
    tls = ["--ssl-certfile", args.ssl_certfile, "--ssl-keyfile", args.ssl_keyfile] \
        if args.ssl_certfile else []
    sockets = listen_each("127.0.0.1", args.port, args.workers)
    # each worker serves its socket as the gateway's workers do (uvicorn's ``--fd`` would take
    # it for a Unix socket, and asyncio then leaves Nagle on: 40 ms answers)
    serve = ("import socket, sys, uvicorn\n"
             "tls = dict(zip(('ssl_certfile', 'ssl_keyfile'), sys.argv[2:4]))\n"
             "config = uvicorn.Config('bench.floor:app', log_level='warning', access_log=False,"
             " **tls)\n"
             "uvicorn.Server(config).run(sockets=[socket.socket(fileno=int(sys.argv[1]))])\n")
    workers = [subprocess.Popen([sys.executable, "-c", serve, str(sock.fileno()),
                                 *tls[1::2]], pass_fds=[sock.fileno()]) for sock in sockets]
    stop = lambda *_: [w.terminate() for w in workers]  # noqa: E731
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for worker in workers:
        worker.wait()


if __name__ == "__main__":
    main()
