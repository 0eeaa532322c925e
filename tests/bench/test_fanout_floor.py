"""The fan-out floor: each watch event the API server sends, as one SSE chunk to every client."""

from __future__ import annotations

import functools
import socket
import time

import orjson
import pytest

from bench.fanout import NS, start_floor
from bench.fanout_floor import frame
from control_plane.kubeapi import KubeAPI


def test_a_watch_line_becomes_one_chunk_with_the_servers_object_bytes():
    line = b'{"type":"MODIFIED","object":{"kind":"ConfigMap","metadata":{"name":"a"}}}'
    payload = b'id: 7\nevent: MODIFIED\ndata: {"kind":"ConfigMap","metadata":{"name":"a"}}\n\n'
    assert frame(7, line) == b"%x\r\n%b\r\n" % (len(payload), payload)


@pytest.mark.parametrize("line", [
    b'{"type":"BOOKMARK","object":{"kind":"ConfigMap","metadata":{"resourceVersion":"9"}}}',
    b"", b"not json", b'{"type":"ADDED"}', b'{"kind":"Status","code":410}'])
def test_what_is_not_an_event_is_not_sent(line):
    assert frame(1, line) is None


def _event_with(needle: bytes, seen: bytes) -> bool:
    """Whether ``seen`` holds the whole event (up to its blank line) that holds ``needle``."""
    at = seen.find(needle)
    return at >= 0 and b"\n\n" in seen[at:]


def _read_until(sock: socket.socket, done, timeout: float, seen: bytes = b"") -> bytes:
    """``seen`` and what ``sock`` sends after it, until ``done(all of it)`` (or ``timeout``)."""
    sock.settimeout(0.5)
    deadline = time.monotonic() + timeout
    while not done(seen) and time.monotonic() < deadline:
        try:
            seen += sock.recv(65536)
        except TimeoutError:
            pass
    return seen


@pytest.mark.cluster
def test_every_client_gets_each_change_as_the_api_server_sent_it(local_cluster):
    kube = KubeAPI.for_cluster(local_cluster)
    kube.ensure_namespace(NS)
    path = f"/api/v1/namespaces/{NS}/configmaps"
    if kube.get(f"{path}/floor-test", ok_missing=True) is None:
        kube.create(path, {"metadata": {"name": "floor-test"}})
    proc, url = start_floor(local_cluster)
    clients = []
    try:
        port = int(url.rsplit(":", 1)[1].strip("/"))
        for _ in range(3):
            client = socket.create_connection(("127.0.0.1", port))
            client.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            clients.append(client)
        for client in clients:
            head = _read_until(client, lambda seen: b"\r\n\r\n" in seen, 10)
            assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        seen = [b""] * len(clients)
        for _ in range(10):  # until the floor's watch is open (it lists first)
            patched = kube.patch(f"{path}/floor-test", {"data": {"n": str(time.time_ns())}})
            version = b'"resourceVersion":"' + patched["metadata"]["resourceVersion"].encode()
            seen[0] = _read_until(clients[0], functools.partial(_event_with, version), 2, seen[0])
            if _event_with(version, seen[0]):
                break
        for i, client in enumerate(clients):
            got = _read_until(client, functools.partial(_event_with, version), 10, seen[i])
            data = [line[6:] for line in got.split(b"\n") if line.startswith(b"data: ")]
            assert b"event: MODIFIED" in got
            assert [orjson.loads(d)["data"] for d in data][-1] == patched["data"]
    finally:
        for client in clients:
            client.close()
        proc.kill()
        proc.wait()
