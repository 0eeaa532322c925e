"""A real PostgreSQL on loopback, for the history store several replicas share.

``LocalPostgres`` runs Debian's ``postgresql`` (installed with apt where it is missing and
the harness may, as etcd is) from a temporary directory of its own: ``initdb`` with trust
authentication for one role, ``kcg``, then ``pg_ctl start`` on a free loopback port with
its socket in that directory, and ``pg_ctl stop`` (fast) at the end — a server of the
test's own, never a mock, never the machine's own cluster. ``initdb`` refuses to run as
root, so as root both run as the ``postgres`` user; ``fsync`` is off (tests only: a crash
of the machine loses the data, which the tests throw away anyway).

    with LocalPostgres() as pg:
        pg.url   # postgresql://kcg@127.0.0.1:PORT/postgres
        pg.sql("SELECT 1")  # through Debian's psql, for checks that need no driver
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from control_plane.binaries import apt_install, is_root
from control_plane.cluster import free_port
from control_plane.errors import ClusterUnavailableError

__all__ = ["LocalPostgres", "postgres_bin"]

ROLE = "kcg"
_START_TIMEOUT = 60  # seconds pg_ctl waits for the server (it starts in about one)


def postgres_bin(install: bool = True) -> Path:
    """The directory of Debian's PostgreSQL server programs (the newest installed), installing
    ``postgresql`` with apt when it is missing and this process may.

    Raises:
        ClusterUnavailableError: none installed, and it cannot be.
    """
    def found() -> Path | None:
        root = Path("/usr/lib/postgresql")
        versions = sorted((p for p in root.glob("*/bin") if (p / "pg_ctl").exists()),
                          key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
        return versions[-1] if versions else None

    where = found()
    if where is None and install:
        apt_install(["postgresql"], "run the tests on a machine with Debian's postgresql")
        where = found()
    if where is None:
        raise ClusterUnavailableError("no PostgreSQL server: install Debian's postgresql")
    return where


class LocalPostgres:
    """One PostgreSQL server of a test's own; see the module."""

    def __init__(self, install: bool = True, listen: tuple[str, ...] = ("127.0.0.1",)) -> None:
        self._install = install
        self.listen = listen  # the addresses it listens on (a node's pods reach its gateway's)
        self.port = 0
        self.url = ""
        self.dir: Path | None = None
        self._bin: Path | None = None

    def _as_owner(self, args: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *args] if is_root() else args

    def _run(self, args: list[str], what: str) -> str:
        proc = subprocess.run(self._as_owner(args), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=_START_TIMEOUT + 30)
        if proc.returncode != 0:
            raise ClusterUnavailableError(f"PostgreSQL's {what} failed: {proc.stdout[-2000:]}")
        return proc.stdout

    def start(self) -> LocalPostgres:
        """Initialise and start it; return when it accepts connections.

        Raises:
            ClusterUnavailableError: no server, or it did not start (its log in the message).
        """
        self._bin = postgres_bin(self._install)
        self.dir = Path(tempfile.mkdtemp(prefix="kcg-postgres-", dir="/dev/shm"
                                         if os.path.isdir("/dev/shm") else None))
        if is_root():
            shutil.chown(self.dir, "postgres")
        data = self.dir / "data"
        self._run([str(self._bin / "initdb"), "-D", str(data), "-U", ROLE, "--auth=trust",
                   "--encoding=UTF8", "--no-instructions"], "initdb")
        self.port = free_port()
        try:
            self._run([str(self._bin / "pg_ctl"), "-D", str(data), "-l", str(self.dir / "pg.log"),
                       "-w", "-t", str(_START_TIMEOUT), "start", "-o",
                       f"-p {self.port} -k {self.dir} -c listen_addresses={','.join(self.listen)} "
                       f"-c fsync=off -c full_page_writes=off"], "start")
        except ClusterUnavailableError as exc:
            log = (self.dir / "pg.log").read_text(errors="replace")[-2000:] \
                if (self.dir / "pg.log").exists() else ""
            self._remove()
            raise ClusterUnavailableError(f"{exc}\n{log}") from None
        self.url = f"postgresql://{ROLE}@127.0.0.1:{self.port}/postgres"
        return self

    def sql(self, statement: str, database: str = "postgres") -> str:
        """Run one statement with Debian's ``psql`` over TCP; its unaligned output."""
        assert self._bin is not None
        proc = subprocess.run([str(self._bin / "psql"), "-h", "127.0.0.1", "-p", str(self.port),
                               "-U", ROLE, "-d", database, "-At", "-v", "ON_ERROR_STOP=1",
                               "-c", statement], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=60)
        if proc.returncode != 0:
            raise RuntimeError(f"psql failed: {proc.stdout[-2000:]}")
        return proc.stdout.strip()

    def database(self) -> tuple[str, str]:
        """A new database, for one test's store: its name and the URL to it."""
        name = "h_" + uuid.uuid4().hex[:12]
        self.sql(f"CREATE DATABASE {name}")
        return name, self.url.rsplit("/", 1)[0] + "/" + name

    def drop(self, name: str) -> None:
        """Drop database ``name`` (its sessions ended)."""
        self.sql(f"DROP DATABASE {name} WITH (FORCE)")

    def password_role(self, name: str, password: str, network: str = "") -> str:
        """A role that must give ``password`` (SCRAM, as a production server asks), owning a
        database of its name, from loopback and ``network`` (a CIDR: a node's pods); the URL
        to it on loopback, with no password in it."""
        assert self.dir is not None and self._bin is not None
        self.sql(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
        self.sql(f"CREATE DATABASE {name} OWNER {name}")
        hba = self.dir / "data" / "pg_hba.conf"
        rules = f"host all {name} 127.0.0.1/32 scram-sha-256\n"
        if network:
            rules += f"host all {name} {network} scram-sha-256\n"
        hba.write_text(rules + hba.read_text())
        self._run([str(self._bin / "pg_ctl"), "-D", str(self.dir / "data"), "reload"], "reload")
        return f"postgresql://{name}@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        """Stop it (fast: open sessions are ended) and remove its directory."""
        if self.dir is None:
            return
        data = self.dir / "data"
        if self._bin is not None and (data / "postmaster.pid").exists():
            subprocess.run(self._as_owner([str(self._bin / "pg_ctl"), "-D", str(data), "-m",
                                           "fast", "-w", "stop"]),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        self._remove()

    def _remove(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
