"""pytest fixtures for a real kube-apiserver + etcd.

Load with ``pytest_plugins = ["control_plane.pytest_plugin"]``.

Fixtures:
    local_cluster  (session) the ``LocalCluster``
    local_postgres (session) a ``LocalPostgres``: a PostgreSQL server of the run's own
    local_node     (session) a ``LocalNode``: a cluster of its own with a node running pods
    kubeconfig     (session) path of an admin kubeconfig
    api_client     (session) a ready admin ``kubernetes.client.ApiClient``
    namespace      (function) a fresh namespace, deleted afterwards

With ``CI`` set to a true value a cluster that cannot be started fails every
test that needs it. Without it (a developer's machine where the build is
impossible) those tests are skipped, and the run ends with a banner saying so.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from control_plane.cluster import LocalCluster
from control_plane.errors import ClusterUnavailableError
from control_plane.postgres import LocalPostgres

__all__ = ["api_client", "in_ci", "kubeconfig", "local_cluster", "local_postgres", "namespace",
           "unavailable"]

_skipped_reason: list[str] = []


def in_ci() -> bool:
    """Return whether this run is CI's (``CI`` set to a true value)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")


def unavailable(reason: str) -> NoReturn:
    """End a test that lacks what it needs: a failure in CI, elsewhere a loud skip.

    The one way a test may go without a tool or the control plane, so that no
    skip can ever pass silently in CI.
    """
    if in_ci():
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(f"SKIPPED: {reason}")


@pytest.fixture(scope="session")
def local_cluster() -> Iterator[LocalCluster]:
    """Start one etcd + kube-apiserver for the whole session."""
    try:
        cluster = LocalCluster().start()
    except ClusterUnavailableError as exc:
        if not in_ci():
            _skipped_reason.append(str(exc))
        unavailable(f"the real kube-apiserver could not be started: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def local_postgres() -> Iterator[LocalPostgres]:
    """Start one PostgreSQL server for the session (the stores that share it take a database
    each); a failure in CI, elsewhere a loud skip, as for the API server."""
    try:
        server = LocalPostgres().start()
    except ClusterUnavailableError as exc:
        if not in_ci():
            _skipped_reason.append(str(exc))
        unavailable(f"PostgreSQL could not be started: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def local_node():
    """Start one cluster with a node that runs pods (``control_plane.node``) for the session:
    only the tests that run pods ask for it."""
    from control_plane.node import LocalNode, machine_state

    before = machine_state()
    try:
        node = LocalNode().start()
    except ClusterUnavailableError as exc:
        unavailable(f"the local node could not be started: {exc}")
    print(f"\n[local-node] Ready in {node.start_seconds:.1f} s: "
          + ", ".join(f"{k} {v:.1f}" for k, v in node.timings.items()))
    try:
        yield node
    finally:
        started = time.monotonic()
        left = node.stop()
        print(f"\n[local-node] stopped in {time.monotonic() - started:.1f} s")
        after = machine_state()
        # what the node made and did not remove fails the run, loudly, at its end
        assert not left and after == before, {
            "not removed": left, **{k: sorted(set(after[k]) ^ set(before[k])) for k in before
                                    if after[k] != before[k]}}


@pytest.fixture(scope="session")
def kubeconfig(local_cluster: LocalCluster) -> Path:
    """Path of an admin kubeconfig for the session's cluster."""
    return local_cluster.kubeconfig


@pytest.fixture(scope="session")
def api_client(local_cluster: LocalCluster):
    """A ready admin ``kubernetes.client.ApiClient``."""
    client = local_cluster.api_client()
    yield client
    client.close()


@pytest.fixture
def namespace(api_client) -> Iterator[str]:
    """A fresh namespace for one test; deleted (without waiting) afterwards."""
    from kubernetes import client

    name = f"t-{uuid.uuid4().hex[:10]}"
    core = client.CoreV1Api(api_client)
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    try:
        core.delete_namespace(name)
    except client.ApiException:
        pass


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    """End a run that skipped the real-apiserver tests with an unmissable banner."""
    if _skipped_reason:
        bar = "!" * 78
        terminalreporter.write_line(bar, red=True, bold=True)
        terminalreporter.write_line(
            "REAL-APISERVER TESTS WERE SKIPPED — this run proves nothing about the cluster path.",
            red=True, bold=True)
        terminalreporter.write_line(f"Reason: {_skipped_reason[0]}", red=True)
        terminalreporter.write_line(
            "Fix: run `make test` as root (it builds kube-apiserver), or set KCG_ETCD and "
            "KCG_KUBE_APISERVER.", red=True)
        terminalreporter.write_line(bar, red=True, bold=True)
