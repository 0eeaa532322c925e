"""Stream readers for tests: lines of a streaming answer read on a thread, and their parsers."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import orjson


class LineReader:
    """Reads a streaming response's lines on a thread; wait for what you expect."""

    def __init__(self, url: str, headers: dict | None = None, verify=True) -> None:
        self.lines: list[str] = []
        self.status = None
        self.headers = None
        self.error: BaseException | None = None  # why the read ended, if not by the server
        self._done = threading.Event()
        self._stop = threading.Event()
        self._socket: socket.socket | None = None
        self._verify = verify
        self._thread = threading.Thread(target=self._run, args=(url, headers or {}), daemon=True)
        self._thread.start()

    def _run(self, url: str, headers: dict) -> None:
        # No read timeout: a watch without bookmarks is silent for as long as nothing changes
        # (an informer backing off from a stopped API server: up to 30 s and more), and a
        # reader that gave up then would look like a stream the server ended. The tests'
        # own waits bound how long they wait; ``close`` wakes a blocked read.
        try:
            with httpx.stream("GET", url, headers=headers, timeout=httpx.Timeout(30, read=None),
                              verify=self._verify) as response:
                self.status, self.headers = response.status_code, response.headers
                stream = response.extensions.get("network_stream")
                self._socket = stream.get_extra_info("socket") if stream is not None else None
                if self._stop.is_set():
                    return
                for line in response.iter_lines():
                    self.lines.append(line)
                    if self._stop.is_set():
                        break
        except httpx.HTTPError as error:
            self.error = error
        finally:
            self._done.set()

    def wait_for(self, predicate, timeout: float = 10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self.lines):
                return
            if self._done.is_set() and not predicate(self.lines):
                ended = f"the read ended ({self.error!r})" if self.error else "the stream ended"
                raise AssertionError(f"{ended}; lines so far: {self.lines[-10:]}")
            time.sleep(0.02)
        raise AssertionError(f"timed out; lines so far: {self.lines[-10:]}")

    def ended(self, timeout: float = 10.0) -> bool:
        return self._done.wait(timeout)

    def close(self) -> None:
        """Stop reading now: a read blocked on an idle stream is woken by shutting the socket."""
        self._stop.set()
        sock = self._socket
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed
        self._thread.join(15)
        assert not self._thread.is_alive(), "the reader did not stop"


def events(lines: list[str]) -> list[tuple[str, str]]:
    out = []
    for line in lines:
        if line.strip():
            doc = orjson.loads(line)
            obj = doc["object"]
            out.append((doc["type"], obj.get("metadata", {}).get("name", obj.get("code", ""))))
    return out


def sse_events(lines: list[str]) -> list[dict]:
    """Parse SSE lines into events: {id, event, data}."""
    out, current = [], {}
    for line in lines:
        if line == "":
            if current:
                out.append(current)
            current = {}
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(": ")
            current[field] = value
    return out


def _changes(lines: list[str]) -> list[tuple[str, str]]:
    return [(e["event"], orjson.loads(e["data"])["metadata"]["name"])
            for e in sse_events(lines) if e.get("event") in ("ADDED", "MODIFIED", "DELETED")]
