"""The node's cluster DNS answers Service names as CoreDNS's kubernetes plugin does (queries
built byte by byte as a stub resolver sends them; the node's pods resolve through it in
tests/deploy/test_chart_on_node.py)."""

from __future__ import annotations

import socket
import struct

import pytest

from control_plane.cluster_dns import ClusterDNS, answer

SERVICES = {("kcg", "gw-kube-cache-gateway"): "198.19.0.212", ("default", "kubernetes"): "198.19.0.1"}


def _query(name: str, qtype: int = 1, ident: int = 0x1234) -> bytes:
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split("."))
    return struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + labels + b"\0" + \
        struct.pack("!HH", qtype, 1)


def _read(reply: bytes) -> tuple[int, int, list[str]]:
    """(id, rcode, the A records' addresses)."""
    ident, flags, _, count = struct.unpack("!HHHH", reply[:8])
    assert flags & 0x8000, "a reply"
    at = 12
    while reply[at]:
        at += 1 + reply[at]
    at += 5
    addresses = []
    for _ in range(count):
        kind, _, _, length = struct.unpack("!HHIH", reply[at + 2:at + 12])
        if kind == 1:
            addresses.append(socket.inet_ntoa(reply[at + 12:at + 12 + length]))
        at += 12 + length
    return ident, flags & 0xF, addresses


def _lookup(namespace: str, name: str) -> str | None:
    return SERVICES.get((namespace, name))


@pytest.mark.parametrize("name, rcode, addresses", [
    ("gw-kube-cache-gateway.kcg.svc.cluster.local", 0, ["198.19.0.212"]),
    ("KUBERNETES.default.svc.cluster.local.", 0, ["198.19.0.1"]),  # names are not case-bound
    # the search path's first tries of "NAME.kcg.svc": no such name, the resolver goes on
    ("gw-kube-cache-gateway.kcg.svc.kcg.svc.cluster.local", 3, []),
    ("missing.kcg.svc.cluster.local", 3, []),
    ("example.com", 3, []),  # nothing beyond the cluster's names: never asked further
])
def test_service_names_and_only_those_are_answered(name, rcode, addresses):
    assert _read(answer(_query(name), _lookup)) == (0x1234, rcode, addresses)


def test_other_types_of_a_service_name_are_empty_not_missing():
    """AAAA of a Service name: no record, but the name exists (glibc asks A and AAAA)."""
    assert _read(answer(_query("kubernetes.default.svc.cluster.local", qtype=28), _lookup)) == \
        (0x1234, 0, [])


def test_what_is_not_one_query_is_refused_or_ignored():
    assert answer(b"\x00\x01", _lookup) is None  # too short
    reply = bytearray(_query("x.y.svc.cluster.local"))
    reply[2] |= 0x80
    assert answer(bytes(reply), _lookup) is None  # a reply: never answered
    broken = answer(_query("x.y.svc.cluster.local")[:20], _lookup)
    assert struct.unpack("!HH", broken[:4]) == (0x1234, 0x8101)  # FORMERR, no question


def test_it_serves_over_udp():
    server = ClusterDNS("127.0.0.1", _lookup, port=0)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
            client.settimeout(5)
            client.sendto(_query("kubernetes.default.svc.cluster.local"), server.address)
            reply, _ = client.recvfrom(512)
        assert _read(reply) == (0x1234, 0, ["198.19.0.1"])
    finally:
        server.stop()
