"""What the tests against a real API server that run a gateway as a ServiceAccount share:
ClusterRoles made for a test, and removed by their prefix; a gateway run as an account."""

from __future__ import annotations

from control_plane.cluster import User
from control_plane.kubeapi import KubeAPI
from tests.app.conftest import run_gateway

RBAC = "/apis/rbac.authorization.k8s.io/v1"


def cluster_role(kube: KubeAPI, name: str, rules: list[dict]) -> None:
    """The ClusterRole ``name`` with ``rules`` (made again if a run before left it)."""
    kube.delete(f"{RBAC}/clusterroles/{name}")
    kube.create(f"{RBAC}/clusterroles", {"apiVersion": "rbac.authorization.k8s.io/v1",
                                         "kind": "ClusterRole", "metadata": {"name": name},
                                         "rules": rules})


def remove_prefixed(kube: KubeAPI, prefix: str, namespace: str) -> None:
    """Remove the ClusterRoles and ClusterRoleBindings named ``prefix``…, and ``namespace``."""
    for kind in ("clusterrolebindings", "clusterroles"):
        for item in kube.get(f"{RBAC}/{kind}")["items"]:
            if item["metadata"]["name"].startswith(prefix):
                kube.delete(f"{RBAC}/{kind}/{item['metadata']['name']}")
    kube.delete(f"/api/v1/namespaces/{namespace}")


def running_as(local_cluster, kube: KubeAPI, namespace: str, account: str, **settings):
    """A gateway authorizing its callers, run as the ServiceAccount ``namespace/account``."""
    user = User(f"system:serviceaccount:{namespace}:{account}",
                kube.service_account_token(namespace, account))
    return run_gateway(local_cluster, user=user, authz="kubernetes", **settings)
