"""Suite-wide fixtures: the real cluster plugin, a guard against leaked threads, the rule
that only tests marked ``cluster`` may use the real API server (so ``-m "not cluster"``
runs with no control plane at all), kubectl at each version the suite runs it, and a history
store of each engine."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from control_plane.client_tools import KUBECTL_VERSIONS
from control_plane.client_tools import kubectl as kubectl_at

pytest_plugins = ["control_plane.pytest_plugin"]


@pytest.fixture(params=KUBECTL_VERSIONS, ids=lambda v: f"kubectl-{v}")
def kubectl_version(request) -> str:
    """A test that runs kubectl runs at the API server's version (1.20) and a current one."""
    kubectl_at(request.param)  # missing: an error, never a skip (make test fetches both)
    return request.param


_REAL_SERVER_FIXTURES = {"local_cluster", "kubeconfig", "api_client"}


def pytest_collection_modifyitems(config, items) -> None:
    """Fail the run when a test uses the real API server without the ``cluster`` mark."""
    unmarked = [item.nodeid for item in items
                if _REAL_SERVER_FIXTURES & set(getattr(item, "fixturenames", ()))
                and item.get_closest_marker("cluster") is None]
    if unmarked:
        raise pytest.UsageError("tests using the real API server must be marked "
                                "`pytest.mark.cluster`:\n  " + "\n  ".join(unmarked))


@pytest.fixture(autouse=True)
def no_leaked_threads(request) -> Iterator[None]:
    """Fail a test that leaves threads running that it started.

    Tests that use the session-wide gateway share its informer and worker
    threads, which start lazily; they are exempt (a dedicated test proves a
    gateway's shutdown leaves no thread behind).
    """
    if "gateway" in request.fixturenames:
        yield
        return
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5.0
    while True:
        leaked = [t for t in threading.enumerate()
                  if t not in before and t.is_alive() and not _pooled_by_a_running_loop(t)]
        if not leaked or time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    assert not leaked, "test leaked threads:\n" + "\n".join(map(_where, leaked))


def _pooled_by_a_running_loop(thread: threading.Thread) -> bool:
    """Whether ``thread`` is an idle-or-busy worker of an event loop that is still running.

    Such a thread is that loop's pool, not the test's: a gateway a module fixture started
    earlier (its loop's thread predates the test) takes a new worker whenever its heartbeat
    asks its API server, and the worker stays in its pool until that loop ends. A loop the test
    itself started and left running is caught by its own thread; one that has stopped no
    longer owns its workers, so they count.
    """
    from anyio._backends._asyncio import WorkerThread

    return isinstance(thread, WorkerThread) and thread.loop.is_running()


def _where(thread: threading.Thread) -> str:
    """A leaked thread's name and the stack it is in: a name alone ("AnyIO worker thread")
    does not say which call outlived the test."""
    import sys
    import traceback

    frame = sys._current_frames().get(thread.ident or -1)
    stack = "".join(traceback.format_stack(frame)) if frame is not None else "  (ended)\n"
    return f"{thread.name}:\n{stack}"


@pytest.fixture(autouse=True)
def process_wide_hooks_kept() -> Iterator[None]:
    """Fail a test that leaves the process's logging or exception hooks changed.

    ``serve`` sets up the logging of the process it runs in (handlers, exception hooks,
    warnings captured as log lines): called in the test process, it would quietly change
    every test after it (a handler on a closed capture stream, warnings that no longer
    fail). Such tests run the command in a process of its own.
    """
    import logging
    import sys
    import warnings

    root = logging.getLogger()
    before = (list(root.handlers), sys.excepthook, threading.excepthook, warnings.showwarning)
    yield
    after = (list(root.handlers), sys.excepthook, threading.excepthook, warnings.showwarning)
    assert after == before, "the test changed the process's logging or exception hooks"


@pytest.fixture
def postgres_history_url(local_postgres) -> Iterator[str]:
    """A new history store's ``--history`` URL on the run's PostgreSQL (a database of its own)."""
    name, url = local_postgres.database()
    yield url
    local_postgres.drop(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def history_url(request, tmp_path) -> str:
    """A new history store's ``--history`` URL: an SQLite file, or a database of the run's
    PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/history.db"
    return request.getfixturevalue("postgres_history_url")
