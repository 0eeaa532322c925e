"""The wire under a stream: what it relies on in uvicorn, held against a real server.

If uvicorn renames what ``app.streams.wire`` reads, or frames bodies differently, these
fail; a stream would otherwise write garbage into its connection, or nothing."""

from __future__ import annotations

import gc
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn

from app.http.limits import guarded_protocol
from app.settings import Settings
from app.streams.wire import CYCLE_KEY, LOST_KEY, Wire, cycle_of
from control_plane.cluster import free_port
from tests.helpers import wait_until


_plain_cycles: list = []  # what /plain requests found in their scope
_told: list[float] = []  # when /told requests were told their client had gone


async def _app(scope, receive, send):
    """A streaming answer: one piece through ``send``, three straight to the wire, the end
    through ``send`` again — as a live stream goes."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["path"] == "/plain":  # a plain answer; what it leaves behind is looked at
        _plain_cycles.append(scope["extensions"][CYCLE_KEY])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"plain"})
        return
    if scope["path"] == "/told":  # an answer that never ends, told when its client goes
        import asyncio
        gone = asyncio.Event()
        scope["extensions"][LOST_KEY] = gone.set
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"open", "more_body": True})
        await gone.wait()  # nothing listens to receive(): only the protocol can say it
        _told.append(time.monotonic())
        return
    early = Wire.of(scope)  # before the head: no wire yet
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"first;", "more_body": True})
    wire = Wire.of(scope)
    said = [b"early:" + str(early is None).encode() + b";"]
    if wire is not None:
        cycle = scope["extensions"][CYCLE_KEY]()
        said.append(b"ready:" + str(wire.ready()).encode() + b";")
        cycle.flow.pause_writing()  # what the transport does past its high-water mark
        said.append(b"paused:" + str(wire.ready()).encode() + b";")
        cycle.flow.resume_writing()
        for piece in said:
            wire.write(piece)
        wire.write(b"x" * 70_000 + b";")  # larger than a chunk size line's usual few digits
    else:
        await send({"type": "http.response.body", "body": b"no wire;", "more_body": True})
    await send({"type": "http.response.body", "body": b"last", "more_body": False})


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = free_port()
    config = uvicorn.Config(_app, host="127.0.0.1", port=port, log_level="warning",
                            http=guarded_protocol(Settings()), lifespan="on")
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    wait_until(lambda: running.started, 10, message="uvicorn to start")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        running.should_exit = True
        thread.join(10)


_EXPECTED = b"first;early:True;ready:True;paused:False;" + b"x" * 70_000 + b";last"


def test_a_chunked_body_carries_what_was_written_to_the_wire_in_order(server):
    with httpx.Client(http2=False) as client:
        for _ in range(2):  # and the connection is kept alive for the next request
            answer = client.get(f"http://{server}/")
            assert answer.status_code == 200
            assert answer.headers["transfer-encoding"] == "chunked"
            assert answer.content == _EXPECTED


def _dechunk(data: bytes) -> bytes:
    body = b""
    while True:
        size, _, data = data.partition(b"\r\n")
        length = int(size, 16)
        if length == 0:
            return body
        body, data = body + data[:length], data[length + 2:]


def test_an_http_1_0_answer_is_framed_as_its_head_says_and_ends_with_the_connection(server):
    host, port = server.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
        data, deadline = b"", time.monotonic() + 10
        while time.monotonic() < deadline:
            more = conn.recv(65536)
            if not more:
                break  # closed by the server: HTTP/1.0 is not kept alive
            data += more
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"connection: close" in head.lower()
    chunked = b"transfer-encoding: chunked" in head.lower()  # uvicorn chunks for 1.0 too
    assert (_dechunk(body) if chunked else body) == _EXPECTED


def test_served_without_the_gateways_protocol_a_stream_has_no_wire():
    scope = {"type": "http", "method": "GET", "extensions": {}}
    assert Wire.of(scope) is None


def test_the_same_piece_written_to_many_chunked_wires_is_framed_once():
    class Transport:
        def __init__(self):
            self.written = []

        def write(self, data):
            self.written.append(data)

    class Cycle:
        def __init__(self):
            self.transport, self.flow, self.chunked_encoding = Transport(), object(), True

    cycles = [Cycle() for _ in range(3)]
    piece, other = b"id: 7\nevent: ADDED\ndata: {}\n\n", b"id: 8\nevent: ADDED\ndata: {}\n\n"
    for cycle in cycles:
        Wire(cycle).write(piece)
    Wire(cycles[0]).write(other)
    first, second, third = (c.transport.written[0] for c in cycles)
    assert first == b"%x\r\n%b\r\n" % (len(piece), piece)
    assert second is first and third is first, "framed once, written to each"
    assert cycles[0].transport.written[1] == b"%x\r\n%b\r\n" % (len(other), other)


def test_an_answered_request_is_freed_without_the_garbage_collector(server):
    """The scope holds its cycle weakly: a reference back from the scope to the cycle (which
    holds the scope) would make every request, its headers and whatever its answer left in
    the scope a garbage cycle, for the collector to find."""
    host, port = server.split(":")
    gc.disable()
    try:
        with socket.create_connection((host, int(port)), timeout=10) as conn:
            conn.sendall(b"GET /plain HTTP/1.0\r\nHost: x\r\n\r\n")
            while conn.recv(65536):
                pass  # until the server closes: HTTP/1.0 is not kept alive
        ref = _plain_cycles[-1]
        wait_until(lambda: ref() is None, 10,
                   message="the request's cycle to be freed by reference counting alone")
    finally:
        gc.enable()


def test_the_protocol_tells_an_open_answer_that_its_client_went_away(server):
    """What a stream's end rests on when no task listens for the client (``StreamBody``)."""
    host, port = server.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(b"GET /told HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while b"open" not in data:
            data += conn.recv(65536)
        assert not _told
    closed = time.monotonic()
    wait_until(lambda: _told, 5, message="the answer to be told")
    assert _told[0] - closed < 1.0


def test_a_cycle_is_found_only_under_the_gateways_protocol():
    assert cycle_of({"type": "http", "extensions": {}}) is None
    assert cycle_of({"type": "http"}) is None
