"""Fixtures for the shipped artefacts: the chart, the kustomize manifests, the image recipe."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "kube-cache-gateway"
VARIANTS = sorted(p.name for p in (CHART / "ci").glob("*.yaml"))


def _load_render():
    spec = importlib.util.spec_from_file_location("deploy_render", ROOT / "deploy" / "render.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


render = _load_render()


def crd(group: str, kind: str, plural: str) -> dict:
    """A schemaless CRD standing in for an operator's (the API server checks the object's kind
    and metadata; the operator's own validation is its business)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": plural, "singular": kind.lower(), "kind": kind,
                           "listKind": f"{kind}List"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}]}}


OPERATOR_CRDS = (crd("monitoring.coreos.com", "ServiceMonitor", "servicemonitors"),
                  crd("monitoring.coreos.com", "PrometheusRule", "prometheusrules"),
                  crd("cert-manager.io", "Certificate", "certificates"))
OPERATOR_APIS = ("monitoring.coreos.com/v1", "cert-manager.io/v1")


def variant_values(name: str) -> dict:
    """The values of ``helm/kube-cache-gateway/ci/<name>``."""
    return yaml.safe_load((CHART / "ci" / name).read_text()) or {}


def objects_of(values: dict | None = None, **options) -> list[dict]:
    """The chart's objects for ``values`` (see ``deploy/render.py``)."""
    return render.objects(render.render_chart(values, **options))


def by_kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


def kubectl(*args: str, input_text: str | None = None, timeout: float = 120) -> str:
    """Run kubectl (the current one, 1.35); fail the test with its stderr on a non-zero exit."""
    from control_plane.client_tools import kubectl as current

    done = subprocess.run([str(current("1.35")), *args], input=input_text, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"kubectl {' '.join(args)}:\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="session")
def server_version(local_cluster) -> str:
    """The test API server's version, as Helm's --kube-version wants it (v1.20.2)."""
    from control_plane.kubeapi import KubeAPI

    return KubeAPI.for_cluster(local_cluster).get("/version")["gitVersion"].split("-")[0]


@pytest.fixture(scope="session")
def built_image() -> str:
    """The image built from the Dockerfile, once per run (``make image``); its name."""
    import json

    from control_plane.image import build, image_name

    times = build()
    print(f"image built: {json.dumps(times)}")
    return image_name()
