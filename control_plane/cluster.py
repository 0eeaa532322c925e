"""A real, local Kubernetes control plane: etcd plus kube-apiserver on loopback.

``LocalCluster`` starts etcd (data on ``/dev/shm`` when available) and one or
more kube-apiservers on free loopback ports, with RBAC on and a static token
file holding an admin token and a non-admin user's token. It waits for
readiness, and raises ``ClusterUnavailableError`` with the tail of the log when
something does not come up. It stops exactly the processes it started (by
pid), on ``stop()``, at interpreter exit, and — through the kernel's
parent-death signal — even when the process that started it is killed.

Fault tests use ``stop_apiserver``/``start_apiserver``/``restart_apiserver``,
``add_apiserver(extra_args)`` for a second server with other flags (e.g. the
watch cache off for one resource), and ``compact_etcd`` to make old resource
versions answer 410 Gone.
"""

from __future__ import annotations

import atexit
import base64
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from control_plane.binaries import Binaries, ensure_binaries
from control_plane.certs import certificate_authority, client_certificate
from control_plane.errors import ClusterUnavailableError

SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc"

__all__ = ["SERVICE_ACCOUNT_ISSUER", "APIServer", "LocalCluster", "User", "die_with_parent", "free_port",
           "log_tail", "terminate"]

_PR_SET_PDEATHSIG = 1
_READY_TIMEOUT = 90.0
_live_clusters: set[LocalCluster] = set()
_live_lock = threading.Lock()


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def die_with_parent() -> None:  # runs in the child between fork and exec
    # SIGKILL, not SIGTERM: when the owner is gone nobody waits for a graceful
    # shutdown, and kube-apiserver's can stall for long once etcd has died too.
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:  # not Linux: atexit still stops the child
        pass
    os.setpgrp()  # a terminal's Ctrl-C reaches us, and we stop the child in order


def _remove_stale_workdirs(base: Path) -> None:
    """Remove work directories whose owning process died without cleaning up (SIGKILL)."""
    for workdir in base.glob("kcg-cluster-*"):
        try:
            owner = int((workdir / "owner.pid").read_text())
        except (OSError, ValueError):
            continue
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            shutil.rmtree(workdir, ignore_errors=True)
        except PermissionError:
            pass


def terminate(proc: subprocess.Popen | None, timeout: float = 10.0) -> None:
    """Stop a process this package started: SIGTERM, then SIGKILL after ``timeout`` seconds."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


@dataclass(frozen=True)
class User:
    """A static-token identity known to the cluster's apiservers."""

    name: str
    token: str
    groups: tuple[str, ...] = ()


@dataclass
class APIServer:
    """One kube-apiserver process of a ``LocalCluster``."""

    name: str
    port: int
    cert_dir: Path
    log_path: Path
    extra_args: tuple[str, ...] = ()
    process: subprocess.Popen | None = field(default=None, repr=False)
    kubeconfig: Path | None = None
    host: str = "127.0.0.1"  # where it listens, and what it advertises

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    @property
    def ca_file(self) -> Path:
        return self.cert_dir / "apiserver.crt"

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class LocalCluster:
    """etcd + kube-apiserver(s) on loopback, started and stopped as one unit.

    Use as a context manager, or call ``start()`` and ``stop()``. For a cluster with a node
    (``control_plane.node``) its API servers listen on ``address`` (one the node's pods
    reach), Services take ``service_range``, and ``service_accounts`` admits each pod with
    its ServiceAccount's token (the ServiceAccount admission plugin, off where no pod runs).
    """

    def __init__(self, binaries: Binaries | None = None, extra_apiserver_args: tuple[str, ...] = (),
                 workdir: str | os.PathLike | None = None, build: bool = True,
                 address: str = "127.0.0.1", service_range: str = "10.0.0.0/24",
                 service_accounts: bool = False) -> None:
        self._binaries = binaries
        self.address, self.service_range = address, service_range
        self._service_accounts = service_accounts
        self._build = build
        self._extra_args = tuple(extra_apiserver_args)
        self._workdir_arg = Path(workdir) if workdir else None
        self._owns_workdir = workdir is None
        self.workdir: Path | None = None
        self.admin = User("admin", secrets.token_hex(16), ("system:masters",))
        self.user = User("alice", secrets.token_hex(16), ("developers",))
        self.etcd_url = ""
        self._etcd: subprocess.Popen | None = None
        self._etcd_ports: tuple[int, int] | None = None  # kept across restarts
        self.apiservers: list[APIServer] = []
        self._lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def primary(self) -> APIServer:
        """The first apiserver (the one ``kubeconfig`` points at)."""
        return self.apiservers[0]

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig for the primary apiserver."""
        assert self.primary.kubeconfig is not None
        return self.primary.kubeconfig

    def start(self) -> LocalCluster:
        """Start etcd and the primary apiserver; return when the apiserver is ready.

        Raises:
            ClusterUnavailableError: binaries missing or a process not ready in time.
        """
        started = time.monotonic()
        if self._binaries is None:
            self._binaries = ensure_binaries(build=self._build)
        base = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else Path(tempfile.gettempdir())
        _remove_stale_workdirs(base)
        self.workdir = self._workdir_arg or Path(tempfile.mkdtemp(prefix="kcg-cluster-", dir=base))
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "owner.pid").write_text(str(os.getpid()))
        with _live_lock:
            _live_clusters.add(self)
        try:
            self._write_credentials()
            self._start_etcd()
            self.add_apiserver(self._extra_args, name="apiserver")
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - started
        return self

    def stop(self) -> None:
        """Stop every process this cluster started and remove its files."""
        with self._lock:
            for server in reversed(self.apiservers):
                terminate(server.process)
                server.process = None
            terminate(self._etcd)
            self._etcd = None
        with _live_lock:
            _live_clusters.discard(self)
        if self.workdir is not None and self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- apiservers -------------------------------------------------------------

    def add_apiserver(self, extra_args: tuple[str, ...] | list[str] = (),
                      name: str | None = None) -> APIServer:
        """Start another apiserver on the same etcd with extra flags; wait until ready."""
        assert self.workdir is not None
        name = name or f"apiserver-{len(self.apiservers)}"
        cert_dir = self.workdir / name / "certs"
        cert_dir.mkdir(parents=True, exist_ok=True)
        server = APIServer(name=name, port=free_port(), cert_dir=cert_dir,
                           log_path=self.workdir / f"{name}.log", extra_args=tuple(extra_args),
                           host=self.address)
        self.apiservers.append(server)
        self.start_apiserver(server)
        server.kubeconfig = self.write_kubeconfig(self.workdir / name / "kubeconfig", self.admin, server)
        return server

    def remove_apiserver(self, server: APIServer) -> None:
        """Stop an apiserver added with ``add_apiserver`` (if running) and forget it."""
        self.stop_apiserver(server)
        if server in self.apiservers:
            self.apiservers.remove(server)

    def start_apiserver(self, server: APIServer | None = None) -> None:
        """(Re)start an apiserver process on its old port and wait until ready."""
        server = server or self.primary
        if server.running():
            return
        assert self._binaries is not None and self.workdir is not None
        args = [
            str(self._binaries.kube_apiserver),
            f"--etcd-servers={self.etcd_url}",
            f"--bind-address={server.host}",
            f"--secure-port={server.port}",
            "--insecure-port=0",
            f"--cert-dir={server.cert_dir}",
            f"--token-auth-file={self.workdir / 'tokens.csv'}",
            f"--client-ca-file={self.workdir / 'client-ca' / 'client-ca.crt'}",
            "--authorization-mode=RBAC",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={self.workdir / 'sa.key'}",
            f"--service-account-signing-key-file={self.workdir / 'sa.key'}",
            f"--service-cluster-ip-range={self.service_range}",
            "--enable-admission-plugins=ServiceAccount" if self._service_accounts
            else "--disable-admission-plugins=ServiceAccount",
            f"--advertise-address={server.host}",
            "--profiling=false",
            *server.extra_args,
        ]
        with open(server.log_path, "ab") as log:
            server.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        self._wait_ready(server)

    def stop_apiserver(self, server: APIServer | None = None) -> None:
        """Stop an apiserver process (etcd keeps running); watches on it break."""
        server = server or self.primary
        terminate(server.process)
        server.process = None

    def restart_apiserver(self, server: APIServer | None = None, down_seconds: float = 0.0) -> None:
        """Stop an apiserver, optionally stay down a while, start it again on its port."""
        self.stop_apiserver(server)
        if down_seconds:
            time.sleep(down_seconds)
        self.start_apiserver(server)

    # -- etcd -------------------------------------------------------------------

    def compact_etcd(self) -> int:
        """Compact etcd at its current revision, so older resource versions are gone.

        Returns the revision compacted at.
        """
        status = self._etcd_post("/v3/kv/range", {"key": "AA==", "limit": 1})
        revision = int(status["header"]["revision"])
        self._etcd_post("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    def _etcd_post(self, path: str, body: dict) -> dict:
        req = urllib.request.Request(self.etcd_url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def restart_etcd(self, down_seconds: float = 0.0) -> None:
        """Stop etcd (SIGTERM), stay down ``down_seconds``, start it again on the same
        ports and data: the API servers reconnect by themselves."""
        terminate(self._etcd)
        self._etcd = None
        if down_seconds:
            time.sleep(down_seconds)
        self._start_etcd()

    def _start_etcd(self) -> None:
        assert self._binaries is not None and self.workdir is not None
        if self._etcd_ports is None:
            self._etcd_ports = (free_port(), free_port())
        client, peer = self._etcd_ports
        self.etcd_url = f"http://127.0.0.1:{client}"
        log_path = self.workdir / "etcd.log"
        args = [
            str(self._binaries.etcd),
            f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=default=http://127.0.0.1:{peer}",
            "--log-level=warn",
            "--quota-backend-bytes=8589934592",
        ]
        with open(log_path, "ab") as log:
            self._etcd = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self._etcd.poll() is not None:
                raise ClusterUnavailableError(f"etcd exited ({self._etcd.returncode}):\n{log_tail(log_path)}")
            try:
                with urllib.request.urlopen(self.etcd_url + "/health", timeout=2) as resp:
                    if json.loads(resp.read()).get("health") in ("true", True):
                        return
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        raise ClusterUnavailableError(f"etcd not healthy within 30 s:\n{log_tail(log_path)}")

    # -- helpers ----------------------------------------------------------------

    def _write_credentials(self) -> None:
        assert self.workdir is not None
        key = self.workdir / "sa.key"
        proc = subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            raise ClusterUnavailableError(f"openssl genrsa failed: {proc.stdout}")
        lines = [f'{u.token},{u.name},{u.name}-uid,"{",".join(u.groups)}"'
                 for u in (self.admin, self.user)]
        (self.workdir / "tokens.csv").write_text("\n".join(lines) + "\n")
        # a CA for client certificates, as kubeadm's and kind's API servers have: its users are
        # who a certificate kubeconfig names (client_certificate)
        self.client_ca = certificate_authority(self.workdir / "client-ca")

    def _wait_ready(self, server: APIServer) -> None:
        assert server.process is not None
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # the serving cert does not exist before start
        deadline = time.monotonic() + _READY_TIMEOUT
        last = ""
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                raise ClusterUnavailableError(
                    f"kube-apiserver exited ({server.process.returncode}); log tail:\n"
                    f"{log_tail(server.log_path)}")
            req = urllib.request.Request(server.url + "/readyz",
                                         headers={"Authorization": f"Bearer {self.admin.token}"})
            try:
                with urllib.request.urlopen(req, timeout=2, context=context) as resp:
                    if resp.read().strip() == b"ok":
                        return
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}"
            except OSError as exc:
                last = str(exc)
            time.sleep(0.2)
        terminate(server.process)
        server.process = None
        raise ClusterUnavailableError(
            f"kube-apiserver not ready within {_READY_TIMEOUT:.0f} s (last: {last}); log tail:\n"
            f"{log_tail(server.log_path)}")

    def write_kubeconfig(self, path: Path, user: User, server: APIServer | None = None) -> Path:
        """Write a kubeconfig for ``user`` against ``server`` (default: the primary)."""
        server = server or self.primary
        path.parent.mkdir(parents=True, exist_ok=True)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "local", "cluster": {
                "server": server.url, "certificate-authority": str(server.ca_file)}}],
            "users": [{"name": user.name, "user": {"token": user.token}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": user.name}}],
            "current-context": "local",
        }
        path.write_text(json.dumps(config, indent=2))
        return path

    def certificate_kubeconfig(self, path: Path, user: str, groups: tuple[str, ...] = (),
                               server_url: str = "", ca_file: Path | None = None,
                               ca: tuple[Path, Path] | None = None) -> Path:
        """Write a kubeconfig that authenticates with a client certificate for ``user`` in
        ``groups`` (as kubeadm's admin.conf: ``kubernetes-admin`` in ``system:masters``),
        signed by this cluster's client CA (or ``ca``), against ``server_url`` trusted by
        ``ca_file`` (default: the primary API server)."""
        assert self.workdir is not None
        cert, key = client_certificate(path.parent / (path.stem + "-cert"), ca or self.client_ca,
                                       user, groups)
        config = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "local", "cluster": {
                "server": server_url or self.primary.url,
                "certificate-authority": str(ca_file or self.primary.ca_file)}}],
            "users": [{"name": user, "user": {"client-certificate": str(cert),
                                              "client-key": str(key)}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
            "current-context": "local",
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(config, indent=2))
        return path

    def sign_token(self, claims: dict) -> str:
        """A JWT with ``claims``, signed with the ServiceAccount signing key (RS256).

        For tokens the TokenRequest API will not issue: one that expires in
        seconds, or one that has already expired.
        """
        assert self.workdir is not None

        def b64(data: bytes) -> str:
            return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

        signing_input = (b64(json.dumps({"alg": "RS256", "typ": "JWT"}).encode()) + "."
                         + b64(json.dumps(claims).encode()))
        proc = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(self.workdir / "sa.key")],
                              input=signing_input.encode(), capture_output=True, check=True)
        return signing_input + "." + b64(proc.stdout)

    def service_account_claims(self, namespace: str, name: str, uid: str,
                               expires_at: float) -> dict:
        """The claims of a bound ServiceAccount token, as the TokenRequest API writes them."""
        now = int(time.time())
        return {"iss": SERVICE_ACCOUNT_ISSUER, "aud": [SERVICE_ACCOUNT_ISSUER],
                "sub": f"system:serviceaccount:{namespace}:{name}", "iat": now, "nbf": now,
                "exp": int(expires_at),
                "kubernetes.io": {"namespace": namespace,
                                  "serviceaccount": {"name": name, "uid": uid}}}

    def api_client(self, user: User | None = None, server: APIServer | None = None):
        """Return a ``kubernetes.client.ApiClient`` for ``user`` (default: admin)."""
        from kubernetes import client

        server = server or self.primary
        config = client.Configuration()
        config.host = server.url
        config.ssl_ca_cert = str(server.ca_file)
        config.api_key = {"authorization": f"Bearer {(user or self.admin).token}"}
        return client.ApiClient(config)


@atexit.register
def _stop_all() -> None:
    with _live_lock:
        clusters = list(_live_clusters)
    for cluster in clusters:
        cluster.stop()
