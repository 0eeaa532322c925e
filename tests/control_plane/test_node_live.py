"""The node's own guards, on the session's node: what reaches its kubelet, and from where.

The kubelet listens on the node's address (``GATEWAY``) with the API over which the API
server asks for logs and exec. Before, it let anyone in (anonymous, ``AlwaysAllow``), and
nothing stopped packets for the node's range from another host: a host on the machine's
network segment that routes ``198.18.0.0/15`` here got exec in every pod.
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import urllib.error
import urllib.request
import uuid

import pytest

from control_plane.node_network import GATEWAY

pytestmark = pytest.mark.cluster

# an outside host, played by a network namespace of this test's own: a veth pair in the
# range kept for documentation (TEST-NET-2), which no network uses
_HOST_SIDE, _OUTSIDE, _PREFIX = "198.51.100.1", "198.51.100.2", "30"


def _run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, text=True)


def test_the_kubelet_answers_only_whom_the_api_server_vouches_for(local_node):
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # its own certificate
    url = f"https://{GATEWAY}:{local_node.kubelet_port}/pods"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url, timeout=10, context=context)
    refused.value.close()
    assert refused.value.code == 401, "nobody anonymous"
    token = urllib.request.Request(url, headers={
        "Authorization": f"Bearer {local_node.cluster.user.token}"})  # a user without rights
    with pytest.raises(urllib.error.HTTPError) as forbidden:
        urllib.request.urlopen(token, timeout=10, context=context)
    forbidden.value.close()
    assert forbidden.value.code == 403, "reviewed and authorized by the API server"
    assert isinstance(local_node.kubelet_pods(), list), "the API server's certificate reads"


def test_the_nodes_addresses_refuse_a_host_outside_the_machine(local_node):
    """A network namespace that is not the bridge's, routing the node's range to this machine
    over a veth, reaches this machine's own address on the veth but not the node's: its
    kubelet and API server ports are dropped by the input guard."""
    namespace, link = f"kcg-out-{uuid.uuid4().hex[:6]}", f"kcgv{uuid.uuid4().hex[:6]}"
    listener: socket.socket | None = None
    _run("ip", "netns", "add", namespace)
    try:
        _run("ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns",
             namespace)
        _run("ip", "addr", "add", f"{_HOST_SIDE}/{_PREFIX}", "dev", link)
        _run("ip", "link", "set", link, "up")
        inside = ("ip", "netns", "exec", namespace)
        _run(*inside, "ip", "addr", "add", f"{_OUTSIDE}/{_PREFIX}", "dev", "eth0")
        _run(*inside, "ip", "link", "set", "eth0", "up")
        _run(*inside, "ip", "link", "set", "lo", "up")
        _run(*inside, "ip", "route", "add", "198.18.0.0/15", "via", _HOST_SIDE)
        listener = socket.create_server((_HOST_SIDE, 0))
        api_port = int(local_node.cluster.primary.url.rsplit(":", 1)[1])
        probe = ("import socket, sys\n"
                 "for host, port in zip(sys.argv[1::2], sys.argv[2::2]):\n"
                 "    try:\n"
                 "        socket.create_connection((host, int(port)), timeout=3).close()\n"
                 "        print(host, port, 'open')\n"
                 "    except OSError as exc:\n"
                 "        print(host, port, type(exc).__name__)\n")
        done = subprocess.run(
            [*inside, "python3", "-c", probe, _HOST_SIDE, str(listener.getsockname()[1]),
             GATEWAY, str(local_node.kubelet_port), GATEWAY, str(api_port)],
            capture_output=True, text=True, timeout=60, check=True)
        said = done.stdout.split("\n")
        assert said[0].endswith("open"), f"the veth carries nothing: {done.stdout}"
        assert said[1].endswith("TimeoutError"), f"the kubelet is reached: {done.stdout}"
        assert said[2].endswith("TimeoutError"), f"the API server is reached: {done.stdout}"
    finally:
        if listener is not None:
            listener.close()
        subprocess.run(["ip", "link", "del", link], capture_output=True)
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
