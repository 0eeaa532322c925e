"""An OCI image archive written from files, for images too small to need a builder.

A node's every pod starts with a sandbox container, the pause program (``build/pause`` of
the Kubernetes source: a static binary that sleeps and reaps). Registries are out of reach
here, so its image is made from the binary built beside the kubelet: one layer holding it,
a config naming it the entrypoint, written as an OCI image layout in a tar archive that
containerd imports (``ctr images import``) under the name its index annotates.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

__all__ = ["write_image"]


def _blob(archive: tarfile.TarFile, data: bytes, media_type: str) -> dict:
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))
    return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}


def _layer(files: dict[str, tuple[bytes, int]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as layer:
        for name, (data, mode) in sorted(files.items()):
            info = tarfile.TarInfo(name.lstrip("/"))
            info.size, info.mode = len(data), mode
            layer.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def write_image(path: Path, name: str, files: dict[str, tuple[bytes, int]],
                entrypoint: list[str], user: str = "") -> Path:
    """Write an OCI archive at ``path`` holding one image, ``name``, of ``files``
    (path -> (bytes, mode)) in one layer, run as ``entrypoint`` (by ``user``); return
    ``path``."""
    uncompressed = _layer(files)
    compressed = gzip.compress(uncompressed, mtime=0)
    config = {"architecture": "amd64", "os": "linux",
              "config": {"Entrypoint": entrypoint, **({"User": user} if user else {})},
              "rootfs": {"type": "layers",
                         "diff_ids": [f"sha256:{hashlib.sha256(uncompressed).hexdigest()}"]}}
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as archive:
        layout = json.dumps({"imageLayoutVersion": "1.0.0"}).encode()
        info = tarfile.TarInfo("oci-layout")
        info.size = len(layout)
        archive.addfile(info, io.BytesIO(layout))
        layer = _blob(archive, compressed, "application/vnd.oci.image.layer.v1.tar+gzip")
        config_blob = _blob(archive, json.dumps(config).encode(),
                            "application/vnd.oci.image.config.v1+json")
        manifest = _blob(archive, json.dumps({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": config_blob, "layers": [layer]}).encode(),
            "application/vnd.oci.image.manifest.v1+json")
        manifest["annotations"] = {"io.containerd.image.name": name,
                                   "org.opencontainers.image.ref.name": name.rpartition(":")[2]}
        manifest["platform"] = {"architecture": "amd64", "os": "linux"}
        index = json.dumps({"schemaVersion": 2, "manifests": [manifest]}).encode()
        info = tarfile.TarInfo("index.json")
        info.size = len(index)
        archive.addfile(info, io.BytesIO(index))
    return path
