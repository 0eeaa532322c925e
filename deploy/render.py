"""Write deploy/kube-cache-gateway.yaml: the Helm chart's defaults, rendered for kustomize.

    .venv/bin/python deploy/render.py          # rewrite the file
    .venv/bin/python deploy/render.py --check  # exit 1 if the file is not what the chart renders

The chart is the one source of the objects; this file is the chart rendered with
its default values, release name and namespace ``kube-cache-gateway``, for
``kubectl apply -k deploy/`` users. Helm's own labels are dropped (nothing
manages these objects but whoever applies them), and the tests check that the
file is exactly what the chart renders today, so the two never drift apart.

Rendered by the ``helm`` binary itself (Helm 4: ``python -m control_plane.binaries
--test-tools`` fetches it), as operators render the chart.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "helm" / "kube-cache-gateway"
OUT = Path(__file__).resolve().parent / "kube-cache-gateway.yaml"
NAME = NAMESPACE = "kube-cache-gateway"
KUBE_VERSION = "v1.21.0"  # the oldest API versions the file's objects use (policy/v1)
_HELM_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by")


class HelmError(Exception):
    """Helm refused the chart or its values; the message is Helm's own."""


def helm() -> str:
    """The helm binary: ``KCG_HELM``, else the one ``control_plane.binaries --test-tools``
    fetched (Helm 4), else ``helm`` on the PATH."""
    import os
    import shutil

    explicit = os.environ.get("KCG_HELM")
    if explicit:
        return explicit
    try:
        from control_plane.client_tools import helm as fetched

        return str(fetched())
    except Exception:  # noqa: BLE001 - not fetched: whatever helm the machine has
        found = shutil.which("helm")
        if found is None:
            raise HelmError("no helm: run `python -m control_plane.binaries --test-tools` "
                            "(make test does) or set KCG_HELM") from None
        return found


def _helm(*args: str, values: dict | None = None) -> str:
    """Run helm with ``values`` (a file Helm reads, JSON being YAML); its stdout, or HelmError."""
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json") as file:
        json.dump(values or {}, file)
        file.flush()
        done = subprocess.run([helm(), *args, "-f", file.name], capture_output=True, text=True,
                              timeout=120)
    if done.returncode != 0:
        raise HelmError(done.stderr.strip() or done.stdout.strip())
    return done.stdout


def render_chart(values: dict | None = None, name: str = NAME, namespace: str = NAMESPACE,
                 kube_version: str | None = None, api_versions: tuple[str, ...] = (),
                 notes: bool = False) -> dict[str, str]:
    """Template path -> rendered text, by ``helm template``.

    ``kube_version`` and ``api_versions`` are Helm's ``--kube-version`` and
    ``--api-versions``: what ``.Capabilities`` says when no cluster is asked. ``notes``:
    also ``NOTES.txt``, which only an install renders (``helm install --dry-run=client``).

    Raises:
        HelmError: the values fail the schema, or the chart's own checks (``fail``).
    """
    args = ["template", name, str(CHART), "--namespace", namespace]
    if kube_version:
        args += ["--kube-version", kube_version]
    for api_version in api_versions:
        args += ["--api-versions", api_version]
    rendered: dict[str, str] = {}
    for block in _helm(*args, values=values).split("---\n"):
        first, _, rest = block.partition("\n")
        if first.startswith("# Source: "):
            path = first[len("# Source: "):].strip()
            rendered[path] = rendered.get(path, "") + "---\n" + rest
    if notes:
        release = json.loads(_helm("install", name, str(CHART), "--namespace", namespace,
                                   "--dry-run=client", "-o", "json", values=values))
        rendered[f"{CHART.name}/templates/NOTES.txt"] = release["info"].get("notes", "")
    return rendered


def lint(values: dict | None = None, kube_version: str | None = None) -> str:
    """``helm lint --strict`` of the chart with ``values``; its report, or HelmError."""
    args = ["lint", "--strict", str(CHART)]
    if kube_version:
        args += ["--kube-version", kube_version]
    return _helm(*args, values=values)


def objects(rendered: dict[str, str]) -> list[dict]:
    """The Kubernetes objects of a rendering (NOTES.txt and empty documents left out)."""
    out = []
    for path in sorted(rendered):
        if path.endswith("NOTES.txt"):
            continue
        out.extend(doc for doc in yaml.safe_load_all(rendered[path]) if doc)
    return out


def manifest() -> str:
    """The text of deploy/kube-cache-gateway.yaml."""
    docs = objects(render_chart(kube_version=KUBE_VERSION))
    for doc in docs:
        for meta in (doc["metadata"], doc.get("spec", {}).get("template", {}).get("metadata", {})):
            for label in _HELM_LABELS:
                meta.get("labels", {}).pop(label, None)
    header = ("# Generated by deploy/render.py from helm/kube-cache-gateway (default values);\n"
              "# do not edit: change the chart, then run .venv/bin/python deploy/render.py\n")
    return header + "".join("---\n" + yaml.safe_dump(doc, sort_keys=False) for doc in docs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = manifest()
    if args.check:
        if OUT.read_text() != text:
            print(f"{OUT} differs from the chart's rendering: run deploy/render.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
