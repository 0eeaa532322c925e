"""Certificates for tests and benchmarks, made with the ``openssl`` the harness already requires.

Serving: the API server makes its own; the gateway, served over TLS in a comparison with it,
needs one of the same kind: a fresh key and a certificate for ``localhost`` and
``127.0.0.1``. Clients: a CA the API server trusts for clients (``--client-ca-file``, as
kubeadm's and kind's clusters have) and certificates it signs, whose subject is a user
(CN) and its groups (O), as kubeadm writes ``kubernetes-admin`` in ``system:masters``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["certificate_authority", "client_certificate", "intermediate_authority",
           "self_signed_cert"]


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


def _openssl(*args: str) -> None:
    proc = subprocess.run(["openssl", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {proc.stdout}")


def certificate_authority(directory: Path, name: str = "client-ca") -> tuple[Path, Path]:
    """Write a CA's ``<name>.crt`` and ``<name>.key`` into ``directory``; return their paths.

    Raises:
        RuntimeError: ``openssl`` failed.
    """
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "2",
             "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return cert, key


def _signed(directory: Path, ca: tuple[Path, Path], name: str, subject: str,
            extensions: str) -> tuple[Path, Path]:
    """Write ``<name>.crt`` and ``<name>.key`` for ``subject`` with ``extensions`` (an
    ``openssl`` extension file's lines), signed by ``ca`` (its cert and key paths); return
    their paths. The request and extension files made on the way are removed."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key, csr, ext = (directory / f"{name}.{suffix}" for suffix in ("crt", "key", "csr", "ext"))
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-sha256", "-keyout", str(key),
             "-out", str(csr), "-subj", subject)
    ext.write_text(extensions)
    try:
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
                 "-CAcreateserial", "-days", "2", "-sha256", "-extfile", str(ext),
                 "-out", str(cert))
    finally:
        csr.unlink()
        ext.unlink()
    return cert, key


def intermediate_authority(directory: Path, parent: tuple[Path, Path],
                           name: str = "intermediate-ca") -> tuple[Path, Path]:
    """Write a CA's ``<name>.crt`` and ``<name>.key`` signed by ``parent`` (a CA's cert and
    key paths) into ``directory``; return their paths.

    Raises:
        RuntimeError: ``openssl`` failed.
    """
    return _signed(directory, parent, name, f"/CN={name}",
                   "basicConstraints=critical,CA:TRUE\n"
                   "keyUsage=critical,keyCertSign,cRLSign\n")


def client_certificate(directory: Path, ca: tuple[Path, Path], user: str,
                       groups: tuple[str, ...] = (), name: str = "") -> tuple[Path, Path]:
    """Write a client certificate for ``user`` in ``groups``, signed by ``ca`` (its cert and
    key paths), as ``<name>.crt`` and ``<name>.key`` (``name``: the user's); return them.
    ``user`` empty: a subject with no common name (which names nobody).

    Raises:
        RuntimeError: ``openssl`` failed.
    """
    subject = "".join(f"/O={g}" for g in groups) + (f"/CN={user}" if user else "")
    return _signed(directory, ca, name or user.replace(":", "-"), subject,
                   "keyUsage=critical,digitalSignature,keyEncipherment\n"
                   "extendedKeyUsage=clientAuth\n")
