"""An answer of known length goes out in one write: its head held until its body comes.

uvicorn writes a response's status line and headers the moment the application starts
the response, then its body in a second write: two ``send`` system calls, two wake-ups
of the client, for every answer. On this machine the head's write alone took a seventh
of a label list's time at eight connections, and more of a single object's. Holding the
head and giving it to the transport together with the first piece of the body
(``writelines``: one ``writev``) halves the calls; nothing else changes, and the bytes
on the wire are the same.

Only answers with a ``Content-Length`` and a body to come are held: a stream (chunked,
its first event perhaps minutes away) or an empty answer (``HEAD``, 304, 204) has its
head written at once, as before, since a client waits for the head (a watch's caller
returns only once it has it). The application always sends the body right after the
start (Starlette's responses, ``app.kube.envelope``), and if the connection ends first,
the held head goes with it, as an unfinished answer's would.

It relies on uvicorn's httptools protocol writing through its cycle's ``transport`` and
setting ``chunked_encoding`` and ``expected_content_length`` before it writes the head,
as uvicorn 0.29-0.54 do; ``tests/app/http/test_head_with_body.py`` fails if that changes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["HeadWithBody"]


class HeadWithBody:
    """One request's transport, as its cycle sees it (``GuardedProtocol`` puts it there);
    everything but ``write`` is the connection's own."""

    __slots__ = ("_transport", "_cycle", "_head", "_started")

    def __init__(self, transport: Any, cycle: Any) -> None:
        self._transport = transport
        self._cycle = cycle
        self._head: bytes | None = None
        self._started = False

    def write(self, data: bytes) -> None:
        head = self._head
        if head is not None:
            self._head = None
            self._cycle.transport = self._transport  # the rest of this answer goes straight
            self._transport.writelines((head, data))
            return
        if not self._started:
            self._started = True
            cycle = self._cycle
            if cycle.chunked_encoding is False and cycle.expected_content_length > 0 \
                    and cycle.scope["method"] != "HEAD":
                self._head = data
                return
            cycle.transport = self._transport
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
