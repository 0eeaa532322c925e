"""deploy/: the chart's defaults rendered for kustomize, never drifting from the chart, valid
for Kubernetes' schemas, and accepted by the real API server."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest
import yaml

from tests.deploy.conftest import ROOT, kubectl, render
from tests.deploy.test_chart import SCHEMA_VERSIONS


def kustomized() -> list[dict]:
    return [d for d in yaml.safe_load_all(kubectl("kustomize", str(ROOT / "deploy"))) if d]


def test_the_manifest_is_what_the_chart_renders_today():
    assert (ROOT / "deploy" / "kube-cache-gateway.yaml").read_text() == render.manifest(), (
        "deploy/kube-cache-gateway.yaml is stale: run .venv/bin/python deploy/render.py")


def test_kustomize_gives_the_namespace_and_the_charts_objects_in_it():
    docs = kustomized()
    assert docs[0]["kind"] == "Namespace" and docs[0]["metadata"]["name"] == "kube-cache-gateway"
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(["Namespace", "ServiceAccount", "ClusterRole", "ClusterRole",
                            "ClusterRole", "ClusterRole", "ClusterRoleBinding",
                            "ClusterRoleBinding", "ClusterRoleBinding", "ClusterRoleBinding",
                            "RoleBinding", "Deployment", "Service",
                            "PodDisruptionBudget", "NetworkPolicy"])
    (reader,) = [d for d in docs if d["kind"] == "RoleBinding"]
    assert reader["metadata"]["namespace"] == "kube-system"  # where the client CAs are
    assert reader["subjects"][0]["namespace"] == "kube-cache-gateway"
    for doc in docs:
        labels = doc["metadata"].get("labels", {})
        assert "helm.sh/chart" not in labels and labels.get("app.kubernetes.io/managed-by") is None
        if doc["kind"] in ("ServiceAccount", "Deployment", "Service", "PodDisruptionBudget",
                           "NetworkPolicy"):
            assert doc["metadata"]["namespace"] == "kube-cache-gateway"
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "ghcr.io/kube-cache-gateway/kube-cache-gateway:0.1.0"


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_kustomize_output_is_valid_for_kubernetes(version):
    for doc in kustomized():
        kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.cluster
def test_kustomize_output_is_accepted_by_the_api_server(local_cluster):
    from control_plane.kubeapi import KubeAPI

    # a dry run creates nothing, so the objects in the new namespace need it to exist already
    KubeAPI.for_cluster(local_cluster).ensure_namespace("kube-cache-gateway")
    docs = kustomized()
    served = kubectl(f"--kubeconfig={local_cluster.kubeconfig}", "api-versions").split()
    for doc in docs:
        # the manifest is for Kubernetes >= 1.21 (policy/v1); the project's test API server is
        # 1.20, so there, and only there, the PodDisruptionBudget goes in as policy/v1beta1
        if doc["apiVersion"] not in served and doc["kind"] == "PodDisruptionBudget":
            doc["apiVersion"] = "policy/v1beta1"
    text = "".join("---\n" + json.dumps(d) + "\n" for d in docs)
    out = kubectl(f"--kubeconfig={local_cluster.kubeconfig}", "apply", "--dry-run=server",
                  "-f", "-", input_text=text)
    assert out.count("(server dry run)") == len(docs), out
