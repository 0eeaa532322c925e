"""The floor: a bare ASGI app on the same uvicorn, answering each query with fixed bytes.

    KCG_FLOOR_BODIES=dir python -m uvicorn bench.floor:app --port N [--ssl-certfile ...]

``dir`` holds ``index.json`` (``{"<path>?<query>": "<file>"}``) and the answer
files, copied from the gateway's own answers. Whatever this app takes per
request is what uvicorn, the event loop and the kernel cost for an answer of
that size with no work at all: the least any Python server on this stack can
do, and so the yardstick for the gateway's own overhead.
"""

from __future__ import annotations

import json
import os
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
