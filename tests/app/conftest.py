"""Gateways for the app tests: real uvicorn servers on loopback against the test cluster."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest
import uvicorn

from app.demo import seed_workload
from app.main import create_app
from app.settings import Settings
from informer_core.testing.cluster import free_port
from informer_core.testing.kubeapi import KubeAPI

DEMO_NS = "demo-shop"


class RunningGateway:
    """A gateway served by uvicorn in a background thread."""

    def __init__(self, settings: Settings, api_client) -> None:
        self.settings = settings
        self.app = create_app(settings, api_client=api_client)
        config = uvicorn.Config(self.app, host="127.0.0.1", port=settings.port, log_level="warning",
                                lifespan="on", timeout_graceful_shutdown=5)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="test-gateway", daemon=True)
        self.url = f"http://127.0.0.1:{settings.port}"

    def start(self) -> RunningGateway:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("gateway did not start")
            time.sleep(0.02)
        return self

    @property
    def gateway(self):
        return self.app.state.gateway

    def stop(self) -> None:
        gateway = getattr(self.app.state, "gateway", None)
        if gateway is not None and gateway.loop is not None:
            # As the CLI does on SIGTERM: end open streams so shutdown does not wait on them.
            gateway.loop.call_soon_threadsafe(gateway.begin_shutdown)
        self.server.should_exit = True
        self.thread.join(30)


@contextlib.contextmanager
def run_gateway(local_cluster, server=None, **overrides) -> Iterator[RunningGateway]:
    """A gateway on ``server`` (default: the cluster's primary apiserver)."""
    settings = replace(Settings(port=free_port(), bookmark_interval=1.0, heartbeat_interval=1.0,
                                sync_timeout=20.0), **overrides)
    client = local_cluster.api_client(server=server)
    running = RunningGateway(settings, client).start()
    try:
        yield running
    finally:
        running.stop()
        client.close()


@pytest.fixture(scope="session")
def kube(local_cluster) -> KubeAPI:
    return KubeAPI.for_cluster(local_cluster)


@pytest.fixture(scope="session")
def demo(kube) -> str:
    seed_workload(kube, DEMO_NS)
    return DEMO_NS


@pytest.fixture(scope="module")
def gateway(local_cluster, demo) -> Iterator[RunningGateway]:
    """A gateway shared by one module's tests (exempt from the per-test thread check;
    it is stopped, and its threads gone, before the next module runs)."""
    with run_gateway(local_cluster) as running:
        yield running


@pytest.fixture
def http(gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway.url, timeout=30) as client:
        yield client
