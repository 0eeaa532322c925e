"""Several serving processes on one address (``--workers N``): the process model.

One Python process serves on one core. With ``--workers N`` the command's own
process becomes a small supervisor that binds the address and starts N worker
processes, each a whole gateway — its own informers, caches, event hubs and event
loop — accepting connections from a listening socket of its own. Why
independent workers, not one informer process feeding N servers, is measured
and written down in ``docs/workers.md``; in short: the API server's watch cache
serves another watcher of a resource for little, the informers' memory is the
price, and nothing crosses a process boundary on the hot path.

What the supervisor does, and nothing else:

- binds the address with one listening socket per worker (``SO_REUSEPORT``, as nginx's
  ``reuseport``), so that the kernel spreads new connections evenly between them, and
  hands each worker its own (processes are *spawned*: nothing of the parent's threads or
  locks is inherited). Why not one socket for all: Linux wakes the most recently idle
  acceptor first, so under keep-alive one worker took every connection of a round and
  the other none (measured: 100/0, 79/21 of the tree's CPU), and a connection that lives
  long — a dashboard's keep-alive, a watch, an EventSource — stays where it landed;
- holds every socket while workers come and go: a worker that dies is replaced on the
  same socket, so the connections in its queue wait for the replacement instead of being
  dropped with it, and the port is never let go;
- restarts a worker that dies (after a growing pause if it keeps dying early);
- on SIGTERM or SIGINT tells every worker to stop (each ends its streams with
  ``retry:``, finishes its requests and stops its informers, as a single
  process does) and exits 0 once they have, within the grace period.

The workers of a pod find each other over Unix sockets in a private folder
(``app.process.peers``): ``/metrics`` answered by any of them shows all of them, and a
resource loaded by one is loaded by the others too.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.connection import wait as wait_for_any
from typing import Any

__all__ = ["Supervisor", "WorkerInfo", "listen", "listen_each"]

log = logging.getLogger("kube-cache-gateway.workers")

_GRACE = 20.0  # seconds workers get to stop before they are killed
_RESTART_PAUSE_MAX = 30.0
_EARLY_DEATH = 10.0  # a worker that dies sooner than this after starting is crash-looping
_CANNOT_CONFIGURE = 2  # a worker's exit code when the Kubernetes configuration does not load


@dataclass(frozen=True)
class WorkerInfo:
    """Who a worker is among its siblings."""

    index: int
    count: int
    peer_dir: str  # where every worker's Unix socket is (``app.process.peers``)


def listen(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """Bind and listen on ``host:port``, for a worker to accept from.

    Raises:
        OSError: the address is held (another gateway on the port fails loudly).
    """
    return listen_each(host, port, 1, backlog)[0]


def listen_each(host: str, port: int, count: int, backlog: int = 2048) -> list[socket.socket]:
    """``count`` listening sockets on ``host:port`` in one ``SO_REUSEPORT`` group: the kernel
    spreads new connections between them by their addresses' hash.

    The first is bound before it joins the group, so an address held by anyone — another
    gateway's group included — is refused here as with one socket; a process of another user
    cannot join the group (Linux allows only the same user's). Port 0 picks one port for all.

    Raises:
        OSError: the address is held, or cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    address = host.strip("[]")
    made: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, socket.SOCK_STREAM)
            made.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if made[1:]:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((address, port))
            if not made[1:]:  # bound alone: the address was free; now the group may form
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                port = sock.getsockname()[1]
        for sock in made:
            sock.listen(backlog)
            sock.set_inheritable(True)
    except OSError:
        for sock in made:
            sock.close()
        raise
    return made


def _worker_main(settings: Any, sock: socket.socket, info: WorkerInfo, ready: Any,
                 supervisor: int) -> None:
    """A worker process: a whole gateway on its listening socket (runs after spawn); says so on
    ``ready`` (a pipe: no semaphore, so no resource-tracker process beside the workers)."""
    _die_with_parent(supervisor)
    # the supervisor passes SIGHUP on (read the clusters file again); until the gateway
    # takes it, one that arrives must not end the worker
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    from app.clusters.connect import load_default_client
    from app.launch.server import run_server
    from app.process.logs import configure_logging

    configure_logging(settings.log_level, settings.log_json, worker=info.index)
    api_client = load_default_client(settings)
    if api_client is None:
        raise SystemExit(_CANNOT_CONFIGURE)
    code = run_server(settings, api_client, on_ready=lambda: ready.send(True), sockets=[sock],
                      worker=info)
    raise SystemExit(code)


def _die_with_parent(supervisor: int) -> None:
    """Linux: get SIGTERM when the supervisor (process ``supervisor``) dies, however it dies.

    Gone already when this process's parent is someone else by now — not "when the parent is
    PID 1": in a container the supervisor is PID 1, and every worker took that for its
    death and ended itself, restarted and ended again (seen with ``workers: auto`` on a
    node; ``tests/deploy/test_chart_on_node.py``).
    """
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != supervisor:  # it died before the signal was asked for
        os.kill(os.getpid(), signal.SIGTERM)


def _said_ready(pipe: Any) -> bool:
    """Whether a worker said it serves (its end of the pipe closes, unsaid, if it dies)."""
    try:
        return bool(pipe.poll(0.05) and pipe.recv())
    except (EOFError, OSError):
        return False


class _Slot:
    """One worker's place: its current process and how it has been going."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.process: Any = None
        self.ready: Any = None
        self.started = 0.0
        self.starts = 0
        self.early_deaths = 0
        self.restart_at = 0.0


class Supervisor:
    """Runs ``count`` workers on one address; see the module docstring."""

    def __init__(self, settings: Any, count: int) -> None:
        self.settings = settings
        self.count = count
        self._context = multiprocessing.get_context("spawn")
        self._slots = [_Slot(i) for i in range(count)]
        self._stopping = False
        self._sockets: list[socket.socket] = []  # one per slot, held for its workers
        self._peer_dir = ""

    def run(self, on_ready: Any = None) -> int:
        """Serve until SIGTERM/SIGINT; return 0 when every worker stopped cleanly."""
        settings = self.settings
        self._sockets = listen_each(settings.host, settings.port, self.count)
        self._peer_dir = tempfile.mkdtemp(prefix="kcg-workers-")  # 0700: this user's alone
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, self._on_hangup)
        try:
            for slot in self._slots:
                self._start(slot)
            if not self._wait_ready():
                self._stop_all()
                return _CANNOT_CONFIGURE  # the worker said why
            log.info("serving on %s:%d with %d workers", settings.host, settings.port, self.count)
            if on_ready is not None and not self._stopping:
                on_ready()
            self._watch()
            return self._stop_all()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for slot in self._slots:
                if slot.ready is not None:
                    slot.ready.close()
            for sock in self._sockets:
                sock.close()
            shutil.rmtree(self._peer_dir, ignore_errors=True)

    # -- internals --------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._stopping = True

    def _on_hangup(self, signum: int, frame: Any) -> None:
        """SIGHUP: every worker reads its configuration again (the clusters file)."""
        for slot in self._slots:
            process = slot.process
            if process is not None and process.is_alive():
                try:
                    os.kill(process.pid, signal.SIGHUP)
                except ProcessLookupError:
                    pass

    def _start(self, slot: _Slot) -> None:
        info = WorkerInfo(slot.index, self.count, self._peer_dir)
        if slot.ready is not None:
            slot.ready.close()
        slot.ready, told = self._context.Pipe(duplex=False)
        slot.process = self._context.Process(
            target=_worker_main,
            args=(self.settings, self._sockets[slot.index], info, told, os.getpid()),
            name=f"kcg-worker-{slot.index}", daemon=False)
        slot.process.start()
        told.close()  # the worker holds its end
        slot.started = time.monotonic()
        slot.starts += 1

    def _wait_ready(self) -> bool:
        """Wait until every worker serves; ``False`` if one could not load the configuration
        (no point starting it again: the supervisor ends, as a single process would)."""
        pending = list(self._slots)
        while pending and not self._stopping:
            for slot in pending:
                if not slot.process.is_alive():
                    # died starting: for another reason than its configuration, the watch
                    # loop restarts it
                    return slot.process.exitcode != _CANNOT_CONFIGURE
            pending = [s for s in pending if not _said_ready(s.ready)]
        return True

    def _watch(self) -> None:
        while not self._stopping:
            wait_for_any([s.process.sentinel for s in self._slots], timeout=0.5)
            now = time.monotonic()
            for slot in self._slots:
                if self._stopping or slot.process.is_alive():
                    continue
                if slot.restart_at == 0.0:
                    lived = now - slot.started
                    slot.early_deaths = slot.early_deaths + 1 if lived < _EARLY_DEATH else 0
                    pause = min(_RESTART_PAUSE_MAX, 0.5 * 2 ** (slot.early_deaths - 1)) \
                        if slot.early_deaths else 0.0
                    slot.restart_at = now + pause
                    log.warning("worker %d (pid %d) exited with %s after %.0f s; restarting it%s",
                                slot.index, slot.process.pid, slot.process.exitcode, lived,
                                f" in {pause:.1f} s" if pause else "")
                if now >= slot.restart_at:
                    slot.process.close()
                    slot.restart_at = 0.0
                    self._start(slot)

    def _stop_all(self) -> int:
        alive = [s.process for s in self._slots if s.process.is_alive()]
        for process in alive:
            try:
                os.kill(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + _GRACE
        for process in alive:
            process.join(max(0.0, deadline - time.monotonic()))
        code = 0
        for slot in self._slots:
            process = slot.process
            if process.is_alive():
                log.error("worker %d did not stop within %.0f s: killed", slot.index, _GRACE)
                process.kill()
                process.join(5)
                code = 1
            elif process.exitcode not in (0, -signal.SIGTERM, -signal.SIGINT):
                code = 1
        return code

