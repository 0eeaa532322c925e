"""A list answer sent as its envelope plus the cached objects' bytes, never joined whole.

Joining 10,000 Pods into one 20 MB body, then adding the envelope, made two
fresh 20 MB allocations per request: the copies and the page faults of memory
touched for the first time took two thirds of a full list's time. Small
answers (up to ``JOIN_BELOW``) are still joined once: a single write is
cheapest. Large ones go out in slices of about ``CHUNK`` bytes, each joined from the objects it holds, with
the exact ``Content-Length`` computed up front — so memory per answer stays
bounded, the server's flow control paces a slow reader, and nothing is
re-encoded.

Whatever the answer, its head and the first piece of its body leave in one write
(``HeadWithBody``). Compressed answers (``Accept-Encoding: gzip``) are compressed the same way, slice by
slice on a worker thread with one running compressor, and sent chunked: fifty clients
asking at once for 10,000 Pods hold fifty slices and compressors (about 0.5 MB each),
not fifty joined 20 MB bodies.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson
from starlette.responses import Response

from app.bridge import run_blocking
from app.kube.partial import answer_type

__all__ = ["CHUNK", "GZIP_ABOVE", "JOIN_BELOW", "LIST_TAIL", "HeadWithBody", "KeptBody",
           "ListBody", "MadeListBody", "joined", "list_head", "list_length",
           "list_metadata"]

CHUNK = 256 * 1024  # a slice of a large answer
JOIN_BELOW = 1024 * 1024  # answers up to this size go out in one write
GZIP_ABOVE = 128 * 1024  # answers up to this size go out uncompressed, whatever is accepted


def list_metadata(resource_version: str, continue_token: str = "",
                  remaining: int | None = None) -> dict[str, Any]:
    """A list's ``metadata`` (``ListMeta``), for JSON lists and ``Table`` answers alike."""
    meta: dict[str, Any] = {}
    if resource_version:
        meta["resourceVersion"] = resource_version
    if continue_token:
        meta["continue"] = continue_token
    if remaining:
        meta["remainingItemCount"] = remaining
    return meta


LIST_TAIL = b"]}"  # a JSON list's end, after its last item


def list_head(resource: Any, accept: Any, version: str, token: str = "",
              remaining: int | None = None) -> bytes:
    """A JSON list's envelope up to its first item: the list of ``resource`` (or the
    metadata form's list, when ``accept`` asks for it) at ``version``."""
    kind, api_version = answer_type(resource, accept, listing=True)
    return (b'{"apiVersion":' + orjson.dumps(api_version) + b',"kind":' + orjson.dumps(kind)
            + b',"metadata":' + orjson.dumps(list_metadata(version, token, remaining))
            + b',"items":[')


def joined(head: bytes, items: list[bytes], tail: bytes = LIST_TAIL) -> bytes:
    """``head + b",".join(items) + tail`` with one copy of the items, not two."""
    if not items:
        return head + tail
    if len(items) == 1:
        return b"".join((head, items[0], tail))
    return b",".join([head + items[0], *items[1:-1], items[-1] + tail])


def list_length(head: bytes, items: list[bytes], tail: bytes) -> int:
    """The size of ``head + b",".join(items) + tail``, without building it."""
    return len(head) + len(tail) + sum(map(len, items)) + max(len(items) - 1, 0)


_JSON = (b"content-type", b"application/json")
_NO_CACHE = (b"cache-control", b"no-cache, private")


class KeptBody(Response):
    """An answer already made, in pieces (bytes or views of a kept answer: envelope, items,
    tail; ``app.cache.kept_lists``), or one stored object's bytes as they are, with
    its headers built directly (Starlette's generic header assembly was a twentieth of
    a single object's time): one write when small; a large one in ``CHUNK`` views of
    the same bytes, copied by nobody, so that the server's flow control paces a slow reader
    as for ``ListBody``."""

    def __init__(self, pieces: Sequence[bytes | memoryview], etag: str | None,
                 gzipped: bool = False) -> None:
        """``gzipped``: the pieces are the answer compressed (a kept answer's, for a caller
        that accepts gzip)."""
        self.status_code = 200
        self.background = None
        self.body = b""
        self._pieces = pieces
        self.length = length = len(pieces[0]) if len(pieces) == 1 else sum(map(len, pieces))
        self.raw_headers = [_JSON, _NO_CACHE, (b"content-length", b"%d" % length)]
        if etag is not None:
            self.raw_headers.insert(2, (b"etag", etag.encode()))
        if gzipped:
            self.raw_headers += [(b"content-encoding", b"gzip"), (b"vary", b"Accept-Encoding")]

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        pieces = self._pieces
        if self.length <= JOIN_BELOW:
            body = pieces[0] if len(pieces) == 1 else b"".join(pieces)
            await send({"type": "http.response.body", "body": body})
            return
        views = [memoryview(p)[at:at + CHUNK] for p in pieces for at in range(0, len(p), CHUNK)]
        for view in views[:-1]:
            await send({"type": "http.response.body", "body": view, "more_body": True})
        await send({"type": "http.response.body", "body": views[-1]})


class ListBody(Response):
    """``head``, the ``items`` separated by commas, then ``tail``; sent in slices."""

    media_type = "application/json"

    def __init__(self, head: bytes, items: list[bytes], tail: bytes,
                 headers: dict[str, str] | None = None, gzip: bool = False) -> None:
        self.status_code = 200
        self.background = None
        self._head, self._items, self._tail = head, items, tail
        self.length = list_length(head, items, tail)
        self.body = b""
        self._gzip = gzip
        self.init_headers(headers)
        # init_headers set the length of the empty body; the real one replaces it (or,
        # compressed, the answer is chunked).
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        if gzip:
            self.raw_headers += [(b"content-encoding", b"gzip"), (b"vary", b"Accept-Encoding")]
        else:
            self.raw_headers.append((b"content-length", str(self.length).encode()))

    def _slices(self) -> Iterator[bytes]:
        items = self._items
        if self.length <= JOIN_BELOW or not items:
            yield b"".join((self._head, b",".join(items), self._tail))
            return
        per_slice = max(1, CHUNK * len(items) // (self.length or 1))
        yield self._head
        for start in range(0, len(items), per_slice):
            chunk = items[start:start + per_slice]
            if start:
                chunk.insert(0, b"")  # the comma before this slice's first object
            yield b",".join(chunk)
        yield self._tail

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": self.status_code,
                    "headers": self.raw_headers})
        await _send_slices(send, self._slices(), self._gzip)


async def _send_slices(send: Any, slices: Iterator[bytes], gzip: bool) -> None:
    """Send a body's slices as they come (compressed one by one on a worker thread, with one
    running compressor, when ``gzip``); the last one ends the body."""
    if gzip:
        compressor = zlib.compressobj(1, zlib.DEFLATED, 31)  # level 1, gzip framing
        for data in slices:
            packed = await run_blocking(compressor.compress, data)
            if packed:
                await send({"type": "http.response.body", "body": packed, "more_body": True})
        await send({"type": "http.response.body", "body": compressor.flush()})
        return
    previous = next(slices)
    for data in slices:
        await send({"type": "http.response.body", "body": previous, "more_body": True})
        previous = data
    await send({"type": "http.response.body", "body": previous})


class MadeListBody(Response):
    """``head``, then items made from ``sources`` a slice at a time (``make``), then ``tail``.

    For items that are not the cached bytes but made from them per answer (a merged list's
    tagged copies): made as the client takes them, so an answer holds one slice of made
    items, never all of them. Their size is not known before they are made: a large answer
    goes out chunked, without ``Content-Length``, as the API server's large lists do.
    """

    media_type = "application/json"
    PER_SLICE = 128  # items made and joined at a time

    def __init__(self, head: bytes, sources: Sequence[Any],
                 make: Callable[[Sequence[Any]], list[bytes]], tail: bytes,
                 headers: dict[str, str] | None = None, gzip: bool = False) -> None:
        """``gzip``: compressed slice by slice (as ``ListBody``), when the answer is large."""
        self.status_code = 200
        self.background = None
        self.body = b""
        self._head, self._sources, self._make, self._tail = head, sources, make, tail
        self.init_headers(headers)
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self._whole: bytes | None = None
        self._gzip = False
        if len(sources) <= self.PER_SLICE:  # small: joined once, with its length
            self._whole = head + b",".join(make(sources)) + tail
            self.raw_headers.append((b"content-length", str(len(self._whole)).encode()))
        elif gzip:
            self._gzip = True
            self.raw_headers += [(b"content-encoding", b"gzip"), (b"vary", b"Accept-Encoding")]

    def _slices(self) -> Iterator[bytes]:
        yield self._head
        sources, step = self._sources, self.PER_SLICE
        for start in range(0, len(sources), step):
            made = self._make(sources[start:start + step])
            if start:
                made.insert(0, b"")  # the comma before this slice's first item
            yield b",".join(made)
        yield self._tail

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": self.status_code,
                    "headers": self.raw_headers})
        if self._whole is not None:
            await send({"type": "http.response.body", "body": self._whole})
            return
        await _send_slices(send, self._slices(), self._gzip)


class HeadWithBody:
    """One request's transport, as its cycle sees it (``GuardedProtocol`` puts it there);
    everything but ``write`` is the connection's own.

    An answer of known length goes out in one write: its head held until its body comes.

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
    start (Starlette's responses, those above), and if the connection ends first,
    the held head goes with it, as an unfinished answer's would.

    It relies on uvicorn's httptools protocol writing through its cycle's ``transport`` and
    setting ``chunked_encoding`` and ``expected_content_length`` before it writes the head,
    as uvicorn 0.29-0.54 do; ``tests/app/kube/test_envelope_head_with_body.py`` fails if that changes.
    """

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
