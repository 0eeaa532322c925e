"""The process model's parts on their own: the shared socket, the sibling channel and the
merged metrics (the whole pod, against the real API server, is ``test_supervisor_live.py``)."""

from __future__ import annotations

import asyncio
import os

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.launch.supervisor import listen, listen_each
from app.process.peers import Peers, merge_expositions


def test_the_address_is_bound_once_and_can_be_bound_again_right_after():
    sock = listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    assert sock.get_inheritable()
    with pytest.raises(OSError):
        listen("127.0.0.1", port)  # held: a second gateway on the port fails loudly
    sock.close()
    listen("127.0.0.1", port).close()


def test_siblings_answer_over_their_sockets_and_a_missing_one_is_left_out(tmp_path):
    async def scenario():
        asked = []

        async def echo(argument: str) -> bytes:
            asked.append(argument)
            return f"pong {argument}".encode()

        peers = [Peers(i, 3, str(tmp_path), {"ping": echo}) for i in range(3)]
        for p in peers[:2]:  # worker 2 is restarting: no socket
            await p.start()
        try:
            assert await peers[0].ask_all("ping", "x") == {1: b"pong x"}
            assert await peers[1].ask(0, "nonsense") == b""  # unknown verbs get nothing
            peers[1].tell_all("ping", "y")
            for _ in range(100):
                if "y" in asked:
                    break
                await asyncio.sleep(0.01)
            assert asked == ["x", "y"]
        finally:
            for p in peers[:2]:
                await p.close()
        assert not any(name.endswith(".sock") for name in os.listdir(tmp_path))

    asyncio.run(scenario())


def test_one_scrape_shows_every_worker_each_series_labelled():
    a = (b'# HELP kcg_open_streams Open streams\n# TYPE kcg_open_streams gauge\n'
         b'kcg_open_streams{kind="sse"} 2.0\n'
         b'# HELP kcg_http_request_duration_seconds Time\n'
         b'# TYPE kcg_http_request_duration_seconds histogram\n'
         b'kcg_http_request_duration_seconds_bucket{code="200",le="0.1",route="resource"} 3.0\n'
         b'kcg_http_request_duration_seconds_bucket{code="200",le="+Inf",route="resource"} 4.0\n'
         b'kcg_http_request_duration_seconds_count{code="200",route="resource"} 4.0\n'
         b'kcg_http_request_duration_seconds_sum{code="200",route="resource"} 0.5\n')
    b = (b'# HELP kcg_open_streams Open streams\n# TYPE kcg_open_streams gauge\n'
         b'kcg_open_streams{kind="sse"} 5.0\n'
         b'# HELP kcg_informer_relists_total Relists\n# TYPE kcg_informer_relists_total counter\n'
         b'kcg_informer_relists_total{resource="pods.v1"} 1.0\n')
    merged = merge_expositions({0: a, 1: b}).decode()
    families = {f.name: f for f in text_string_to_metric_families(merged)}
    streams = {s.labels["worker"]: s.value for s in families["kcg_open_streams"].samples}
    assert streams == {"0": 2.0, "1": 5.0}
    assert merged.count("# TYPE kcg_open_streams gauge") == 1
    buckets = [s for s in families["kcg_http_request_duration_seconds"].samples
               if s.name.endswith("_bucket")]
    assert {s.labels["worker"] for s in buckets} == {"0"} and len(buckets) == 2
    (relists,) = families["kcg_informer_relists"].samples
    assert relists.labels == {"resource": "pods.v1", "worker": "1"} and relists.value == 1.0


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_configuration_that_does_not_load_ends_the_command_with_exit_code_2(tmp_path, workers):
    import subprocess
    import sys

    from control_plane.cluster import free_port

    done = subprocess.run(
        [sys.executable, "-m", "app.launch.cli", "serve", "--kubeconfig", str(tmp_path / "missing"),
         "--port", str(free_port()), "--workers", workers],
        capture_output=True, text=True, timeout=60, env={**os.environ, "KUBERNETES_SERVICE_HOST": ""})
    assert done.returncode == 2, done.stderr[-2000:]
    assert "cannot load a Kubernetes configuration" in done.stderr


def test_each_worker_gets_its_own_socket_and_the_kernel_spreads_connections_between_them():
    """Before, the workers shared one socket and Linux woke the most recently idle first: under
    keep-alive one worker took a round's every connection. In one ``SO_REUSEPORT`` group the
    kernel hashes each connection's addresses: 128 from one client, the chance that either
    socket gets under a quarter is below 1e-8."""
    import socket

    group = listen_each("127.0.0.1", 0, 2)
    try:
        port = group[0].getsockname()[1]
        assert group[1].getsockname()[1] == port and all(s.get_inheritable() for s in group)
        with pytest.raises(OSError):
            listen("127.0.0.1", port)  # the group holds the address: another gateway fails
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(128)]
        counts = []
        for sock in group:
            sock.settimeout(0.5)
            accepted = 0
            while True:
                try:
                    conn, _ = sock.accept()
                except TimeoutError:
                    break
                conn.close()
                accepted += 1
            counts.append(accepted)
        for client in clients:
            client.close()
        assert sum(counts) == 128
        assert all(32 <= count <= 96 for count in counts), counts
    finally:
        for sock in group:
            sock.close()
    listen("127.0.0.1", port).close()  # let go with the group
