"""The gateway's container image, built from the Dockerfile and run, with Debian's tools alone.

There is no container daemon on these machines and no registry to pull a base from, so:

- **Tools.** buildah builds, podman runs, runc is the runtime (crun refuses this host's
  mixed cgroups), debootstrap makes the base: Debian packages, installed when missing.
- **Storage and configuration of our own**, under the binaries cache (``containers/``):
  the ``overlay`` driver (``vfs`` copies the image per container: 15-18 s against under
  half a second), ``chroot`` isolation, the host's network namespace, cgroupfs, and no
  default ulimits above the host's hard limits (root here lacks CAP_SYS_RESOURCE).
- **A stand-in base.** ``debootstrap --variant=minbase bookworm`` with python3, pip and
  venv, certificates, netbase and tzdata (pip's ``EXTERNALLY-MANAGED`` marker removed),
  committed under exactly the name the Dockerfile's ``ARG PYTHON_IMAGE`` defaults to, so the
  Dockerfile builds unedited. It stands in for the official Python image: Debian's Python in
  ``/usr/bin`` rather than a build of its own in ``/usr/local``. Built once, kept.
- **The build**: ``buildah build`` with the host's CA store mounted for pip (not committed),
  tagged with what the Helm chart's ``image.repository``/``tag`` default to.

``python -m control_plane.image`` (``make image``) builds it and prints its name.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from control_plane.errors import ClusterUnavailableError
from control_plane.paths import cache_dir

__all__ = ["BASE", "REPOSITORY", "archive", "build", "environment", "image_name", "main",
           "run_podman", "version"]

ROOT = Path(__file__).resolve().parent.parent
BASE = "python:3.11-slim-bookworm"  # the Dockerfile's ARG PYTHON_IMAGE default, stood in for
REPOSITORY = "ghcr.io/kube-cache-gateway/kube-cache-gateway"  # the chart's image.repository
_PACKAGES = ["buildah", "podman", "runc", "debootstrap"]
_BASE_PACKAGES = "python3,python3-pip,python3-venv,ca-certificates,netbase,tzdata"


def _say(msg: str) -> None:
    print(f"[image] {msg}", file=sys.stderr, flush=True)


def _store() -> Path:
    return cache_dir() / "containers"


def environment() -> dict[str, str]:
    """The environment buildah and podman run with: storage and configuration of our own."""
    store = _store()
    store.mkdir(parents=True, exist_ok=True)
    storage = store / "storage.conf"
    storage.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{store}/graph"\n'
                       f'runroot = "{store}/run"\n')
    files, processes = _hard_limits()
    containers = store / "containers.conf"
    containers.write_text(
        '[containers]\nnetns = "host"\n'
        f'default_ulimits = ["nofile={files}:{files}", "nproc={processes}:{processes}"]\n'
        '[engine]\ncgroup_manager = "cgroupfs"\nruntime = "runc"\nevents_logger = "file"\n')
    return {**os.environ, "CONTAINERS_STORAGE_CONF": str(storage),
            "CONTAINERS_CONF": str(containers), "BUILDAH_ISOLATION": "chroot"}


def _hard_limits() -> tuple[int, int]:
    """Open files and processes a container may have: podman's defaults are above what this
    process may grant (no CAP_SYS_RESOURCE), and conmon runs with at most 32768 processes."""
    import resource

    def capped(limit: int, most: int) -> int:
        hard = resource.getrlimit(limit)[1]
        return most if hard == resource.RLIM_INFINITY else min(hard, most)

    return capped(resource.RLIMIT_NOFILE, 1048576), capped(resource.RLIMIT_NPROC, 32768)


def _run(cmd: list[str], env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, env=env or environment(), capture_output=True, text=True, **kw)
    if done.returncode != 0:
        raise ClusterUnavailableError(f"{' '.join(cmd[:3])} failed ({done.returncode}):\n"
                                      f"{(done.stderr or done.stdout)[-3000:]}")
    return done


def ensure_tools() -> None:
    """Install buildah, podman, runc and debootstrap when missing (as root)."""
    missing = [p for p in _PACKAGES if shutil.which(p if p != "debootstrap" else "debootstrap")
               is None and not Path(f"/usr/sbin/{p}").exists()]
    if not missing:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise ClusterUnavailableError(f"the image needs Debian's {missing}: apt-get install -y "
                                      f"{' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True)
    _run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing], env=env)


def _has_image(name: str) -> bool:
    done = subprocess.run(["buildah", "images", "--json", name], env=environment(),
                          capture_output=True, text=True)
    return done.returncode == 0 and bool(json.loads(done.stdout or "[]"))


def ensure_base() -> float:
    """The stand-in base, built once (seconds it took; 0 when it was there)."""
    if _has_image(BASE):
        return 0.0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kcg-base-", dir=cache_dir()) as work:
        rootfs = Path(work) / "rootfs"
        _say(f"debootstrap bookworm into {rootfs} (about a minute, once)")
        _run(["debootstrap", "--variant=minbase", f"--include={_BASE_PACKAGES}", "bookworm",
              str(rootfs), "http://deb.debian.org/debian"], env=dict(os.environ))
        for marker in rootfs.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
            marker.unlink()  # pip installs into the image's own Python, as in the official one
        shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
        (rootfs / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
        env = environment()
        container = _run(["buildah", "from", "scratch"], env).stdout.strip()
        try:
            mount = _run(["buildah", "mount", container], env).stdout.strip()
            _run(["cp", "-a", f"{rootfs}/.", mount], env)
            _run(["buildah", "umount", container], env)
            _run(["buildah", "config", "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                  "/usr/bin:/sbin:/bin", "--env", "LANG=C.UTF-8", "--cmd", "python3",
                  "--label", "org.opencontainers.image.description=a stand-in for "
                  f"{BASE}: Debian bookworm's Python (debootstrap minbase)", container], env)
            _run(["buildah", "commit", "--rm", container, BASE], env)
        except BaseException:
            subprocess.run(["buildah", "rm", container], env=env, capture_output=True)
            raise
    took = time.monotonic() - started
    _say(f"base {BASE} made in {took:.0f} s")
    return took


def version() -> str:
    """The project's version, from its package metadata (``pyproject.toml`` in a checkout
    not installed): read here, not from ``app``, which stands on this package."""
    from importlib import metadata

    try:
        return metadata.version("kube-cache-gateway")
    except metadata.PackageNotFoundError:
        import tomllib

        return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def image_name() -> str:
    """What ``make image`` tags: the chart's default repository and the project's version."""
    return f"{REPOSITORY}:{version()}"


def _revision() -> str:
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def build() -> dict[str, float | str]:
    """Build the image from the Dockerfile, unedited; its name and each step's seconds."""
    ensure_tools()
    times: dict[str, float | str] = {"base_s": round(ensure_base(), 1)}
    started = time.monotonic()
    # no --layers: buildah 1.28 cannot bind-mount from a stage it took from its cache
    # ("couldn't find .../merged/wheels on host"), so both stages run every time (~20 s)
    _run(["buildah", "build", "--isolation", "chroot", "--network", "host", "--pull=never",
          "-v", "/etc/ssl/certs:/etc/ssl/certs:ro",
          "--build-arg", f"VERSION={version()}", "--build-arg", f"REVISION={_revision()}",
          "-t", image_name(), "-f", str(ROOT / "Dockerfile"), str(ROOT)], timeout=900)
    times["build_s"] = round(time.monotonic() - started, 1)
    times["image"] = image_name()
    # the image this name had before is left untagged: let it go (125 MB a build otherwise)
    subprocess.run(["podman", "image", "prune", "--force"], env=environment(),
                   capture_output=True, timeout=300)
    return times


def archive(path: Path, name: str = "") -> Path:
    """Write the built image ``name`` (default: ``image_name()``) as an OCI archive at
    ``path``, under its name: what a node without a registry imports
    (``control_plane.node.LocalNode.import_image``).

    Raises:
        ClusterUnavailableError: buildah could not write it.
    """
    name = name or image_name()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    _run(["buildah", "push", "--quiet", name, f"oci-archive:{path}:{name}"], env=environment())
    return path


def run_podman(*args: str, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess:
    """``podman`` with our storage and configuration."""
    done = subprocess.run(["podman", *args], env=environment(), capture_output=True, text=True,
                          timeout=timeout)
    if check and done.returncode != 0:
        raise ClusterUnavailableError(f"podman {' '.join(args[:2])}: {done.stderr[-2000:]}")
    return done


def main() -> int:
    try:
        times = build()
    except ClusterUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(times))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
