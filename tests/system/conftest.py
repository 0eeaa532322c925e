"""The system scenarios' own control plane: they kill, stop and load its parts, so no other
test shares it. One per module, started and stopped with it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from control_plane.cluster import LocalCluster
from control_plane.errors import ClusterUnavailableError
from control_plane.pytest_plugin import unavailable


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """A control plane for one module's scenarios alone."""
    try:
        own = LocalCluster().start()
    except ClusterUnavailableError as exc:
        unavailable(f"the real kube-apiserver could not be started: {exc}")
    try:
        yield own
    finally:
        own.stop()
