"""Gateways for the app tests: real uvicorn servers on loopback, over a real or in-memory cluster.

A module marked ``cluster`` runs against the real kube-apiserver; any other
module against a ``FakeCluster`` of its own. The fixtures are the same either
way (``backend``, ``kube``, ``demo``, ``gateway``, ``http``, ``namespace``), so a
test about the gateway's HTTP semantics reads the same as one about sameness
with the API server.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest
import uvicorn

from app.bridge import call_on_loop
from app.launch.demo import seed_workload
from app.launch.server import uvicorn_config
from app.main import build_factory, create_app
from app.settings import Settings
from control_plane.cluster import free_port
from control_plane.fake import FakeCluster
from control_plane.kubeapi import KubeAPI
from informer_core.store import object_key
from tests.helpers import wait_until

DEMO_NS = "demo-shop"


class RunningGateway:
    """A gateway served by uvicorn in a background thread."""

    def __init__(self, settings: Settings, api_client=None, factory=None, reviewer=None,
                 connector=None) -> None:
        self.settings = settings
        self.app = create_app(settings, factory=factory, api_client=api_client, reviewer=reviewer,
                              connector=connector)
        tls = settings.tls_cert_file
        # the configuration serve uses, quieter and quicker to stop
        config = uvicorn_config(self.app, settings, host="127.0.0.1", log_level="warning",
                                timeout_graceful_shutdown=5)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="test-gateway", daemon=True)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{settings.port}"

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

    def has_seen(self, obj: dict) -> bool:
        """Whether the cache of ``obj``'s kind holds it (as written) at its version or later.

        True when no such cache is loaded yet, or loading: its first list will hold it.
        """
        meta = obj["metadata"]
        key = object_key(meta.get("namespace"), meta["name"])
        for entry in self.gateway.default.caches.entries().values():
            if entry.resource.kind == obj["kind"]:
                found = entry.hub.view.get(key)  # the hub: what lists' versions and streams follow
                return found is not None and \
                    int(found.resource_version) >= int(meta["resourceVersion"])
        return True

    def wait_streams(self, count: int, timeout: float = 10.0) -> None:
        """Wait until exactly ``count`` streams are subscribed to the gateway's caches."""
        def subscribed() -> bool:
            return sum(len(e.hub.subscribers) for e in self.gateway.default.caches.entries().values()) == count

        wait_until(subscribed, timeout, message=f"{count} subscribed streams")

    def wait_seen(self, obj: dict, timeout: float = 10.0) -> None:
        """Wait until the gateway's cache holds ``obj``; writes paced so keep their order on a watch.

        An informer's DeltaFIFO queues by key: changes to several objects that
        arrive in one burst may be handed on grouped by object, as client-go's are.
        """
        wait_until(lambda: self.has_seen(obj), timeout, message=f"the gateway to see {obj['metadata']}")

    def stop(self) -> None:
        gateway = getattr(self.app.state, "gateway", None)
        if gateway is not None and gateway.loop is not None:
            # As the CLI does on SIGTERM: end open streams so shutdown does not wait on them.
            call_on_loop(gateway.loop, gateway.begin_shutdown)
        self.server.should_exit = True
        self.thread.join(30)


@contextlib.contextmanager
def run_gateway(cluster, server=None, user=None, reviewer=None, discovery=None,
                lister_watcher=None, **overrides) -> Iterator[RunningGateway]:
    """A gateway over ``cluster``: a ``FakeCluster``, or a ``LocalCluster``'s ``server``
    (default: its primary apiserver) as ``user`` (default: admin); ``reviewer`` answers
    token and access reviews (default: the API server). Over a fake, ``discovery`` and
    ``lister_watcher`` replace the fake's own (to count, refuse or hold what it is asked)."""
    settings = replace(Settings(port=free_port(), bookmark_interval=1.0, heartbeat_interval=1.0,
                                sync_timeout=20.0), **overrides)
    if isinstance(cluster, FakeCluster):
        factory = build_factory(settings, lister_watcher_func=lister_watcher or cluster.lister_watcher,
                                discovery=discovery or cluster.discovery())
        running = RunningGateway(settings, factory=factory, reviewer=reviewer).start()
        client = None
    else:
        client = cluster.api_client(user=user, server=server)
        running = RunningGateway(settings, api_client=client, reviewer=reviewer).start()
    try:
        yield running
    finally:
        running.stop()
        if client is not None:
            client.close()


@pytest.fixture(scope="module")
def backend(request):
    """The module's API server: the real one for a module marked ``cluster``, else a fresh fake."""
    if request.node.get_closest_marker("cluster") is not None:
        return request.getfixturevalue("local_cluster")
    return FakeCluster()


@pytest.fixture(scope="module")
def kube(backend):
    """Writes and reads straight to the module's API server (as admin)."""
    return backend if isinstance(backend, FakeCluster) else KubeAPI.for_cluster(backend)


@pytest.fixture(scope="module")
def demo(kube) -> str:
    seed_workload(kube, DEMO_NS)
    return DEMO_NS


@pytest.fixture
def namespace(kube) -> Iterator[str]:
    """A fresh namespace for one test on the module's API server."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    kube.ensure_namespace(name)
    yield name
    kube.delete(f"/api/v1/namespaces/{name}")


@pytest.fixture(scope="module")
def gateway(backend, demo) -> Iterator[RunningGateway]:
    """A gateway shared by one module's tests (exempt from the per-test thread check;
    it is stopped, and its threads gone, before the next module runs)."""
    with run_gateway(backend) as running:
        yield running


@pytest.fixture
def http(gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway.url, timeout=30) as client:
        yield client


def clusters_file(path, names, default: str = "", **extra: dict) -> str:
    """Write a clusters file naming ``names`` (``extra[name]``: more keys of that cluster)."""
    import yaml

    entries = [{"name": n, **({"default": True} if n == default else {}), **extra.get(n, {})}
               for n in names]
    path.write_text(yaml.safe_dump({"clusters": entries}))
    return str(path)


@contextlib.contextmanager
def run_fake_clusters(fakes: dict, path, default: str = "", reviewer=None, reviewers=None,
                      **overrides) -> Iterator[RunningGateway]:
    """A gateway of several clusters, each a ``FakeCluster`` of ``fakes`` by name, configured
    by a clusters file at ``path`` (the file may be rewritten while it runs; a name it gains
    must be in ``fakes`` by then). ``reviewers[name]`` answers that cluster's reviews
    (default: ``reviewer``)."""
    from app.clusters.connect import connect
    from app.query.budget import QueryMemory

    clusters_file(path, list(fakes), default)
    settings = replace(Settings(port=free_port(), bookmark_interval=1.0, heartbeat_interval=1.0,
                                sync_timeout=20.0, clusters=str(path)), **overrides)

    def connector(spec, is_default):
        fake = fakes[spec.name]
        return connect(spec, settings, QueryMemory(), is_default,
                       reviewer=(reviewers or {}).get(spec.name, reviewer),
                       lister_watcher_func=fake.lister_watcher, discovery=fake.discovery())

    running = RunningGateway(settings, connector=connector).start()
    try:
        yield running
    finally:
        running.stop()
