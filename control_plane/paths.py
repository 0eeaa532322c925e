"""Where the control plane's tools are kept between runs: one place, never the repository."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/kube-cache-gateway`` (else ``~/.cache/kube-cache-gateway``): the
    kube-apiserver built once, the client tools fetched once."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "kube-cache-gateway"
