"""The fan-out floor: the barest Python server of change streams, as a yardstick.

    KCG_FLOOR_TOKEN=... python -m bench.fanout_floor --port N --server URL --ca FILE --namespace NS

It follows one watch of the ConfigMaps in ``NS`` on the API server (a thread reading
it, as the gateway's informer does) and writes each change as one Server-Sent Event
(``id``, ``event``, ``data``: the API server's object bytes, in one HTTP chunk) to
every connected client, from one pass of the event loop per change: no informer, no
hub, no selection, no access checks, no ASGI — only the write per connection that no
server can skip. It answers any ``GET`` with the stream's head and nothing else.

Why. On loopback the kernel charges the writer for the whole delivery (the receiving
side's TCP and the reader's wake-up included), so a figure like "CPU µs per delivered
event" is mostly the kernel's. What this process takes per delivery, measured in the
same run with the same receiver (``bench.fanout``), is the least any Python server on
this stack can take; the gateway's figure less the floor's is what the gateway itself
adds. ``bench.floor`` is the same yardstick for requests.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import ssl
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable

import orjson

__all__ = ["frame", "serve"]

_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
         b"transfer-encoding: chunked\r\n\r\n")


def frame(seq: int, line: bytes) -> bytes | None:
    """One watch line (``{"type":...,"object":...}``) as an SSE event in one HTTP chunk, the
    object's bytes as the API server sent them; ``None`` for a line that is not an event."""
    if not line.startswith(b'{"type":"') or not line.endswith(b"}"):
        return None
    kind_end = line.find(b'"', 9)
    body_at = line.find(b'"object":', kind_end)
    if kind_end < 0 or body_at < 0:
        return None
    kind = line[9:kind_end]
    if kind == b"BOOKMARK":
        return None
    payload = b"id: %d\nevent: %b\ndata: %b\n\n" % (seq, kind, line[body_at + 9:-1])
    return b"%x\r\n%b\r\n" % (len(payload), payload)


class _Client(asyncio.Protocol):
    """One connection: its head goes out once the request's head is in."""

    def __init__(self, clients: set[asyncio.Transport]) -> None:
        self._clients = clients
        self._transport: asyncio.Transport | None = None
        self._head = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._transport is None or self._transport in self._clients:
            return
        self._head += data
        if b"\r\n\r\n" in self._head:
            self._transport.write(_HEAD)
            self._clients.add(self._transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._clients.discard(self._transport)  # type: ignore[arg-type]


def _follow(server: str, token: str, ca: str, namespace: str,
            publish: Callable[[bytes], None]) -> None:
    """List, then watch from the list's version, publishing each event's frame; again when
    the watch ends. Runs on a thread of its own."""
    url = urllib.parse.urlparse(server)
    context = ssl.create_default_context(cafile=ca)
    context.check_hostname = False
    headers = {"Authorization": f"Bearer {token}"}
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    seq = 0
    while True:
        try:
            conn = http.client.HTTPSConnection(url.hostname, url.port, context=context)
            conn.request("GET", path, headers=headers)
            version = orjson.loads(conn.getresponse().read())["metadata"]["resourceVersion"]
            conn.request("GET", f"{path}?watch=true&resourceVersion={version}", headers=headers)
            answer = conn.getresponse()
            while line := answer.readline():
                seq += 1
                piece = frame(seq, line.rstrip(b"\n"))
                if piece is not None:
                    publish(piece)
            conn.close()
        except (OSError, http.client.HTTPException, KeyError, ValueError) as error:
            print(f"floor: following the watch: {error!r}", file=sys.stderr, flush=True)
            time.sleep(1.0)


async def serve(port: int, server: str, token: str, ca: str, namespace: str,
                started: Callable[[], None] = lambda: None) -> None:
    """Serve the floor's streams on 127.0.0.1:``port`` until cancelled."""
    loop = asyncio.get_running_loop()
    clients: set[asyncio.Transport] = set()

    def fan_out(piece: bytes) -> None:
        for transport in clients:
            transport.write(piece)

    listener = await loop.create_server(lambda: _Client(clients), "127.0.0.1", port, backlog=4096)
    threading.Thread(target=_follow, name="floor-watch", daemon=True,
                     args=(server, token, ca, namespace,
                           lambda piece: loop.call_soon_threadsafe(fan_out, piece))).start()
    started()
    async with listener:
        await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fanout_floor",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--server", required=True, help="the API server's URL")
    parser.add_argument("--ca", required=True, help="its CA file")
    parser.add_argument("--namespace", required=True)
    args = parser.parse_args(argv)
    token = os.environ["KCG_FLOOR_TOKEN"]  # not on the command line, where ps shows it
    coroutine = serve(args.port, args.server, token, args.ca, args.namespace,
                      lambda: print("ready", flush=True))
    try:
        import uvloop  # the gateway's loop, when installed (uvicorn's choice too)
    except ImportError:
        asyncio.run(coroutine)
    else:
        uvloop.run(coroutine)


if __name__ == "__main__":
    main()
