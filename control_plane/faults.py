"""A fault proxy: a TCP relay in front of an API server that can stall, slow and cut.

The gateway is pointed at the proxy instead of the API server (TLS passes
through untouched: the API server's certificate names 127.0.0.1, where the
proxy listens). Faults act on every connection through it:

- ``pause()`` holds what the API server sends (a watch that lags, a stalled
  stream) until ``resume()``, which delivers it all, in order;
- ``latency`` delays each chunk the API server sends by that many seconds;
- ``reset()`` cuts every open connection with a TCP RST, as a dying load
  balancer does; new connections go through as before.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from typing import NamedTuple

__all__ = ["FaultProxy"]


class _Pair(NamedTuple):
    client: socket.socket
    upstream: socket.socket


class FaultProxy:
    """A TCP relay to ``(host, port)`` on a free loopback port; see the module docstring."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.latency = 0.0
        self._flowing = threading.Event()
        self._flowing.set()
        self._lock = threading.Lock()
        self._pairs: list[_Pair] = []
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.connections = 0
        self._accepter = threading.Thread(target=self._accept, name="fault-proxy", daemon=True)
        self._accepter.start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._target, timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            pair = _Pair(client, upstream)
            with self._lock:
                if self._closed:
                    client.close()
                    upstream.close()
                    return
                self._pairs.append(pair)
                self.connections += 1
                for source, sink, downstream in ((client, upstream, False),
                                                 (upstream, client, True)):
                    thread = threading.Thread(target=self._pump, args=(pair, source, sink, downstream),
                                              name="fault-proxy-pump", daemon=True)
                    self._threads.append(thread)
                    thread.start()

    def _pump(self, pair: _Pair, source: socket.socket, sink: socket.socket,
              downstream: bool) -> None:
        try:
            while data := source.recv(65536):
                if downstream:
                    self._flowing.wait()
                    if self.latency:
                        time.sleep(self.latency)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            self._drop(pair)

    def _drop(self, pair: _Pair, abort: bool = False) -> None:
        with self._lock:
            if pair in self._pairs:
                self._pairs.remove(pair)
        for s in pair:
            try:
                if abort:  # SO_LINGER 0: close sends RST instead of FIN; SHUT_RD wakes a reader
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    s.shutdown(socket.SHUT_RD)
                else:
                    s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def pause(self) -> None:
        """Hold everything the API server sends until ``resume``."""
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def reset(self) -> int:
        """Cut every open connection with an RST; return how many were cut."""
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            self._drop(pair, abort=True)
        return len(pairs)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._flowing.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        self._accepter.join(timeout=5)
        self.reset()
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
