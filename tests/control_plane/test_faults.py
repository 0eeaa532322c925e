"""The fault proxy on its own, in front of a small echo server."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from control_plane.faults import FaultProxy


@pytest.fixture
def echo():
    server = socket.create_server(("127.0.0.1", 0))
    threads = []

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return

            def answer(c=conn):
                with c:
                    try:
                        while data := c.recv(1024):
                            c.sendall(data)
                    except ConnectionResetError:  # the proxy's reset reaches this side too
                        pass
            t = threading.Thread(target=answer)
            threads.append(t)
            t.start()

    acceptor = threading.Thread(target=serve)
    acceptor.start()
    yield server.getsockname()[1]
    server.shutdown(socket.SHUT_RDWR)
    server.close()
    acceptor.join(5)
    for t in threads:
        t.join(5)


def test_it_relays_holds_while_paused_and_delivers_in_order_on_resume(echo):
    with FaultProxy("127.0.0.1", echo) as proxy, \
            socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as conn:
        conn.sendall(b"one")
        assert conn.recv(16) == b"one"
        proxy.pause()
        conn.sendall(b"two")
        conn.settimeout(0.5)
        with pytest.raises(TimeoutError):
            conn.recv(16)
        proxy.resume()
        conn.settimeout(5)
        assert conn.recv(16) == b"two"
        assert proxy.connections == 1


def test_latency_delays_each_answer(echo):
    with FaultProxy("127.0.0.1", echo) as proxy, \
            socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as conn:
        proxy.latency = 0.3
        began = time.monotonic()
        conn.sendall(b"slow")
        assert conn.recv(16) == b"slow"
        assert time.monotonic() - began >= 0.3


def test_reset_cuts_open_connections_with_an_rst_and_new_ones_still_pass(echo):
    with FaultProxy("127.0.0.1", echo) as proxy:
        conn = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        conn.sendall(b"x")
        assert conn.recv(16) == b"x"
        assert proxy.reset() == 1
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            for _ in range(50):  # the RST arrives; the next read or write fails
                conn.sendall(b"y")
                if conn.recv(16) == b"":
                    raise ConnectionResetError("closed")
                time.sleep(0.02)
        conn.close()
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as again:
            again.sendall(b"z")
            assert again.recv(16) == b"z"
