"""Limits that protect the process: open streams (in total and per client address), request
heads, connections, and how long a peer that takes nothing keeps its connection.

Everything here holds before any token is checked, so anyone who reaches the port can
lean on it. uvicorn's parser keeps whatever head bytes it is sent, without a bound or a
time limit (its idle timer starts only after a response): 1,500 connections each sending
about 1 MB of header and never finishing grew a gateway by 1.4 GiB. ``GuardedProtocol``
counts each connection's head bytes as they arrive (the parser buffers an unfinished
header line where no callback sees it) and:

- answers ``431 Request Header Fields Too Large`` past ``max_header_bytes`` (1 MiB, Go's
  ``net/http`` default, so the API server's) and closes the connection, as Go does;
- charges every head's bytes past its first 16 KiB to one budget for the whole server
  (``max_pending_header_bytes``): past it, a head that grows is answered 503 and closed —
  a well-behaved request, a few hundred bytes, is never charged;
- closes with ``408 Request Timeout`` a connection whose head has not arrived within
  ``header_timeout`` seconds of its first byte (or of the connection: one that says
  nothing), as nginx's ``client_header_timeout``;
- refuses, with 503 at once, connections past ``max_connections``;
- gives the pages of large heads' freed reads back to the system (``_Trimmer``);
- sets ``TCP_USER_TIMEOUT`` on every connection: a peer that acknowledges nothing for that
  long — gone, or keeping its receive window shut — is dropped by the kernel, so a client
  that stopped reading cannot hold a socket and its buffered bytes for good (the stream it
  held is ended sooner, by ``app.streams.pipeline``).

It relies on uvicorn's httptools protocol calling ``data_received``, ``on_headers_complete``,
``on_message_complete`` and ``connection_lost`` as uvicorn 0.29-0.54 do; ``tests/app/http/
test_limits.py`` fails if that changes.
"""

from __future__ import annotations

import ctypes
import socket
import weakref
from collections import Counter
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.auth.client_certs import PEER_USER, peer_of
from app.kube.envelope import HeadWithBody
from app.streams.wire import CYCLE_KEY, LOST_KEY

__all__ = ["GuardedProtocol", "StreamLimiter", "guarded_protocol"]


class StreamLimiter:
    """Counts open streams; lives on the event loop (no lock needed)."""

    def __init__(self, max_total: int, max_per_client: int) -> None:
        self.max_total = max_total
        self.max_per_client = max_per_client
        self.open = 0
        self.opened = 0  # ever: with ``closed``, what tells that streams settled (app.process.heap)
        self.closed = 0
        self._by_client: Counter[str] = Counter()

    def acquire(self, client: str) -> str | None:
        """Take a slot; return ``None``, or why there is none."""
        if self.open >= self.max_total:
            return f"the gateway serves at most {self.max_total} streams at once"
        if self._by_client[client] >= self.max_per_client:
            return f"at most {self.max_per_client} streams per client address"
        self.open += 1
        self.opened += 1
        self._by_client[client] += 1
        return None

    def release(self, client: str) -> None:
        self.open -= 1
        self.closed += 1
        self._by_client[client] -= 1
        if self._by_client[client] <= 0:
            del self._by_client[client]


class _HeadBudget:
    """What one server's connections share: the bytes of unfinished request heads held across
    all of them, and the one sweep that closes heads past their time (a timer per request
    cost more than answering a small one from the cache)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pending = 0
        self._sweeping = False

    def sweep_soon(self, loop: Any, connections: set, head_timeout: float) -> None:
        """Sweep ``connections`` about every second while there are any."""
        if self._sweeping:
            return
        self._sweeping = True
        every = min(1.0, head_timeout / 4)

        def sweep() -> None:
            now = loop.time()
            for connection in list(connections):
                overdue = getattr(connection, "head_overdue", None)
                if overdue is not None and overdue(now):
                    connection._head_expired()
            if connections:
                loop.call_later(every, sweep)
            else:
                self._sweeping = False

        loop.call_later(every, sweep)


class _Trimmer:
    """Hands memory the allocator kept back to the system, at most every ``EVERY`` seconds.

    Large heads arrive in reads of up to 256 KiB that are freed a moment later; glibc's
    allocator keeps the freed pages for reuse. After 1,500 refused megabyte heads the
    process stayed 32 MiB larger for good (69 -> 101 MiB) though it held nothing of them;
    with a trim after large heads end it returns to 69. Scheduled on the loop, at most once
    per ``EVERY`` seconds; where the C library has no ``malloc_trim`` (musl), nothing is done.
    """

    EVERY = 2.0

    def __init__(self) -> None:
        self._pending = False
        try:
            self._trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            self._trim = None
        self.trims = 0

    def soon(self, loop: Any) -> None:
        if self._trim is None or self._pending:
            return
        self._pending = True
        loop.call_later(self.EVERY, self._run)

    def _run(self) -> None:
        self._pending = False
        self._trim(0)
        self.trims += 1


_TRIMMER = _Trimmer()


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, guarded against what costs before any token is checked:
    heads that never end, heads that fill memory, and more connections than it can hold;
    with a user timeout on each connection. See the module docstring."""

    # What this class adds to each connection, in slots: uvicorn's own attributes fill the
    # instance's dict to where seven more grow it to twice its size, 1.5 KiB a connection
    # (``tracemalloc``, 2,000 open streams), and a connection lives as long as its stream.
    __slots__ = ("_peer_user", "_in_head", "_head_bytes", "_charged", "_refused",
                 "_last_request", "_head_since")

    max_header_bytes = 1 << 20
    client_cas: Any = None  # the server's ClientCAs (app.auth.client_certs), when it asks
    user_timeout_ms = 30_000
    head_timeout = 30.0
    max_connections = 12_000
    free_head_bytes = 16 * 1024  # of each head, not charged to the shared budget
    budget = _HeadBudget(32 << 20)

    def connection_made(self, transport: Any) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None and hasattr(socket, "TCP_USER_TIMEOUT") and \
                sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, self.user_timeout_ms)
        super().connection_made(transport)
        # a verified client certificate (app.auth.client_certs): read once, from the
        # connection's TLS object (uvicorn does not pass it on), given to each request while
        # it is current (not expired, its CAs still trusted)
        self._peer_user = peer_of(transport.get_extra_info("ssl_object"), self.client_cas)
        self._in_head, self._head_bytes, self._charged = True, 0, 0
        self._refused = False
        self._last_request = False  # the server is stopping: answer what comes, then close
        # a connection that says nothing, or says its head slowly, is closed in time: the
        # server's sweep (one timer for all connections) reads when its head began
        self._head_since: float | None = self.loop.time()
        self.budget.sweep_soon(self.loop, self.connections, self.head_timeout)
        if len(self.connections) > self.max_connections:
            self._refuse(503, "Service Unavailable",
                         f"the gateway holds at most {self.max_connections} connections", retry=True)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # refused: read and dropped until the connection closes
        if self._in_head:
            if self._head_since is None:  # the next request's head, on a kept-alive connection
                self._head_since = self.loop.time()
            self._head_bytes += len(data)
            if self._head_bytes > self.max_header_bytes:
                self._refuse(431, "Request Header Fields Too Large",
                             f"the request line and headers exceed {self.max_header_bytes} bytes")
                return
            over = self._head_bytes - self.free_head_bytes
            if over > self._charged:
                more = over - self._charged
                if self.budget.pending + more > self.budget.limit:
                    # a crowd: no lingering read of what it is still sending
                    self._refuse(503, "Service Unavailable",
                                 "too many unfinished request heads are held", retry=True,
                                 linger=False)
                    return
                self.budget.pending += more
                self._charged = over
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._end_head()
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.scope is self.scope:  # this request's
            cycle.transport = HeadWithBody(cycle.transport, cycle)  # one write per answer
            # its streams write live events straight to the connection (app.streams.wire);
            # weakly: the cycle holds the scope, and a strong reference back would leave
            # every request's scope and cycle to the garbage collector
            extensions = self.scope.setdefault("extensions", {})
            extensions[CYCLE_KEY] = weakref.ref(cycle)
            peer = self._peer_user
            if peer is not None and peer.current():
                extensions[PEER_USER] = peer
        if self._last_request and cycle is not None:
            cycle.keep_alive = False  # shutting down: answered, then closed

    def shutdown(self) -> None:
        """The server is stopping. A connection that has not yet brought its first request is
        given a moment to (as Go's server does): uvicorn would close it at once, and a client
        whose request was on its way would read a reset instead of an answer or a refusal."""
        if self.cycle is None and not self._refused and not self.transport.is_closing():
            self._last_request = True
            self.loop.call_later(_NEW_CONNECTION_GRACE, self._close_if_nothing_came)
            return
        super().shutdown()

    def _close_if_nothing_came(self) -> None:
        if self.cycle is None and self._head_bytes == 0 and not self.transport.is_closing():
            self.transport.close()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True  # what comes next on this connection is the next request's head

    def connection_lost(self, exc: Exception | None) -> None:
        self._end_head()
        cycle = self.cycle
        super().connection_lost(exc)
        # a stream that is told, rather than a task per stream listening for it
        lost = (cycle.scope.get("extensions") or {}).get(LOST_KEY) if cycle is not None else None
        if lost is not None:
            lost()

    def answered(self) -> None:
        """Go on with a connection whose last answer was served elsewhere (a stream handed
        over, ``app.streams.handover``), as uvicorn does after any answer: the next head not
        begun, the keep-alive timer running, reading resumed."""
        self._head_since = None
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive,
                                                            self.timeout_keep_alive_handler)
        self.transport.resume_reading()

    def _end_head(self) -> None:
        self._in_head = False
        self._head_since = None
        if self._head_bytes > self.free_head_bytes:
            _TRIMMER.soon(self.loop)  # a large head's reads were freed: give the pages back
        self.budget.pending -= self._charged
        self._charged = self._head_bytes = 0

    def head_overdue(self, now: float) -> bool:
        """Whether this connection's head has taken longer than ``head_timeout`` (the sweep)."""
        since = self._head_since
        return since is not None and self._in_head and now - since > self.head_timeout

    def _head_expired(self) -> None:
        if self._in_head and not self.transport.is_closing():
            self._refuse(408, "Request Timeout",
                         f"the request line and headers did not arrive within "
                         f"{self.head_timeout:g} s")

    def _refuse(self, code: int, reason: str, message: str, retry: bool = False,
                linger: bool = True) -> None:
        """Answer ``code`` and close, as Go's server answers a head it will not read."""
        body = message.encode()
        self.transport.write(b"".join((
            f"HTTP/1.1 {code} {reason}\r\n".encode(),
            b"content-type: text/plain; charset=utf-8\r\n",
            b"retry-after: 1\r\n" if retry else b"",
            b"content-length: " + str(len(body)).encode() + b"\r\n",
            b"connection: close\r\n\r\n", body)))
        self._end_head()
        # As Go's server: say it, stop writing, and read (dropping it) what the client is
        # still sending for a moment before closing: closing on unread bytes makes the
        # kernel send a reset, and the client would never read the answer.
        self._refused = True
        if not linger:
            self.transport.pause_reading()
            self.transport.close()
            return
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(_LINGER, self.transport.close)


_LINGER = 0.5  # seconds a refused connection is read and dropped before it is closed
_NEW_CONNECTION_GRACE = 1.0  # seconds a new connection may take to bring its request at shutdown


def guarded_protocol(settings: Any) -> type[Any]:
    """The protocol class to hand uvicorn (``http=``), its limits from ``settings``: one head
    at most ``max_header_bytes``, within ``header_timeout``; unfinished heads together at
    most ``max_pending_header_bytes`` (each head's first 16 KiB free, so a well-behaved
    client's request never waits on a crowd's); ``max_connections``; and a user timeout of
    three ``stall_timeout`` (at least 10 s: a slow network is not a dead peer). One budget
    per class: one per server."""
    return type("Guarded", (GuardedProtocol,), {
        "max_header_bytes": settings.max_header_bytes,
        "head_timeout": settings.header_timeout,
        "max_connections": settings.max_connections,
        "budget": _HeadBudget(settings.max_pending_header_bytes),
        "user_timeout_ms": int(max(10.0, 3 * settings.stall_timeout) * 1000)})
