"""A settled stream's connection, taken from the HTTP server until the stream ends.

Why. An open stream spends almost all of its life waiting: its events go out from the
hub's dispatch (``app.streams.wire``), and its own work (a heartbeat, a bookmark, an
access check, its end) comes every few seconds at most. Served as an ASGI request, each
waiting stream still keeps everything a request in flight keeps: uvicorn's parser and
request cycle, the scope with its headers, two ``asyncio.Event``s, the request's task
and its chain of coroutines (the server's, the middleware's, the response's, the
stream's). Measured with 2,000 open streams, that was about 10 of a stream's 16 KiB.
kube-apiserver's watchers are a goroutine each; websockets' broadcast writes to
connections it holds. Here, once a stream's head and first state are out and it has
nothing to do but wait, its connection is handed over (``hand_over``): the transport's
protocol becomes a ``StreamConnection``, the request's task returns, and the stream is
*parked* — a timer for its next tick, its subscriber's wake-up, its sink. A task runs
again only for what has to wait: a burst, a full socket, an access check, the end
(``app.streams.pipeline.LiveStream``).

The connection stays the server's: the ``StreamConnection`` takes its protocol's place in
the server's set of connections, so a stopping server tells it (``shutdown``) and waits for
it as for any other, and its tasks are the server's tasks. When the stream ends, its body
is finished (the last chunk) and the connection is given back to HTTP — a new protocol of
the server's own class, as after any answer, with the keep-alive timer running and any
request the client sent meanwhile — or closed, if the request asked to (``Connection:
close``, HTTP/1.0) or the server is stopping.

It relies on uvicorn's httptools protocol and request cycle as ``app.streams.wire`` names
them, and on ``transport.set_protocol``; ``tests/app/streams/test_handover.py`` fails if
either changes. Served otherwise (another server, a test's ASGI transport), a stream is
never handed over and keeps its request's task.
"""

from __future__ import annotations

import asyncio
from typing import Any

from app.streams.wire import frame

__all__ = ["StreamConnection", "hand_over"]


_EARLY_LIMIT = 64 * 1024  # bytes of a next request kept while the stream holds the connection


def hand_over(cycle: Any, stream: Any) -> StreamConnection | None:
    """Take the connection under ``cycle`` (a request whose stream's head and first state
    went out) for ``stream`` (``LiveStream``); ``None`` if it cannot be taken now: the
    client is gone, its socket is full, or it sent another request already."""
    if cycle is None or cycle.disconnected or cycle.response_complete or \
            not cycle.response_started or cycle.flow.write_paused:
        return None
    transport = cycle.transport
    protocol = transport.get_protocol()
    if getattr(protocol, "cycle", None) is not cycle or protocol.pipeline or \
            transport.is_closing():
        return None
    connection = StreamConnection(transport, stream, bool(cycle.chunked_encoding),
                                  bool(cycle.keep_alive),
                                  (type(protocol), protocol.config, protocol.server_state,
                                   protocol.app_state, protocol.loop))
    transport.set_protocol(connection)
    protocol.connections.discard(protocol)
    protocol.connections.add(connection)
    # uvicorn's request ends quietly (no last chunk, no close): the body goes on, written by
    # the connection now; the old protocol, its parser and the cycle go with the request
    cycle.response_complete = True
    protocol.cycle = None
    protocol.parser = None  # as uvicorn once a connection is lost: no cycle left through it
    return connection


class StreamConnection(asyncio.Protocol):
    """A connection while a handed-over stream holds it; see the module docstring.

    It offers the stream what the hub's dispatch writes through (``ready``, ``write``: as
    ``app.streams.wire.Wire``), what its task writes through (``send``: waits while the
    client's socket is full), and its end (``end``).
    """

    __slots__ = ("transport", "clear", "wrote", "chunked", "_stream", "_keep_alive", "_again",
                 "_paused", "_drain", "_early", "_lost", "_stall", "_ended")

    def __init__(self, transport: Any, stream: Any, chunked: bool, keep_alive: bool,
                 again: tuple) -> None:
        self.transport = transport
        self.clear = not transport.is_closing()  # a write goes out now (see ``ready``)
        self.wrote = False  # the hub wrote events since the stream last looked
        self.chunked = chunked
        self._stream = stream
        self._keep_alive = keep_alive
        self._again = again  # (protocol class, config, server state, app state, loop)
        self._paused = False
        self._drain: asyncio.Future | None = None
        self._early = b""  # what the client sent meanwhile: the next request's
        self._lost = False
        self._stall: asyncio.TimerHandle | None = None
        self._ended = False

    # -- what the stream writes through ---------------------------------------------------

    def ready(self) -> bool:
        """Whether a write goes out now: the client is there and its buffer has room (kept
        as ``clear``, which the hub's dispatch reads for each of thousands of streams)."""
        return self.clear

    def write(self, data: bytes) -> None:
        """Send ``data`` as one piece of the body (one chunk, when the body is chunked)."""
        self.transport.write(frame(data) if self.chunked else data)

    async def send(self, data: bytes) -> None:
        """Write ``data`` once the client's socket has room; nothing if the client is gone
        (the stream learns it at its next step)."""
        while self._paused and not self._lost:
            self._drain = asyncio.get_running_loop().create_future()
            try:
                await self._drain
            finally:
                self._drain = None
        if not self._lost and not self.transport.is_closing():
            self.write(data)

    def fell_behind(self) -> None:
        """The stream's subscriber fell behind: if the stream has not ended in time, cut it
        off (its send, waiting for room, returns; the stream ends)."""
        if self._stall is None:
            self._stall = asyncio.get_running_loop().call_later(
                self._stream.stall_timeout, self._cut)

    def _cut(self) -> None:
        if self._ended or self._lost:
            return
        self._stream.log_cut()
        self.abort()

    @property
    def tasks(self) -> set:
        """The server's tasks: what a stopping server waits for, then cancels."""
        return self._again[2].tasks

    def abort(self) -> None:
        self.clear = False
        self.transport.abort()

    def end(self) -> None:
        """The stream ended: finish its body, then give the connection back to HTTP, or
        close it (asked to, not chunked, or the server is stopping)."""
        if self._ended:
            return
        self._ended = True
        self.clear = False
        if self._stall is not None:
            self._stall.cancel()
        transport = self.transport
        if self._lost or transport.is_closing():
            return
        kind, config, server_state, app_state, loop = self._again
        server_state.total_requests += 1
        if self.chunked:
            transport.write(b"0\r\n\r\n")
        if not (self.chunked and self._keep_alive) or self._stream.stopping:
            server_state.connections.discard(self)
            transport.close()
            return
        protocol = kind(config, server_state, app_state, loop)
        server_state.connections.discard(self)
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        protocol.answered()  # as after any answer: the keep-alive timer, reading resumed
        if self._early:
            early, self._early = self._early, b""
            protocol.data_received(early)

    # -- asyncio.Protocol ------------------------------------------------------------------

    def pause_writing(self) -> None:
        self._paused = True
        self.clear = False

    def resume_writing(self) -> None:
        self._paused = False
        self.clear = not (self._lost or self._ended or self.transport.is_closing())
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    def data_received(self, data: bytes) -> None:
        # A client may send its next request before this answer ends (pipelining): kept for
        # the protocol the connection goes back to, reading paused meanwhile, as uvicorn does.
        if len(self._early) + len(data) > _EARLY_LIMIT:
            self.abort()
            return
        self._early += data
        self.transport.pause_reading()

    def eof_received(self) -> bool | None:
        return None  # the client is done sending: the connection closes, the stream ends

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self.clear = False
        self._again[2].connections.discard(self)
        if self._stall is not None:
            self._stall.cancel()
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)
        self._stream.hang_up()

    def shutdown(self) -> None:
        """The server is stopping (uvicorn calls it on every connection): as uvicorn's own
        protocol with an answer under way, the connection closes once the stream has ended
        (the gateway ends its streams as it stops, each with its last words)."""
        self._keep_alive = False
