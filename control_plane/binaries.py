"""Provide etcd and kube-apiserver binaries for a local control plane.

Resolution order, first hit wins:

1. ``KCG_ETCD`` / ``KCG_KUBE_APISERVER`` — explicit paths to binaries.
2. ``KUBEBUILDER_ASSETS`` — a directory holding ``etcd`` and ``kube-apiserver``
   (what controller-runtime's ``setup-envtest`` produces).
3. ``etcd`` from ``PATH`` (Debian's ``etcd-server``) and a kube-apiserver built
   once from Debian's ``kubernetes`` source package, cached outside the repository
   under ``$XDG_CACHE_HOME/kube-cache-gateway/`` keyed by the source version.

Building takes minutes; progress goes to stderr. A file lock makes concurrent
callers (two test runs, a test run and ``demo``) share one build.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from control_plane.errors import ClusterUnavailableError
from control_plane.paths import cache_dir

__all__ = ["NODE_COMMANDS", "Binaries", "apt_install", "cache_dir", "ensure_binaries",
           "ensure_browser", "ensure_node_binaries", "is_root", "main"]

_DEB_SRC_FILE = Path("/etc/apt/sources.list.d/kube-cache-gateway-src.sources")
_BUILD_PACKAGES = ["golang-go", "rsync", "jq", "golang-github-modern-go-reflect2-dev"]
_REFLECT2_FIXED = Path("/usr/share/gocode/src/github.com/modern-go/reflect2")


@dataclass(frozen=True)
class Binaries:
    """Paths of the two control-plane binaries."""

    etcd: Path
    kube_apiserver: Path


def _say(msg: str) -> None:
    print(f"[local-cluster] {msg}", file=sys.stderr, flush=True)


def _run(cmd: list[str], *, cwd: Path | None = None, env: dict | None = None,
         log: Path | None = None) -> None:
    """Run a command; on failure raise with the tail of its output."""
    _say("$ " + " ".join(cmd))
    if log is None:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, check=False)
        output = proc.stdout
    else:
        with open(log, "a") as fh:
            proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=fh,
                                  stderr=subprocess.STDOUT, check=False)
        output = log.read_text(errors="replace")
    if proc.returncode != 0:
        tail = "\n".join(output.splitlines()[-30:])
        raise ClusterUnavailableError(
            f"command failed ({proc.returncode}): {' '.join(cmd)}\n{tail}")


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _installed(package: str) -> bool:
    """Return whether a Debian package is fully installed (not merely known to dpkg)."""
    proc = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True, check=False)
    return proc.returncode == 0 and proc.stdout.strip() == "install ok installed"


def apt_install(packages: list[str],
                otherwise: str = "point KCG_ETCD and KCG_KUBE_APISERVER at your own binaries"
                ) -> None:
    """Install Debian packages that are missing (needs root); ``otherwise``: what else a
    user without root may do, said in the error."""
    missing = [p for p in packages if not _installed(p)]
    if not missing:
        return
    if not is_root() or shutil.which("apt-get") is None:
        raise ClusterUnavailableError(
            f"Debian packages {missing} are needed; install them (as root: "
            f"apt-get install -y {' '.join(missing)}) or {otherwise}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    _run(["apt-get", "update", "-q"], env=env)
    _run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing], env=env)


def _ensure_deb_src() -> None:
    """Add a deb-src entry mirroring the machine's Debian source, then refresh apt."""
    if _DEB_SRC_FILE.exists():
        return
    main = Path("/etc/apt/sources.list.d/debian.sources")
    uris, signed_by, suite = "http://deb.debian.org/debian", "", "bookworm"
    if main.exists():
        for stanza in main.read_text().split("\n\n"):
            fields = dict(line.split(":", 1) for line in stanza.splitlines()
                          if ":" in line and not line.startswith("#"))
            if "security" in fields.get("URIs", "") or "URIs" not in fields:
                continue
            uris = fields["URIs"].strip()
            suite = fields.get("Suites", suite).split()[0]
            signed_by = fields.get("Signed-By", "").strip()
            break
    text = f"Types: deb-src\nURIs: {uris}\nSuites: {suite}\nComponents: main\n"
    if signed_by:
        text += f"Signed-By: {signed_by}\n"
    _DEB_SRC_FILE.write_text(text)
    _run(["apt-get", "update", "-q"], env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


def _source_version() -> str:
    """The Debian source version of ``kubernetes`` (the cache key)."""
    proc = subprocess.run(["apt-cache", "showsrc", "kubernetes"], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("Version:"):
            return line.split(":", 1)[1].strip()
    raise ClusterUnavailableError("apt-cache knows no source package 'kubernetes'")


def _build_from_source(commands: tuple[str, ...], prefix: str, also_pause: bool = False) -> Path:
    """Build ``commands`` (``cmd/NAME``) from Debian's ``kubernetes`` source into the cache's
    ``PREFIX-VERSION/`` (and the pause container's binary, ``build/pause``, with
    ``also_pause``) unless they are there; return that directory."""
    if not is_root():
        raise ClusterUnavailableError(
            f"no {', '.join(c.split('/')[-1] for c in commands)}: building from Debian's "
            "source needs root for apt-get; set KCG_KUBE_APISERVER (or KUBEBUILDER_ASSETS) "
            "to your own binaries")
    _ensure_deb_src()
    apt_install(_BUILD_PACKAGES + (["gcc", "libc6-dev"] if also_pause else []))
    version = _source_version()
    target_dir = cache_dir() / f"{prefix}-{version.replace(':', '_')}"
    names = [c.split("/")[-1] for c in commands] + (["pause"] if also_pause else [])
    if all((target_dir / name).exists() for name in names):
        return target_dir
    target_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="kcg-build-", dir=cache_dir()))
    log = work / "build.log"
    names = names[:len(commands)]
    try:
        _say(f"building {', '.join(names)} {version} from Debian's source once "
             f"(about 7 minutes on 2 cores for each); log: {log}")
        _run(["apt-get", "source", "-q", "kubernetes"], cwd=work, log=log)
        src = next(p for p in work.iterdir() if p.is_dir() and p.name.startswith("kubernetes-"))
        # Kubernetes 1.20 vendors reflect2 1.0.1, which faults under Go >= 1.18
        # (fatal error in UnsafeMapType.UnsafeIterate); Debian's 1.0.2 has the same API.
        vendored = src / "vendor/github.com/modern-go/reflect2"
        for old in list(vendored.glob("*.go")) + list(vendored.glob("*.s")):
            old.unlink()
        for new in list(_REFLECT2_FIXED.glob("*.go")) + list(_REFLECT2_FIXED.glob("*.s")):
            if not new.name.endswith("_test.go"):
                shutil.copy2(new, vendored / new.name)
        gopath = src / ".go"
        (gopath / "src/k8s.io").mkdir(parents=True, exist_ok=True)
        link = gopath / "src/k8s.io/kubernetes"
        if not link.exists():
            link.symlink_to("../../..")
        home = work / "home"
        home.mkdir(exist_ok=True)
        env = dict(os.environ, GOPATH=str(gopath), CGO_ENABLED="0", HOME=str(home))
        proc = subprocess.Popen(["make", f"WHAT={' '.join(commands)}"], cwd=src, env=env,
                                stdout=open(log, "a"), stderr=subprocess.STDOUT)
        while proc.poll() is None:
            time.sleep(15)
            _say(f"  ... still building {', '.join(names)} ({time.monotonic() - started:.0f} s)")
        if proc.returncode != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
            raise ClusterUnavailableError(f"the build of {', '.join(names)} failed:\n{tail}")
        built = [(src / "_output/bin" / name, name) for name in names]
        if also_pause:  # the sandbox every pod starts with: a static C program of a few lines
            pause = work / "pause"
            _run(["gcc", "-Os", "-Wall", "-Werror", "-static", "-DVERSION=v3.4.1-debian",
                  "-o", str(pause), str(src / "build/pause/linux/pause.c")], log=log)
            built.append((pause, "pause"))
        for path, name in built:  # each made whole under a temporary name, then renamed
            tmp = target_dir / f"{name}.tmp"
            shutil.copy2(path, tmp)
            tmp.rename(target_dir / name)
        _say(f"built {', '.join(names)} in {time.monotonic() - started:.0f} s -> {target_dir}")
        return target_dir
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _build_kube_apiserver() -> Path:
    """Build kube-apiserver from Debian's source package into the cache; return its path."""
    return _build_from_source(("cmd/kube-apiserver",), "kube-apiserver") / "kube-apiserver"


def _cached_kube_apiserver() -> Path | None:
    found = sorted(cache_dir().glob("kube-apiserver-*/kube-apiserver"))
    return found[-1] if found else None


def ensure_binaries(build: bool = True) -> Binaries:
    """Return usable binaries, installing etcd and building kube-apiserver if allowed.

    Raises:
        ClusterUnavailableError: when no binary can be found or made; the message
            says what to install or which variable to set.
    """
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    etcd = os.environ.get("KCG_ETCD") or (assets and str(Path(assets) / "etcd")) or None
    apiserver = (os.environ.get("KCG_KUBE_APISERVER")
                 or (assets and str(Path(assets) / "kube-apiserver")) or None)
    for name, value in (("etcd", etcd), ("kube-apiserver", apiserver)):
        if value and not os.access(value, os.X_OK):
            raise ClusterUnavailableError(f"{name} binary {value!r} is not executable")
    if etcd is None:
        etcd = shutil.which("etcd") or ("/usr/bin/etcd" if os.access("/usr/bin/etcd", os.X_OK) else None)
        if etcd is None and build:
            apt_install(["etcd-server"])
            etcd = shutil.which("etcd") or (
                "/usr/bin/etcd" if os.access("/usr/bin/etcd", os.X_OK) else None)
        if etcd is None:
            raise ClusterUnavailableError("no etcd: install Debian's etcd-server or set KCG_ETCD")
    if apiserver is None:
        cached = _cached_kube_apiserver()
        if cached is None and build:
            cache_dir().mkdir(parents=True, exist_ok=True)
            with open(cache_dir() / "build.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                cached = _cached_kube_apiserver() or _build_kube_apiserver()
        if cached is None:
            raise ClusterUnavailableError(
                "no kube-apiserver: run `make setup` to build it, or set KCG_KUBE_APISERVER")
        apiserver = str(cached)
    return Binaries(etcd=Path(etcd), kube_apiserver=Path(apiserver))


NODE_COMMANDS = ("kubelet", "kube-proxy", "kube-controller-manager", "kube-scheduler")
_NODE_PACKAGES = ["containerd", "runc", "containernetworking-plugins", "conntrack", "iptables"]


def ensure_node_binaries(build: bool = True) -> Path:
    """The directory holding a node's binaries — ``NODE_COMMANDS`` and ``pause`` — beside the
    control plane's: ``KCG_NODE_BINARIES`` when set, else built once from the same Debian
    source as kube-apiserver (about 10 minutes on 2 cores) and cached; the node's Debian
    packages (containerd, runc, the CNI plugins, conntrack, iptables) installed if missing.

    Raises:
        ClusterUnavailableError: they cannot be found or made; the message says why.
    """
    given = os.environ.get("KCG_NODE_BINARIES")
    if given:
        missing = [n for n in (*NODE_COMMANDS, "pause") if not os.access(Path(given) / n, os.X_OK)]
        if missing:
            raise ClusterUnavailableError(f"KCG_NODE_BINARIES={given!r} lacks {missing}")
        return Path(given)
    if build:
        apt_install(_NODE_PACKAGES)
    found = sorted(cache_dir().glob("kubernetes-node-*/pause"))
    if found:
        return found[-1].parent
    if not build:
        raise ClusterUnavailableError(
            "no node binaries: run `make setup` to build them, or set KCG_NODE_BINARIES")
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_from_source(tuple(f"cmd/{n}" for n in NODE_COMMANDS), "kubernetes-node",
                                  also_pause=True)


def ensure_browser() -> str | None:
    """Return a headless-capable Chromium, installing Debian's ``chromium`` if allowed."""
    found = os.environ.get("KCG_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and is_root() and shutil.which("apt-get"):
        apt_install(["chromium"])
        found = shutil.which("chromium")
    return found


_TEST_TOOLS = (("go", "golang-go"), ("wrk", "wrk"), ("tinyproxy", "tinyproxy"),
               ("promtool", "prometheus"), ("buildah", "buildah"), ("podman", "podman"),
               ("runc", "runc"), ("debootstrap", "debootstrap"))


def main() -> int:
    """``python -m control_plane.binaries``: make sure the test tools exist.

    etcd and kube-apiserver always; ``--test-tools`` adds Chromium (the
    EventSource test), Go (the fan-out benchmark's receivers), wrk (the
    query benchmark's load generator), tinyproxy (a real forward proxy for the
    proxy tests), promtool (the chart's alerts evaluated), buildah, podman, runc and
    debootstrap (the image built and run: ``control_plane.image``), kubectl 1.20 and 1.35 and
    helm 4 (``control_plane.client_tools``: the clients the suite runs; without them it
    fails), and a node's binaries and packages (``ensure_node_binaries``: the chart run on a
    node, ``control_plane.node``).
    """
    try:
        found = ensure_binaries(build=True)
    except ClusterUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"etcd: {found.etcd}\nkube-apiserver: {found.kube_apiserver}")
    if "--test-tools" in sys.argv[1:]:
        try:
            browser = ensure_browser()
            missing = [package for tool, package in _TEST_TOOLS if shutil.which(tool) is None
                       and not Path(f"/usr/bin/{tool}").exists() and not Path(f"/usr/sbin/{tool}").exists()]
            if missing and is_root() and shutil.which("apt-get"):
                apt_install(missing)
        except ClusterUnavailableError as exc:
            print(f"warning: test tools incomplete: {exc}", file=sys.stderr)
            browser = None
        print(f"chromium: {browser or 'not available'}")
        for tool, _ in _TEST_TOOLS:
            print(f"{tool}: {shutil.which(tool, path='/usr/sbin:/usr/bin:' + os.environ.get('PATH', '')) or 'not available'}")
        from control_plane.client_tools import ensure_client_tools

        try:
            for name, path in ensure_client_tools().items():
                print(f"{name}: {path}")
            print(f"node binaries: {ensure_node_binaries()}")
        except ClusterUnavailableError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
