"""An OCI archive written from files holds what the image layout specification asks: every
blob under its own digest, the manifest naming its config and layer, the index its name
(containerd imports it and runs it as every pod's sandbox: tests/deploy/test_chart_on_node.py)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile

from control_plane.oci import write_image


def test_the_archive_is_an_image_layout_whose_blobs_are_their_digests(tmp_path):
    path = write_image(tmp_path / "pause.tar", "localhost/x/pause:v1",
                       {"pause": (b"\x7fELF...", 0o755)}, ["/pause"])
    with tarfile.open(path) as archive:
        files = {m.name: archive.extractfile(m).read() for m in archive.getmembers()}
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    for name, data in files.items():
        if name.startswith("blobs/sha256/"):
            assert hashlib.sha256(data).hexdigest() == name.rsplit("/", 1)[1]
    [entry] = json.loads(files["index.json"])["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == "localhost/x/pause:v1"
    manifest = json.loads(files["blobs/" + entry["digest"].replace(":", "/")])
    config = json.loads(files["blobs/" + manifest["config"]["digest"].replace(":", "/")])
    assert config["config"]["Entrypoint"] == ["/pause"]
    layer = gzip.decompress(files["blobs/" + manifest["layers"][0]["digest"].replace(":", "/")])
    assert config["rootfs"]["diff_ids"] == [f"sha256:{hashlib.sha256(layer).hexdigest()}"]
    with tarfile.open(fileobj=io.BytesIO(layer)) as inner:
        [member] = inner.getmembers()
        assert (member.name, member.mode, inner.extractfile(member).read()) == \
            ("pause", 0o755, b"\x7fELF...")
