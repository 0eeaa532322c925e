"""A stream's connection, written to straight from the hub's dispatch.

Why. Through ASGI, every event reaches a client by waking the stream's task, which hands
the bytes to the server's ``send``, which writes them to the socket: with a thousand
subscribers, a thousand task wake-ups and sends per change, and the last subscriber's copy
leaves after all the others' tasks have run. Measured on two cores: a woken task with a
shared frame ~3.8 µs per delivery, through a server's send ~5.1 µs, one loop writing the
frame to each connection ~1.5 µs. kube-apiserver's cacher and ``websockets.broadcast``
do the latter, and so does the gateway once a stream is live: the hub's dispatch offers
each event to every subscriber in one pass (``EventHub``), and a subscriber whose stream
has a ``Wire`` writes its frames to the connection there and then, its task left asleep.

The stream still owns everything else: the first state, heartbeats and bookmarks, access
checks, the end and its last words (``app.streams.pipeline``); once handed its connection
(``app.streams.handover``), it writes events through that as through a wire. Whenever it writes through
``send`` or checks access it takes the subscriber's sink away, so events wait (in the ring,
behind the subscriber's cursor) for what it writes; a connection whose buffer is full
(``write_paused``) takes nothing either, and its events wait until the task, done waiting
in ``send`` for the client to read, takes them all at once — flow control and the cut-off
for a slow reader only.

What it relies on. ASGI gives an application no transport. The gateway's own HTTP protocol
(``app.http.limits.GuardedProtocol``, a subclass of uvicorn's httptools protocol) puts the
request's ``RequestResponseCycle`` (a weak reference to it: the cycle holds the scope, and
a reference back would make each request a garbage cycle) into the scope's extensions under
``kcg.cycle``; this
module reads its ``transport``, ``flow.write_paused``, ``chunked_encoding``,
``response_started``, ``response_complete`` and ``disconnected``, as uvicorn 0.29–0.54
name them, and frames chunks as uvicorn does. ``tests/app/streams/test_wire.py`` fails if
any of that changes. Served otherwise (another server, a test's ASGI transport), a stream
has no wire and every event goes through its task, as before.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CYCLE_KEY", "LOST_KEY", "Wire", "cycle_of", "frame"]

CYCLE_KEY = "kcg.cycle"  # the scope extension the gateway's protocol sets
# the scope extension a streaming response may set: called, with no arguments, when the
# connection is lost (by the gateway's protocol; see ``app.streams.pipeline.StreamBody``)
LOST_KEY = "kcg.lost"


def cycle_of(scope: dict) -> Any:
    """The request's cycle, when the gateway's own protocol serves it, else ``None``."""
    ref = (scope.get("extensions") or {}).get(CYCLE_KEY)
    return ref() if ref is not None else None

# The last piece framed as a chunk, and its chunk: one dispatch writes the same bytes to
# every stream of a selection, one after another, so it is framed once for all of them.
_framed: tuple[bytes, bytes] = (b"", b"")


class Wire:
    """The connection under one streaming response, once its head has been sent."""

    __slots__ = ("_cycle", "_flow", "_transport", "_chunked")

    def __init__(self, cycle: Any) -> None:
        self._cycle = cycle
        self._flow = cycle.flow
        self._transport = cycle.transport
        self._chunked = bool(cycle.chunked_encoding)

    @classmethod
    def of(cls, scope: dict) -> Wire | None:
        """The wire of a request whose response head has gone out, else ``None``."""
        cycle = cycle_of(scope)
        if cycle is None or scope.get("method") == "HEAD" or not cycle.response_started:
            return None
        return cls(cycle)

    def ready(self) -> bool:
        """Whether a write goes out now: the client is there and its buffer has room."""
        cycle = self._cycle
        return not (self._flow.write_paused or cycle.disconnected or cycle.response_complete
                    or self._transport.is_closing())

    def write(self, data: bytes) -> None:
        """Send ``data`` as one piece of the body (one chunk, when the body is chunked)."""
        self._transport.write(frame(data) if self._chunked else data)


def frame(data: bytes) -> bytes:
    """``data`` framed as one chunk of a chunked body, as uvicorn frames it."""
    global _framed
    if _framed[0] is not data:
        _framed = (data, b"%x\r\n%b\r\n" % (len(data), data))
    return _framed[1]
