"""Limits that protect the process, tried from outside: an oversized request head, numbers past
int64, and fifty event-stream subscribers that read nothing while objects churn."""

from __future__ import annotations

import json
import os
import socket
import statistics
import threading
import time

import httpx
import pytest

from control_plane.fake import FakeCluster
from tests.app.conftest import run_gateway
from tests.app.readers import LineReader, sse_events
from tests.app.test_hostile_input import send
from tests.helpers import wait_until

NS = "limits"
PATH = f"/api/v1/namespaces/{NS}/configmaps"


def _port(gateway) -> int:
    return int(gateway.url.rsplit(":", 1)[1])


@pytest.fixture
def cluster() -> FakeCluster:
    cluster = FakeCluster()
    cluster.ensure_namespace(NS)
    for i in range(10):
        cluster.create(PATH, {"metadata": {"name": f"c{i}"}, "data": {"n": "0"}})
    return cluster


def test_a_request_head_past_max_header_bytes_gets_431_and_the_connection_closes(cluster):
    with run_gateway(cluster, max_header_bytes=64 * 1024) as gateway:
        fits = b"GET " + PATH.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 60_000 + b"\r\n\r\n"
        assert send(_port(gateway), fits)[0] == 200
        for head in (b"GET " + PATH.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 70_000 + b"\r\n\r\n",
                     b"GET " + PATH.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     + b"".join(b"X-%d: v\r\n" % i for i in range(10_000)) + b"\r\n",
                     b"GET " + PATH.encode() + b"?" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"):
            status, headers, body = send(_port(gateway), head)
            assert status == 431 and headers[b"connection"] == b"close", (status, body[:200])
            assert b"exceed 65536 bytes" in body
        assert send(_port(gateway), fits)[0] == 200, "the next request is served as before"


def test_the_default_head_limit_is_the_api_servers_one_mebibyte(cluster):
    with run_gateway(cluster) as gateway:
        big = b"GET " + PATH.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * (2 << 20) + b"\r\n\r\n"
        assert send(_port(gateway), big)[0] == 431


@pytest.mark.parametrize("value", ["9223372036854775808", "1" * 40, "1" * 5000])
def test_a_limit_past_int64_is_a_bad_request(cluster, value):
    with run_gateway(cluster) as gateway:
        answer = httpx.get(f"{gateway.url}{PATH}?limit={value}")
        assert answer.status_code == 400 and answer.json()["reason"] == "BadRequest", answer.text[:200]
    assert httpx.Client  # (the largest int64 itself is a valid limit: below)


def test_the_largest_int64_limit_answers_everything(cluster):
    with run_gateway(cluster) as gateway:
        answer = httpx.get(f"{gateway.url}{PATH}?limit=9223372036854775807")
        assert answer.status_code == 200 and len(answer.json()["items"]) == 10
        assert "continue" not in answer.json()["metadata"]


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class Churn:
    """Patches objects with ~16 KB of data stamped with the time, ``rate`` times a second."""

    def __init__(self, cluster: FakeCluster, rate: float = 100) -> None:
        self.cluster, self.rate = cluster, rate
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            self.cluster.patch(f"{PATH}/c{n % 10}", {"data": {"t": repr(time.time()),
                                                              "pad": os.urandom(6000).hex()}})
            n += 1
            time.sleep(1 / self.rate)

    def __enter__(self) -> Churn:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)


def _latencies(reader: LineReader, since: int) -> list[float]:
    """Seconds from each change's write to its arrival, for the events read after ``since``."""
    out = []
    for event in sse_events(reader.lines[since:]):
        if event.get("event") == "MODIFIED":
            data = json.loads(event["data"])
            out.append(float(reader.arrivals.get(event.get("id"), time.time())) - float(data["data"]["t"]))
    return out


class TimedReader(LineReader):
    """A LineReader that notes when each event id arrived."""

    def __init__(self, *args, **kwargs) -> None:
        self.arrivals: dict[str, float] = {}
        super().__init__(*args, **kwargs)

    def _run(self, url: str, headers: dict) -> None:
        with httpx.stream("GET", url, headers=headers, timeout=30) as response:
            self.status = response.status_code
            for line in response.iter_lines():
                self.lines.append(line)
                if line.startswith("id: "):
                    self.arrivals[line[4:]] = time.time()
                if self._stop.is_set():
                    break
        self._done.set()


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 2 else values[0]


@pytest.mark.timeout(120)
def test_fifty_subscribers_that_read_nothing_are_cut_off_and_others_keep_their_pace(cluster):
    # a small ring, full before the measurements start: what memory grows by is the streams'
    with run_gateway(cluster, subscriber_queue=50, stall_timeout=2.0, heartbeat_interval=1.0,
                     event_ring_size=100) as gateway:
        url = f"{gateway.url}/core/v1/namespaces/{NS}/configmaps"
        readers = [TimedReader(url, {"Accept": "text/event-stream"}) for _ in range(5)]
        try:
            for reader in readers:
                reader.wait_for(lambda l: any(e.get("event") == "SYNCED" for e in sse_events(l)))
            with Churn(cluster):
                time.sleep(4)  # the pace with readers only
                marks = [len(r.lines) for r in readers]
                before = [x for r in readers for x in _latencies(r, 0)]
                rss_before, fds_before = _rss_mib(), _fds()
                stalled = []
                for _ in range(50):  # read nothing, with the smallest receive window there is
                    conn = socket.socket()
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                    conn.connect(("127.0.0.1", _port(gateway)))
                    conn.sendall(f"GET /core/v1/namespaces/{NS}/configmaps HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                 f"Accept: text/event-stream\r\n\r\n".encode())
                    stalled.append(conn)
                gateway.wait_streams(55, timeout=10)
                peak = {"rss": _rss_mib()}

                def cut_off() -> bool:
                    peak["rss"] = max(peak["rss"], _rss_mib())
                    return gateway.gateway.limiter.open == 5

                wait_until(cut_off, 30, message="the 50 stalled streams to be ended")
                time.sleep(2)
                during = [x for r, m in zip(readers, marks) for x in _latencies(r, m)]
            gateway.wait_streams(5)
            # the server's side of each is gone too: dropped by the kernel (TCP_USER_TIMEOUT)
            # once nothing was taken for 10 s, with whatever it still had to send
            wait_until(lambda: _fds() <= fds_before + 50 + 5, 30,
                       message="the server to close its side of every stalled stream")
            fds_after = _fds()
            for conn in stalled:  # each was ended: reset by the server's kernel
                conn.settimeout(10)
                with pytest.raises(ConnectionResetError):
                    while conn.recv(1 << 20):
                        pass
                conn.close()
            assert all(not r.ended(timeout=0) for r in readers), "the readers' streams go on"
        finally:
            for reader in readers:
                reader.close()
    p99_before, p99_during = _p99(before), _p99(during)
    print(f"\n50 stalled subscribers: readers' p99 {p99_before * 1000:.1f} ms before, "
          f"{p99_during * 1000:.1f} ms with them; RSS +{peak['rss'] - rss_before:.1f} MiB at most; "
          f"fds {fds_before} -> {fds_after} (the 50 client sockets still open)")
    assert len(before) > 100 and len(during) > 100
    assert p99_during < max(3 * p99_before, p99_before + 0.05), (p99_before, p99_during)
    assert peak["rss"] - rss_before < 64, "memory bounded while fifty readers read nothing"


@pytest.mark.timeout(60)
def test_a_reader_that_pauses_past_its_queue_ends_with_429_and_resumes_exactly(cluster):
    with run_gateway(cluster, subscriber_queue=20, stall_timeout=30.0) as gateway:
        conn = socket.socket()
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        conn.connect(("127.0.0.1", _port(gateway)))
        conn.sendall(f"GET /core/v1/namespaces/{NS}/configmaps HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     f"Accept: text/event-stream\r\n\r\n".encode())
        gateway.wait_streams(1)
        with Churn(cluster):
            wait_until(lambda: any(s.overflowed for e in gateway.gateway.cache.entries().values()
                                   for s in e.hub.subscribers), 20, message="the reader to fall behind")
        conn.settimeout(10)
        data = b""
        while chunk := conn.recv(1 << 20):  # it reads again: all it was sent, then the last words
            data += chunk
        conn.close()
        text = data.decode()
        frames = sse_events(text.replace("\r\n", "\n").split("\n"))
        error = [f for f in frames if f.get("event") == "ERROR"]
        assert error and json.loads(error[-1]["data"])["code"] == 429
        last_id = [f["id"] for f in frames if "id" in f and "~" not in f["id"]][-1]
        resumed = httpx.get(f"{gateway.url}/core/v1/namespaces/{NS}/configmaps?timeoutSeconds=1",
                            headers={"Accept": "text/event-stream", "Last-Event-ID": last_id})
        assert "event: RESET" not in resumed.text, "the ring still covers it: exactly the rest"
        ids = [f["id"] for f in frames if "id" in f] + \
              [f["id"] for f in sse_events(resumed.text.split("\n")) if "id" in f]
        assert len(ids) == len(set(ids)), "no event twice"
