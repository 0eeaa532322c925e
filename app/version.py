"""The gateway's version, from one place: the project's own metadata (``pyproject.toml``).

Everything that states it reads it here (``kube-cache-gateway version``, ``--version``,
``kcg_build_info``, the ``User-Agent`` sent to API servers); the files that cannot read
it (the Dockerfile's default, the chart, the kustomization) are held to it by
``tests/test_version.py``.
"""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path

__all__ = ["PYTHON", "USER_AGENT", "VERSION"]


def _version() -> str:
    try:
        return metadata.version("kube-cache-gateway")
    except metadata.PackageNotFoundError:  # a checkout run without being installed
        import tomllib

        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        return tomllib.loads(pyproject.read_text())["project"]["version"]


VERSION = _version()
PYTHON = platform.python_version()
# What API servers see in their audit logs and API Priority and Fairness: who is asking.
USER_AGENT = f"kube-cache-gateway/{VERSION} (python/{PYTHON})"
