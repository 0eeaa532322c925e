"""The node's cluster DNS: each Service's name answered with its ClusterIP.

Pods find Services by name (``NAME.NAMESPACE.svc``, through the search path the kubelet
writes into each pod's ``resolv.conf``); a cluster runs CoreDNS for that, which Debian does
not package. This answers the one record those lookups need — ``A`` for
``NAME.NAMESPACE.svc.cluster.local`` — from the API server, asked at each query (a Service
created a moment ago is found), and says ``NXDOMAIN`` for every other name and ``NODATA``
for other types of a Service's name, as CoreDNS's kubernetes plugin does, so a resolver
walks its search path without waiting. It serves UDP on the node's bridge address, which
the node's input guard (``control_plane.node_network``) lets only the machine itself and its
pods reach: a host of the same network segment that routes the node's range to this machine
is dropped before it can ask.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable

__all__ = ["ClusterDNS", "answer"]

DOMAIN = "svc.cluster.local"
_A, _IN = 1, 1
_NOERROR, _FORMERR, _NXDOMAIN, _NOTIMP = 0, 1, 3, 4


def _question(packet: bytes) -> tuple[str, int, int, int] | None:
    """The query's (name, type, class, end of the question) or ``None`` when unreadable."""
    labels, at = [], 12
    while True:
        if at >= len(packet):
            return None
        length = packet[at]
        if length == 0:
            at += 1
            break
        if length & 0xC0:  # a pointer: never in a question a resolver sends
            return None
        labels.append(packet[at + 1:at + 1 + length].decode("ascii", "replace").lower())
        at += 1 + length
    if at + 4 > len(packet):
        return None
    qtype, qclass = struct.unpack("!HH", packet[at:at + 4])
    return ".".join(labels), qtype, qclass, at + 4


def answer(packet: bytes, cluster_ip: Callable[[str, str], str | None]) -> bytes | None:
    """The reply to one query; ``cluster_ip(namespace, name)`` is a Service's address
    (``None``: no such Service, or one without a ClusterIP). ``None``: not a query."""
    if len(packet) < 12:
        return None
    ident, flags, questions = struct.unpack("!HHH", packet[:6])
    if flags & 0x8000:  # a reply, not a query
        return None
    read = _question(packet) if questions == 1 else None
    recursion = flags & 0x0100
    if read is None or (flags >> 11) & 0xF:  # not one question, or not a standard query
        code = _FORMERR if read is None else _NOTIMP
        return struct.pack("!HHHHHH", ident, 0x8000 | recursion | code, 0, 0, 0, 0)
    name, qtype, qclass, end = read
    question = packet[12:end]
    address = None
    parts = name.split(".")
    if name.endswith("." + DOMAIN) and len(parts) == 2 + DOMAIN.count(".") + 1:
        address = cluster_ip(parts[1], parts[0])
    code = _NOERROR if address is not None else _NXDOMAIN
    records = b""
    if address is not None and qtype == _A and qclass == _IN:
        records = struct.pack("!HHHIH", 0xC00C, _A, _IN, 5, 4) + socket.inet_aton(address)
    header = struct.pack("!HHHHHH", ident, 0x8400 | recursion | code, 1,
                         1 if records else 0, 0, 0)
    return header + question + records


class ClusterDNS:
    """``answer`` served on ``address:port`` over UDP, on a thread, until ``stop``."""

    def __init__(self, address: str, cluster_ip: Callable[[str, str], str | None],
                 port: int = 53) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind((address, port))
        self.address = self._socket.getsockname()
        self._socket.settimeout(0.5)
        self._cluster_ip = cluster_ip
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="cluster-dns", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                packet, peer = self._socket.recvfrom(512)
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                reply = answer(packet, self._cluster_ip)
            except Exception:  # noqa: BLE001 - one bad lookup must not end the service
                reply = None
            if reply is not None:
                self._socket.sendto(reply, peer)

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(5)
        self._socket.close()
