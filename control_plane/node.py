"""A cluster with one node that runs pods: what kind is made of, from Debian's packages.

``LocalCluster`` is etcd and an API server: objects, never processes. A chart is only proven
where its pods run — the image pulled (here: imported), the probes answered, the
ServiceAccount token mounted, a replica taken out of its Service. ``LocalNode`` adds the rest
of a cluster to one: the controller-manager and scheduler, containerd (runc, cgroupfs) with
the bridge CNI, the kubelet, kube-proxy in iptables mode, and a cluster DNS
(``control_plane.cluster_dns``). Every binary is Debian's or built once from Debian's
``kubernetes`` source beside kube-apiserver (``control_plane.binaries``); the pause image is
written from its static binary (``control_plane.oci``); other images are imported from OCI
archives (``import_image``: ``make image``'s output, pushed to one).

It needs root, cgroup v1 hierarchies and bridge netfilter; ``start`` says which is missing.
Its network (``control_plane.node_network``) lives in the range reserved for benchmarking,
behind an ``unreachable`` route installed first. Its components authenticate as the
cluster's admin: a node of its own, not a model of node authorization. ``stop`` — also after
a failed start — removes pods' processes and cgroups, mounts, iptables rules, the bridge and
routes, and puts kernel settings back.

``python -m control_plane.node`` starts one and prints how to reach it, for a contributor
checking a chart change by hand (``docs/local-node.md``).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from control_plane import node_network
from control_plane.binaries import ensure_node_binaries
from control_plane.certs import certificate_authority, client_certificate
from control_plane.paths import cache_dir
from control_plane.cluster import LocalCluster, die_with_parent, free_port, log_tail, terminate
from control_plane.cluster_dns import ClusterDNS
from control_plane.errors import ClusterUnavailableError
from control_plane.node_network import GATEWAY, POD_RANGE, SERVICE_RANGE, Changes
from control_plane.oci import write_image

__all__ = ["NODE_NAME", "PAUSE_IMAGE", "LocalNode", "machine_state", "main", "missing_parts"]

NODE_NAME = "kcg-node"
PAUSE_IMAGE = "localhost/kube-cache-gateway/pause:debian"
CGROUP_ROOT = "kcg-node"
_CGROUPS = Path("/sys/fs/cgroup")
_READY_TIMEOUT = 120.0
_PROJECTED_TOKENS = "BoundServiceAccountTokenVolume=true"
# the state containerd's shims and the CNI plugins keep in fixed places, whatever the
# configuration says: removed at the end when the node made them
_MACHINE_PATHS = (Path("/run/containerd"), Path("/var/lib/cni"))


def _say(msg: str) -> None:
    print(f"[local-node] {msg}", file=sys.stderr, flush=True)


def missing_parts() -> list[str]:
    """What this machine lacks to run a node (empty: it can)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (containerd, the kubelet and the node's network need it)")
    if not (_CGROUPS / "memory").is_dir() or not (_CGROUPS / "pids").is_dir():
        missing.append("cgroup v1 hierarchies under /sys/fs/cgroup (memory, pids, ...)")
    if not Path("/proc/sys/net/bridge/bridge-nf-call-iptables").exists():
        missing.append("bridge netfilter (/proc/sys/net/bridge)")
    return missing


def machine_state() -> dict[str, list[str]]:
    """What a node changes on the machine, read: iptables rules, interfaces, routes, mounts,
    cgroups, processes and state directories of a node. Equal before a node starts and
    after it stops, or the node left something behind."""
    def lines(*command: str) -> list[str]:
        done = subprocess.run(command, capture_output=True, text=True)
        return sorted(line for line in done.stdout.splitlines()
                      if line and not line.startswith("#"))

    rules = _iptables(subprocess.run(["iptables-save"], capture_output=True, text=True).stdout)
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    processes = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        if b"/kcg-node-" in command:
            processes.append(command.replace(b"\0", b" ").decode(errors="replace"))
    return {"iptables": rules,
            "links": [line.split(":")[1].strip().split("@")[0]
                      for line in lines("ip", "-o", "link")],
            "routes": lines("ip", "route"),
            "mounts": sorted(m for m in mounts if "kcg-node" in m),
            "cgroups": sorted(str(h) for h in _CGROUPS.glob(f"*/{CGROUP_ROOT}")),
            "processes": sorted(processes),
            "state": sorted(str(p) for p in _MACHINE_PATHS if p.exists()),
            "settings": [f"{s}={node_network._read(s)}" for s in node_network.SETTINGS]}


_BUILT_IN = {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}


def _iptables(saved: str) -> list[str]:
    """``iptables-save``'s lines, sorted, counters left out, and with no table that holds
    nothing: a table the kernel loaded once (when a node first wrote to it) stays listed
    after its rules are gone, with only its built-in chains at ``ACCEPT``, which is what
    a machine without it does."""
    kept: list[str] = []
    table: list[str] = []
    for line in saved.splitlines():
        if not line or line.startswith("#"):
            continue
        line = re.sub(r"\[\d+:\d+\]", "", line)
        table.append(line)
        if line == "COMMIT":
            empty = all(entry.startswith("*") or entry == "COMMIT" or (
                entry.startswith(":") and entry.split()[0][1:] in _BUILT_IN
                and entry.split()[1] == "ACCEPT") for entry in table)
            if not empty:
                kept += table
            table = []
    return sorted(kept + table)


class LocalNode:
    """A ``LocalCluster`` with one node (see the module). Use as a context manager, or call
    ``start()`` and ``stop()``."""

    def __init__(self, binaries: Path | None = None) -> None:
        self._binaries = binaries
        self.cluster: LocalCluster | None = None
        self.workdir: Path | None = None
        self._changes = Changes()
        self._processes: dict[str, subprocess.Popen] = {}
        self._dns: ClusterDNS | None = None
        self.start_seconds = 0.0
        self.timings: dict[str, float] = {}
        self.kubelet_port = 0  # the kubelet's API on GATEWAY (the machine and its pods alone)
        self._kubelet_ca: tuple[Path, Path] | None = None  # what the kubelet trusts for x509
        self._kubelet_client: tuple[Path, Path] | None = None  # the API server's certificate
        self._lock: Any = None

    def __enter__(self) -> LocalNode:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- paths -------------------------------------------------------------------------

    @property
    def socket(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "containerd" / "containerd.sock"

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig of the node's cluster."""
        assert self.cluster is not None
        return self.cluster.kubeconfig

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> LocalNode:
        """Start the cluster and its node; return when the node is Ready.

        Raises:
            ClusterUnavailableError: the machine cannot run a node (the message says what it
                lacks), or a part did not start in time (its log's tail).
        """
        missing = missing_parts()
        if missing:
            raise ClusterUnavailableError("this machine cannot run a node: it lacks "
                                          + "; ".join(missing))
        started = time.monotonic()
        directory = self._binaries or ensure_node_binaries()
        self._binaries = directory
        self.timings["binaries_s"] = time.monotonic() - started
        self._claim_machine()
        self.workdir = Path(tempfile.mkdtemp(prefix="kcg-node-", dir="/var/tmp"))
        try:
            step = time.monotonic()
            for path in _MACHINE_PATHS:  # where containerd and the CNI plugins keep state
                if not path.exists():
                    self._changes.made(str(path), lambda p=path: p.exists() and shutil.rmtree(p))
            node_network.set_up(self._changes)
            self._cgroup_root()
            # the API server reaches the kubelet (logs, exec) at the node's address, never
            # by a name looked up in the machine's DNS, with a client certificate the kubelet
            # trusts (as kubeadm's apiserver-kubelet-client); pods get the ServiceAccount
            # token as today's clusters mount it (projected, expiring, rotated by the kubelet;
            # default from 1.21, a gate in 1.20)
            self._kubelet_ca = certificate_authority(self.workdir / "kubelet-ca", "kubelet-ca")
            self._kubelet_client = client_certificate(
                self.workdir / "kubelet-ca", self._kubelet_ca, "kube-apiserver-kubelet-client",
                ("system:masters",))
            self.cluster = LocalCluster(
                address=GATEWAY, service_range=SERVICE_RANGE, service_accounts=True,
                extra_apiserver_args=("--kubelet-preferred-address-types=InternalIP",
                                      f"--kubelet-client-certificate={self._kubelet_client[0]}",
                                      f"--kubelet-client-key={self._kubelet_client[1]}",
                                      f"--feature-gates={_PROJECTED_TOKENS}")).start()
            self.timings["control_plane_s"] = time.monotonic() - step
            step = time.monotonic()
            self._start_containerd()
            self.import_image(write_image(
                self.workdir / "pause.tar", PAUSE_IMAGE,
                {"pause": ((directory / "pause").read_bytes(), 0o755)}, ["/pause"]))
            self.timings["containerd_s"] = time.monotonic() - step
            step = time.monotonic()
            self._dns = ClusterDNS(GATEWAY, self._cluster_ip)
            self._start_components()
            self._wait_node_ready()
            node_network.guard_first()  # ahead of kube-proxy's rules
            self.timings["node_s"] = time.monotonic() - step
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - started
        return self

    def stop(self) -> list[str]:
        """Stop everything and remove what was made; return (and say) what could not be."""
        left: list[str] = []
        if self.cluster is not None and self.cluster.apiservers and \
                self.cluster.primary.running() and "kubelet" in self._processes:
            self._drain_pods()
        for name in ("kubelet", "kube-proxy", "kube-scheduler", "kube-controller-manager"):
            process = self._processes.pop(name, None)
            if process is not None:
                terminate(process)
        self._remove_containers()
        process = self._processes.pop("containerd", None)
        if process is not None:
            terminate(process)
        self._kill_shims()
        if self._dns is not None:
            self._dns.stop()
            self._dns = None
        if self._binaries is not None and self.workdir is not None:
            subprocess.run([str(self._binaries / "kube-proxy"), "--cleanup"],
                           capture_output=True, timeout=60)
        left += self._unmount_all()
        left += self._remove_cgroups()
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None
        left += self._changes.undo()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        if self._lock is not None:
            self._lock.close()  # the machine is free for another node
            self._lock = None
        if left:
            _say("not removed: " + "; ".join(left))
        return left

    def _claim_machine(self) -> None:
        """One node per machine (its bridge, addresses and DNS port are fixed): a lock held
        for the node's life. Another running one is said; a crashed one's leftovers are
        removed as its network is set up again."""
        cache_dir().mkdir(parents=True, exist_ok=True)
        self._lock = open(cache_dir() / "node.lock", "a+")  # noqa: SIM115 - held until stop
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.seek(0)
            holder = self._lock.read().strip()
            self._lock.close()
            self._lock = None
            raise ClusterUnavailableError(
                f"another node runs on this machine (process {holder or 'unknown'}): one at "
                "a time") from None
        self._lock.seek(0)
        self._lock.truncate()
        self._lock.write(str(os.getpid()))
        self._lock.flush()

    # -- images ------------------------------------------------------------------------

    def import_image(self, archive: Path) -> None:
        """Import an OCI archive's image(s) into the node's containerd (what the kubelet runs
        with ``imagePullPolicy: Never`` or ``IfNotPresent``).

        Raises:
            ClusterUnavailableError: ``ctr`` refused it.
        """
        self._ctr("images", "import", str(archive))

    def images(self) -> list[str]:
        done = self._ctr("images", "ls", "-q")
        return done.split()

    def _ctr(self, *args: str) -> str:
        done = subprocess.run(["ctr", "--address", str(self.socket), "--namespace", "k8s.io",
                               *args], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise ClusterUnavailableError(f"ctr {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout

    # -- parts -------------------------------------------------------------------------

    def _cgroup_root(self) -> None:
        """The kubelet's cgroup root in every hierarchy (the kubelet wants it to exist);
        a cpuset starts with its parent's CPUs and memory nodes, as a new one is empty."""
        for hierarchy in _CGROUPS.iterdir():
            if not hierarchy.is_dir():
                continue
            root = hierarchy / CGROUP_ROOT
            root.mkdir(exist_ok=True)
            for name in ("cpuset.cpus", "cpuset.mems"):
                if (hierarchy / name).exists():
                    (root / name).write_text((hierarchy / name).read_text())

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        assert self.workdir is not None
        log = open(self.workdir / f"{name}.log", "ab")
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        log.close()
        self._processes[name] = process
        return process

    def _start_containerd(self) -> None:
        assert self.workdir is not None
        base = self.workdir / "containerd"
        cni = self.workdir / "cni"
        (cni / "net.d").mkdir(parents=True)
        (cni / "net.d" / "10-kcg-node.conflist").write_text(
            node_network.cni_config(cni / "ipam"))
        base.mkdir()
        config = base / "config.toml"
        config.write_text(f"""version = 2
root = "{base / 'root'}"
state = "{base / 'state'}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{self.socket}"
[ttrpc]
  address = "{self.socket}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{base / 'opt'}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  # root here lacks CAP_SYS_RESOURCE: no score below containerd's own (the kubelet asks -998)
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni / 'net.d'}"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{shutil.which('runc') or '/usr/sbin/runc'}"
        Root = "{base / 'runc'}"
        SystemdCgroup = false
""")
        process = self._spawn("containerd", ["containerd", "--config", str(config)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise ClusterUnavailableError(
                    f"containerd exited:\n{log_tail(self.workdir / 'containerd.log')}")
            if self.socket.exists() and subprocess.run(
                    ["ctr", "--address", str(self.socket), "version"],
                    capture_output=True).returncode == 0:
                return
            time.sleep(0.2)
        raise ClusterUnavailableError(
            f"containerd not up within 30 s:\n{log_tail(self.workdir / 'containerd.log')}")

    def _start_components(self) -> None:
        assert self.cluster is not None and self.workdir is not None
        assert self._binaries is not None
        cluster, work, bins = self.cluster, self.workdir, self._binaries
        kubeconfig = cluster.write_kubeconfig(work / "components.kubeconfig", cluster.admin)
        self._spawn("kube-controller-manager", [
            str(bins / "kube-controller-manager"), f"--kubeconfig={kubeconfig}",
            "--leader-elect=false", "--port=0", "--secure-port=0",
            f"--service-account-private-key-file={cluster.workdir / 'sa.key'}",
            f"--root-ca-file={cluster.primary.ca_file}",
            "--use-service-account-credentials=false", "--allocate-node-cidrs=false",
            "--controllers=*", f"--feature-gates={_PROJECTED_TOKENS}", "--v=1"])
        self._spawn("kube-scheduler", [
            str(bins / "kube-scheduler"), f"--kubeconfig={kubeconfig}", "--leader-elect=false",
            "--port=0", "--secure-port=0", "--v=1"])
        proxy = work / "kube-proxy.yaml"
        proxy.write_text(json.dumps({
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "mode": "iptables", "clusterCIDR": POD_RANGE, "hostnameOverride": NODE_NAME,
            "bindAddress": GATEWAY, "healthzBindAddress": f"127.0.0.1:{free_port()}",
            "metricsBindAddress": f"127.0.0.1:{free_port()}",
            "nodePortAddresses": [f"{GATEWAY}/32"],
            # conntrack's settings are the machine's: none written
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                          "tcpCloseWaitTimeout": "0s"},
            "iptables": {"syncPeriod": "5s", "minSyncPeriod": "0s"}}))
        self._spawn("kube-proxy", [str(bins / "kube-proxy"), f"--config={proxy}", "--v=1"])
        (work / "resolv.conf").write_text("")  # pods resolve through the cluster DNS alone
        kubelet_dir = work / "kubelet"
        kubelet_dir.mkdir()
        config = work / "kubelet.yaml"
        self.kubelet_port = free_port()
        config.write_text(json.dumps({
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "address": GATEWAY, "port": self.kubelet_port, "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": free_port(),
            # as kubeadm sets a kubelet up: nobody anonymous; a client certificate of the
            # kubelet CA (the API server's: logs, exec) or a token the API server reviews,
            # and whatever either asks authorized by the API server (SubjectAccessReview;
            # an allow kept 5 minutes, a deny 30 s). The node's input guard lets only the
            # machine and its pods reach it (control_plane.node_network).
            "authentication": {"anonymous": {"enabled": False},
                               "webhook": {"enabled": True, "cacheTTL": "2m"},
                               "x509": {"clientCAFile": str(self._kubelet_ca[0])}},
            "authorization": {"mode": "Webhook",
                              "webhook": {"cacheAuthorizedTTL": "5m",
                                          "cacheUnauthorizedTTL": "30s"}},
            "cgroupDriver": "cgroupfs", "cgroupRoot": f"/{CGROUP_ROOT}", "failSwapOn": False,
            "clusterDNS": [GATEWAY], "clusterDomain": "cluster.local",
            "resolvConf": str(work / "resolv.conf"), "podCIDR": POD_RANGE, "maxPods": 40,
            "serializeImagePulls": False,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "2%",
                             "imagefs.available": "2%"},
            "volumePluginDir": str(work / "volume-plugins")}))
        self._spawn("kubelet", [
            str(bins / "kubelet"), f"--config={config}", f"--kubeconfig={kubeconfig}",
            "--container-runtime=remote",
            f"--container-runtime-endpoint=unix://{self.socket}",
            f"--root-dir={kubelet_dir}", f"--cert-dir={kubelet_dir / 'pki'}",
            f"--hostname-override={NODE_NAME}", f"--node-ip={GATEWAY}", "--v=1"])

    def _api(self, path: str, method: str = "GET", body: dict | None = None) -> dict:
        assert self.cluster is not None
        import ssl

        context = ssl.create_default_context(cafile=str(self.cluster.primary.ca_file))
        request = urllib.request.Request(
            self.cluster.primary.url + path, method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {self.cluster.admin.token}",
                     "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            return json.loads(answer.read())

    def kubelet_pods(self) -> list[dict]:
        """The pods as the kubelet sees them (its ``/pods``): its own probes' verdicts, not yet
        reported. Asked with the API server's kubelet client certificate, which the kubelet
        authorizes by asking the API server: while the API server is away, only within the
        5 minutes the kubelet keeps an allow, so ask once before stopping it."""
        import ssl

        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # its own cert
        context.load_cert_chain(*map(str, self._kubelet_client))
        with urllib.request.urlopen(f"https://{GATEWAY}:{self.kubelet_port}/pods", timeout=10,
                                    context=context) as answer:
            return json.loads(answer.read())["items"] or []

    def _cluster_ip(self, namespace: str, name: str) -> str | None:
        try:
            service = self._api(f"/api/v1/namespaces/{namespace}/services/{name}")
        except (OSError, ValueError):
            return None
        address = service.get("spec", {}).get("clusterIP")
        return address if address and address != "None" else None

    def _wait_node_ready(self) -> None:
        assert self.workdir is not None
        deadline = time.monotonic() + _READY_TIMEOUT
        last = "not registered"
        while time.monotonic() < deadline:
            for name, process in self._processes.items():
                if process.poll() is not None:
                    raise ClusterUnavailableError(
                        f"{name} exited ({process.returncode}):\n"
                        f"{log_tail(self.workdir / f'{name}.log')}")
            try:
                node = self._api(f"/api/v1/nodes/{NODE_NAME}")
                ready = [c for c in node.get("status", {}).get("conditions", [])
                         if c.get("type") == "Ready"]
                last = ready[0].get("message", "") if ready else "no Ready condition"
                if ready and ready[0].get("status") == "True":
                    self._api("/api/v1/namespaces/default/serviceaccounts/default")
                    return
            except OSError as exc:
                last = str(exc)
            time.sleep(0.5)
        raise ClusterUnavailableError(
            f"the node was not Ready within {_READY_TIMEOUT:.0f} s ({last}); kubelet log:\n"
            f"{log_tail(self.workdir / 'kubelet.log')}")

    # -- stopping ----------------------------------------------------------------------

    def _drain_pods(self) -> None:
        """Delete every pod at once and give the kubelet a moment to tear them down (their
        networks through the CNI, their volumes); what it leaves is removed by force."""
        try:
            for namespace in self._api("/api/v1/namespaces")["items"]:
                name = namespace["metadata"]["name"]
                self._api(f"/api/v1/namespaces/{name}/pods?gracePeriodSeconds=0", "DELETE")
        except OSError:
            return
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if not self._ctr("tasks", "ls", "-q").split():
                    return
            except ClusterUnavailableError:
                return
            time.sleep(0.5)

    def _remove_containers(self) -> None:
        if self.workdir is None or not self.socket.exists():
            return
        try:
            for task in self._ctr("tasks", "ls", "-q").split():
                subprocess.run(["ctr", "--address", str(self.socket), "-n", "k8s.io", "tasks",
                                "kill", "-a", "-s", "SIGKILL", task], capture_output=True)
                subprocess.run(["ctr", "--address", str(self.socket), "-n", "k8s.io", "tasks",
                                "delete", "-f", task], capture_output=True)
        except (ClusterUnavailableError, subprocess.TimeoutExpired):
            pass

    def _kill_shims(self) -> None:
        """The runc shims containerd started (they outlive it by design), found by the
        socket of this node they name: never by program name."""
        if self.workdir is None:
            return
        mark = str(self.socket).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if mark in command and b"containerd-shim" in command:
                try:
                    os.kill(int(entry.name), signal.SIGKILL)
                except OSError:
                    pass

    def _unmount_all(self) -> list[str]:
        """Unmount what lies under the node's directory (snapshots, pods' volumes, network
        namespaces), deepest first."""
        if self.workdir is None:
            return []
        prefix = str(self.workdir) + "/"
        left = []
        for _ in range(3):
            points = sorted({line.split()[4] for line in
                             Path("/proc/self/mountinfo").read_text().splitlines()
                             if line.split()[4].startswith(prefix)}, key=len, reverse=True)
            if not points:
                return []
            left = []
            for point in points:
                if subprocess.run(["umount", point], capture_output=True).returncode != 0 and \
                        subprocess.run(["umount", "-l", point], capture_output=True).returncode:
                    left.append(f"mount {point}")
        return left

    def _remove_cgroups(self) -> list[str]:
        """Kill what is left in the node's cgroups (a container whose shim went first), then
        remove them, deepest first, in every hierarchy."""
        left = []
        for hierarchy in _CGROUPS.iterdir():
            root = hierarchy / CGROUP_ROOT
            if not root.is_dir():
                continue
            groups = sorted((p for p in root.rglob("*") if p.is_dir()),
                            key=lambda p: len(p.parts), reverse=True) + [root]
            for group in groups:
                for attempt in range(20):
                    try:
                        for pid in (group / "cgroup.procs").read_text().split():
                            os.kill(int(pid), signal.SIGKILL)
                        group.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.1)
                else:
                    left.append(f"cgroup {group}")
        return left


def main() -> int:
    """``python -m control_plane.node [--image] [ARCHIVE ...]``: start a node, import the OCI
    archives given (``--image``: the image ``make image`` built), print how to reach it, and
    keep it until interrupted."""
    args = sys.argv[1:]
    try:
        node = LocalNode().start()
    except ClusterUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        for given in args:
            if given == "--image":
                from control_plane.image import archive

                assert node.workdir is not None
                node.import_image(archive(node.workdir / "gateway.tar"))
            else:
                node.import_image(Path(given))
        print(f"node {NODE_NAME} Ready in {node.start_seconds:.0f} s\n"
              f"export KUBECONFIG={node.kubeconfig}\n"
              f"images: {' '.join(i for i in node.images() if not i.startswith('sha256:'))}\n"
              "(Ctrl-C stops it and removes everything it made)", flush=True)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    except ClusterUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        node.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
