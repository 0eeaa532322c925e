"""Self-signed serving certificates for tests and benchmarks of HTTPS serving.

The API server makes its own; the gateway, served over TLS in a comparison
with it, needs one of the same kind: a fresh key and a certificate for
``localhost`` and ``127.0.0.1``, made with the ``openssl`` the harness already
requires.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["self_signed_cert"]


def self_signed_cert(directory: Path, name: str = "serving") -> tuple[Path, Path]:
    """Write ``<name>.crt`` and ``<name>.key`` into ``directory``; return their paths.

    Raises:
        RuntimeError: ``openssl`` failed (its output is in the message).
    """
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    proc = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "2",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"openssl req failed: {proc.stdout}")
    return cert, key
