"""Limits that protect the process: open streams (in total and per client address), the size
of a request's head, and how long a peer that takes nothing keeps its connection.

uvicorn's httptools parser keeps every header byte it is sent, without a bound: one
connection sending a 100 MB header would hold 100 MB. ``GuardedProtocol`` counts
the request line and headers as they arrive and answers ``431 Request Header Fields
Too Large`` past ``max_header_bytes`` (default 1 MiB, Go's ``net/http`` default, so
the API server's), closing the connection as Go does. It also sets
``TCP_USER_TIMEOUT`` on every connection: a peer that acknowledges nothing for that
long — gone, or keeping its receive window shut — is dropped by the kernel, so a
client that stopped reading cannot hold a socket and its buffered bytes for good
(the stream it held is ended sooner, by ``app.streams.pipeline``).
"""

from __future__ import annotations

import socket
from collections import Counter
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["GuardedProtocol", "StreamLimiter", "guarded_protocol"]


class StreamLimiter:
    """Counts open streams; lives on the event loop (no lock needed)."""

    def __init__(self, max_total: int, max_per_client: int) -> None:
        self.max_total = max_total
        self.max_per_client = max_per_client
        self.open = 0
        self._by_client: Counter[str] = Counter()

    def acquire(self, client: str) -> str | None:
        """Take a slot; return ``None``, or why there is none."""
        if self.open >= self.max_total:
            return f"the gateway serves at most {self.max_total} streams at once"
        if self._by_client[client] >= self.max_per_client:
            return f"at most {self.max_per_client} streams per client address"
        self.open += 1
        self._by_client[client] += 1
        return None

    def release(self, client: str) -> None:
        self.open -= 1
        self._by_client[client] -= 1
        if self._by_client[client] <= 0:
            del self._by_client[client]


class _HeadTooLarge(Exception):
    pass


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a bound on the request line plus headers, and a
    user timeout on its connection."""

    max_header_bytes = 1 << 20
    user_timeout_ms = 30_000

    def connection_made(self, transport: Any) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None and hasattr(socket, "TCP_USER_TIMEOUT") and \
                sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, self.user_timeout_ms)
        super().connection_made(transport)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0
        self._head_too_large = False

    def _count(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self.max_header_bytes:
            self._head_too_large = True
            raise _HeadTooLarge  # the parser stops; uvicorn answers through send_400_response

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def send_400_response(self, msg: str) -> None:
        if not getattr(self, "_head_too_large", False):
            super().send_400_response(msg)
            return
        body = (f"the request line and headers exceed {self.max_header_bytes} bytes").encode()
        self.transport.write(b"".join((
            b"HTTP/1.1 431 Request Header Fields Too Large\r\n",
            b"content-type: text/plain; charset=utf-8\r\n",
            b"content-length: " + str(len(body)).encode() + b"\r\n",
            b"connection: close\r\n\r\n", body)))
        self.transport.close()


def guarded_protocol(settings: Any) -> type[Any]:
    """The protocol class to hand uvicorn (``http=``): ``max_header_bytes``, and a user
    timeout of three ``stall_timeout`` (at least 10 s: a slow network is not a dead peer)."""
    return type("Guarded", (GuardedProtocol,), {
        "max_header_bytes": settings.max_header_bytes,
        "user_timeout_ms": int(max(10.0, 3 * settings.stall_timeout) * 1000)})
