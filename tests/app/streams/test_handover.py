"""A settled stream's connection, handed over from the HTTP server (``app.streams.handover``),
against a real API server: what a client sees is a stream as before, its connection goes back
to HTTP when the stream ends, and the stream keeps no task while it waits."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import httpx
import pytest

from app.streams.handover import StreamConnection
from tests.app.conftest import run_gateway
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def _get(path: str, *headers: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", *headers, "", ""]
    return "\r\n".join(lines).encode()


def _read_until(conn: socket.socket, mark: bytes, data: bytes = b"") -> bytes:
    while mark not in data:
        more = conn.recv(65536)
        assert more, f"closed before {mark!r}: {data[-300:]!r}"
        data += more
    return data


def _tasks(gw) -> int:
    async def count() -> int:
        return len(asyncio.all_tasks())

    return asyncio.run_coroutine_threadsafe(count(), gw.gateway.loop).result(5)


class _StreamTasks:
    """Counts the tasks a stream starts of its own (``LiveStream._run``) on a gateway's loop."""

    def __init__(self, gw) -> None:
        self.started = 0
        loop = gw.gateway.loop

        def factory(loop, coro, **kwargs):
            if getattr(coro, "__qualname__", "").startswith("LiveStream."):
                self.started += 1
            return asyncio.Task(coro, loop=loop, **kwargs)

        async def install() -> None:
            loop.set_task_factory(factory)

        asyncio.run_coroutine_threadsafe(install(), loop).result(5)


def _in_groups(gw) -> int:
    """Streams the hubs write to in groups (``EventHub.direct``), on the loop."""
    async def count() -> int:
        return sum(len(group) for entry in gw.gateway.default.caches.entries().values()
                   for _, group in entry.hub._direct.values())

    return asyncio.run_coroutine_threadsafe(count(), gw.gateway.loop).result(5)


def _handed_over(gw) -> int:
    """Connections a stream holds now (on the loop)."""
    async def count() -> int:
        return sum(isinstance(c, StreamConnection) for c in gw.server.server_state.connections)

    return asyncio.run_coroutine_threadsafe(count(), gw.gateway.loop).result(5)


def _open(gw, base: str, query: str = "", *headers: str, until: bytes = b"\r\n\r\n"):
    """A stream of ``base`` (its cache loaded first), read until ``until``, its connection
    handed over; returns the socket and what was read."""
    assert httpx.get(gw.url + base).status_code == 200  # loaded
    conn = _connect(gw.url)
    try:
        conn.sendall(_get(base + query, *headers))
        data = _read_until(conn, until)
        wait_until(lambda: _handed_over(gw) == 1, 5, message="the stream's connection handed over")
    except BaseException:
        conn.close()
        raise
    return conn, data


def test_a_watch_that_ends_gives_its_connection_back_to_http(backend, namespace):
    """After ``timeoutSeconds`` the body ends with its last chunk, and the same connection
    answers the next request: the client's pool keeps it, as with the API server."""
    with run_gateway(backend) as gw:
        base = f"/api/v1/namespaces/{namespace}/configmaps"
        conn, data = _open(gw, base, "?watch=true&timeoutSeconds=2")
        try:
            assert data.startswith(b"HTTP/1.1 200") and b"transfer-encoding: chunked" in data
            _read_until(conn, b"\r\n0\r\n\r\n", data)  # the body's end, after timeoutSeconds
            wait_until(lambda: _handed_over(gw) == 0, 5, message="given back to HTTP")
            conn.sendall(_get(base))
            answer = _read_until(conn, b'"kind":"ConfigMapList"')
            assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        finally:
            conn.close()
        wait_until(lambda: gw.gateway.limiter.open == 0, 5, message="the slot freed")


def test_a_request_sent_during_a_stream_is_answered_after_it(backend, namespace):
    """Pipelined: a client that sends its next request while a watch is open gets it answered,
    in order, once the watch ends, on the same connection."""
    with run_gateway(backend) as gw:
        conn, data = _open(gw, f"/api/v1/namespaces/{namespace}/configmaps",
                           "?watch=true&timeoutSeconds=2")
        try:
            conn.sendall(_get("/version"))
            data = _read_until(conn, b'"gitVersion"', data)
            end = data.index(b"\r\n0\r\n\r\n")
            assert data.index(b"HTTP/1.1 200", end) > end, "the second answer after the first"
        finally:
            conn.close()


def test_connection_close_is_honoured_when_the_stream_ends(backend, namespace):
    with run_gateway(backend) as gw:
        base = f"/api/v1/namespaces/{namespace}/configmaps"
        assert httpx.get(gw.url + base).status_code == 200
        conn = _connect(gw.url)
        try:
            conn.sendall(_get(f"{base}?watch=true&timeoutSeconds=1", "Connection: close"))
            data = _read_until(conn, b"\r\n0\r\n\r\n")
            assert data.startswith(b"HTTP/1.1 200")
            conn.settimeout(5)
            assert conn.recv(65536) == b"", "closed after the stream, as the request asked"
        finally:
            conn.close()


def test_a_parked_stream_has_its_events_and_heartbeats_without_a_task(backend, kube, namespace):
    """Heartbeats every 0.3 s are written by the stream's timer, events by the hub's
    dispatch: while both come, the gateway runs no more tasks than before the stream."""
    with run_gateway(backend, heartbeat_interval=0.3) as gw:
        base = f"/api/v1/namespaces/{namespace}/configmaps"
        assert httpx.get(gw.url + base).status_code == 200
        before = _tasks(gw)
        started = _StreamTasks(gw)
        conn, data = _open(gw, base, "", "Accept: text/event-stream", until=b"SYNCED")
        try:
            wait_until(lambda: _in_groups(gw) == 1, 5, message="written to in a group")
            during = []
            for i in range(3):
                kube.create(base, {"metadata": {"name": f"cm-{i}"}})
                data = _read_until(conn, f'"name":"cm-{i}"'.encode(), data)
                during.append(_tasks(gw))
            _read_until(conn, b": heartbeat", data[data.rindex(b"cm-2"):])  # written by its timer
            during.append(_tasks(gw))
            assert max(during) == before, (before, during)
            assert started.started == 0, "events and heartbeats went out with no task"
        finally:
            conn.close()
        wait_until(lambda: gw.gateway.limiter.open == 0, 5, message="the slot freed")
        wait_until(lambda: _tasks(gw) == before, 5, message="nothing left running")


def test_a_burst_goes_through_a_task_and_the_stream_parks_again(backend, kube, namespace):
    """An event larger than one write's piece is sent by a task, which waits for the client
    between pieces; then the stream parks again, and its next events still come in order."""
    with run_gateway(backend, heartbeat_interval=3600.0) as gw:
        base = f"/api/v1/namespaces/{namespace}/configmaps"
        assert httpx.get(gw.url + base).status_code == 200
        before = _tasks(gw)
        started = _StreamTasks(gw)
        conn, data = _open(gw, base, "?watch=true")
        try:
            kube.create(base, {"metadata": {"name": "big"}, "data": {"x": "y" * 200_000}})
            kube.create(base, {"metadata": {"name": "after"}})
            data = _read_until(conn, b'"name":"after"', data)
            assert data.index(b'"name":"big"') < data.index(b'"name":"after"')
            assert data.count(b"y" * 1000) >= 199, "the whole object"
            assert started.started >= 1, "the burst went through a task"
            wait_until(lambda: _tasks(gw) == before, 5, message="parked again, no task")
            assert _handed_over(gw) == 1
        finally:
            conn.close()


def test_what_a_client_sends_during_a_stream_is_bounded(backend, namespace):
    """Bytes sent while a stream holds the connection are kept for the next request: one
    read, reading paused after it (the rest waits in the client's socket, as uvicorn leaves
    a pipelined request), and a read past 64 KiB closes the connection. A client cannot make
    the gateway hold what it sends."""
    from app.streams.handover import _EARLY_LIMIT

    with run_gateway(backend) as gw:
        conn, _ = _open(gw, f"/api/v1/namespaces/{namespace}/configmaps", "",
                        "Accept: text/event-stream", until=b"SYNCED")
        try:
            def flood() -> None:
                try:
                    conn.sendall(b"x" * (4 << 20))
                except OSError:
                    pass  # closed by the gateway, or the test: either way it was not taken

            sender = threading.Thread(target=flood, daemon=True)
            sender.start()
            time.sleep(2)  # what is not read waits in the kernel's buffers, not the gateway's

            async def held() -> list[tuple[int, bool]]:
                return [(len(c._early), c.transport.is_reading())
                        for c in gw.server.server_state.connections
                        if isinstance(c, StreamConnection)]

            kept = asyncio.run_coroutine_threadsafe(held(), gw.gateway.loop).result(5)
            if not kept:  # closed past the bound: the stream ends
                wait_until(lambda: gw.gateway.limiter.open == 0, 5, message="the stream ended")
            for size, reading in kept:
                assert size <= _EARLY_LIMIT and not reading
        finally:
            conn.close()
        wait_until(lambda: gw.gateway.limiter.open == 0, 10, message="the stream ended")


def test_a_parked_stream_says_its_last_words_when_the_gateway_stops(backend, namespace):
    """Stopping, the gateway ends every stream with its last words (an event stream's: 503
    and the reconnect advice), handed over or not, and closes the connection after them."""
    with run_gateway(backend, heartbeat_interval=3600.0) as gw:
        conn, data = _open(gw, f"/api/v1/namespaces/{namespace}/configmaps", "",
                           "Accept: text/event-stream", until=b"SYNCED")
        try:
            began = time.monotonic()
            stopper = threading.Thread(target=gw.stop, daemon=True)
            stopper.start()
            data = _read_until(conn, b"the gateway is shutting down", data)
            conn.settimeout(5)
            rest = data
            while more := conn.recv(65536):
                rest += more
            assert rest.endswith(b"0\r\n\r\n"), rest[-100:]
            stopper.join(10)
            assert time.monotonic() - began < 4, "no wait for the graceful timeout"
        finally:
            conn.close()


def test_over_tls_a_stream_is_handed_over_and_its_connection_given_back(backend, namespace,
                                                                         tmp_path):
    """The same over HTTPS: the TLS transport's protocol is what is handed over and back."""
    import ssl

    from control_plane.certs import self_signed_cert

    cert, key = self_signed_cert(tmp_path)
    with run_gateway(backend, tls_cert_file=str(cert), tls_private_key_file=str(key)) as gw:
        base = f"/api/v1/namespaces/{namespace}/configmaps"
        context = ssl.create_default_context(cafile=str(cert))
        assert httpx.get(gw.url + base, verify=context).status_code == 200
        host, port = gw.url.removeprefix("https://").split(":")
        conn = context.wrap_socket(socket.create_connection((host, int(port)), timeout=10),
                                   server_hostname="127.0.0.1")
        try:
            conn.sendall(_get(f"{base}?watch=true&timeoutSeconds=2"))
            data = _read_until(conn, b"\r\n\r\n")
            wait_until(lambda: _handed_over(gw) == 1, 5, message="handed over")
            _read_until(conn, b"\r\n0\r\n\r\n", data)
            conn.sendall(_get(base))
            answer = _read_until(conn, b'"kind":"ConfigMapList"')
            assert b"HTTP/1.1 200" in answer
        finally:
            conn.close()
