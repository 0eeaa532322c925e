"""The embedded default: a local API server, a demo workload that keeps changing, the gateway.

``seed_workload`` is also what the kubectl-compatibility tests print: objects
in the states printers must get right (pods Running, Succeeded, Failed,
CrashLoopBackOff, ImagePullBackOff, Terminating; deployments mid-rollout; a
node; a custom resource with printer columns).
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

from control_plane.kubeapi import KubeAPI, widget_crd

__all__ = ["run_demo", "seed_workload"]


def _now(offset_s: int = 0) -> str:
    return (dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=offset_s)).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def _container_status(name: str, image: str, state: dict, ready: bool, restarts: int = 0) -> dict:
    return {"name": name, "image": image, "imageID": "", "ready": ready,
            "restartCount": restarts, "started": ready, "state": state}


def _pod(name: str, labels: dict, image: str = "nginx:1.25", containers: int = 1,
         finalizers: list[str] | None = None) -> dict:
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
        "containers": [{"name": f"c{i}" if i else "main", "image": image} for i in range(containers)],
        "nodeName": "node-a"}}


def seed_workload(kube: KubeAPI, namespace: str = "demo-shop") -> dict[str, Any]:
    """Create the demo objects in ``namespace`` (and one cluster-scoped node and CRD)."""
    kube.ensure_namespace(namespace)
    base = f"/api/v1/namespaces/{namespace}"
    if kube.get("/api/v1/nodes/node-a", ok_missing=True) is None:
        kube.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": "node-a", "labels": {"node-role.kubernetes.io/worker": "",
                                         "kubernetes.io/hostname": "node-a"}}})
        kube.patch("/api/v1/nodes/node-a/status", {"status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status",
                            "lastHeartbeatTime": _now(), "lastTransitionTime": _now(60)}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.10"}],
            "nodeInfo": {"kubeletVersion": "v1.20.2", "osImage": "Debian GNU/Linux 12",
                         "kernelVersion": "6.1.0", "containerRuntimeVersion": "containerd://1.6",
                         "architecture": "amd64", "operatingSystem": "linux", "machineID": "",
                         "systemUUID": "", "bootID": "", "kubeProxyVersion": "v1.20.2"}}})

    running = {"running": {"startedAt": _now(300)}}
    pods: list[tuple[dict, dict]] = [
        (_pod("web-1", {"app": "web", "tier": "front"}), {
            "phase": "Running", "podIP": "10.1.0.11", "podIPs": [{"ip": "10.1.0.11"}],
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [_container_status("main", "nginx:1.25", running, True)]}),
        (_pod("web-2", {"app": "web", "tier": "front"}), {
            "phase": "Running", "podIP": "10.1.0.12", "podIPs": [{"ip": "10.1.0.12"}],
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [_container_status("main", "nginx:1.25", running, True, 2)]}),
        (_pod("api-1", {"app": "api", "tier": "back"}, image="shop/api:2.1", containers=2), {
            "phase": "Running", "podIP": "10.1.0.21", "podIPs": [{"ip": "10.1.0.21"}],
            "containerStatuses": [
                _container_status("main", "shop/api:2.1", {"waiting": {
                    "reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting"}}, False, 7),
                _container_status("c1", "shop/api:2.1", running, True)]}),
        (_pod("api-2", {"app": "api", "tier": "back"}, image="shop/api:9.9-typo"), {
            "phase": "Pending", "containerStatuses": [_container_status(
                "main", "shop/api:9.9-typo", {"waiting": {"reason": "ImagePullBackOff"}}, False)]}),
        (_pod("migrate-7x2k", {"app": "migrate", "job-name": "migrate"}, image="shop/migrate:1"), {
            "phase": "Succeeded", "containerStatuses": [_container_status(
                "main", "shop/migrate:1", {"terminated": {"exitCode": 0, "reason": "Completed",
                                                          "startedAt": _now(600),
                                                          "finishedAt": _now(540)}}, False)]}),
        (_pod("report-1", {"app": "report"}, image="shop/report:1"), {
            "phase": "Failed", "containerStatuses": [_container_status(
                "main", "shop/report:1", {"terminated": {"exitCode": 2, "reason": "Error",
                                                         "startedAt": _now(900),
                                                         "finishedAt": _now(880)}}, False)]}),
        (_pod("old-web", {"app": "web", "tier": "front"}, finalizers=["example.com/hold"]), {
            "phase": "Running", "podIP": "10.1.0.9", "podIPs": [{"ip": "10.1.0.9"}],
            "containerStatuses": [_container_status("main", "nginx:1.24", running, True)]}),
    ]
    for body, status in pods:
        name = body["metadata"]["name"]
        if kube.get(f"{base}/pods/{name}", ok_missing=True) is None:
            kube.create(f"{base}/pods", body)
            kube.patch(f"{base}/pods/{name}/status", {"status": status})
    old = kube.get(f"{base}/pods/old-web")
    if not old["metadata"].get("deletionTimestamp"):
        kube.delete(f"{base}/pods/old-web")  # held by its finalizer: Terminating

    apps = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    for name, replicas, status in (
            ("web", 3, {"replicas": 3, "updatedReplicas": 3, "readyReplicas": 3,
                        "availableReplicas": 3, "observedGeneration": 1}),
            ("api", 2, {"replicas": 3, "updatedReplicas": 1, "readyReplicas": 1,
                        "availableReplicas": 1, "unavailableReplicas": 2, "observedGeneration": 1})):
        if kube.get(f"{apps}/{name}", ok_missing=True) is None:
            kube.create(apps, {"apiVersion": "apps/v1", "kind": "Deployment",
                               "metadata": {"name": name, "labels": {"app": name}},
                               "spec": {"replicas": replicas,
                                        "selector": {"matchLabels": {"app": name}},
                                        "template": {"metadata": {"labels": {"app": name}},
                                                     "spec": {"containers": [
                                                         {"name": "main", "image": f"shop/{name}:2.1"},
                                                         {"name": "proxy", "image": "mesh/proxy:1"}]}}}})
            kube.patch(f"{apps}/{name}/status", {"status": status})

    for name, data in (("settings", {"mode": "production", "replicas": "3"}),
                       ("ticker", {"tick": "0"}), ("feature-flags", {"checkout-v2": "on"})):
        if kube.get(f"{base}/configmaps/{name}", ok_missing=True) is None:
            kube.create(f"{base}/configmaps", {"metadata": {"name": name, "labels": {"demo": "yes"}},
                                               "data": data})

    kube.create_crd(widget_crd())
    widgets = f"/apis/example.com/v1/namespaces/{namespace}/widgets"
    for name, size, color in (("gizmo", "S", "red"), ("sprocket", "L", "blue"), ("doohickey", None, "green")):
        if kube.get(f"{widgets}/{name}", ok_missing=True) is None:
            spec: dict[str, Any] = {"color": color}
            if size:
                spec["size"] = size
            kube.create(widgets, {"apiVersion": "example.com/v1", "kind": "Widget",
                                  "metadata": {"name": name, "labels": {"demo": "yes"}}, "spec": spec})
    return {"namespace": namespace}


class Ticker:
    """Keeps a few demo objects changing, so streams show life."""

    def __init__(self, kube: KubeAPI, namespace: str, interval: float = 2.0) -> None:
        self._kube, self._ns, self._interval = kube, namespace, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-ticker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        tick = 0
        sizes = ("S", "M", "L", "XL")
        while not self._stop.wait(self._interval):
            tick += 1
            try:
                self._kube.patch(f"/api/v1/namespaces/{self._ns}/configmaps/ticker",
                                 {"data": {"tick": str(tick)}})
                self._kube.patch(f"/apis/example.com/v1/namespaces/{self._ns}/widgets/gizmo",
                                 {"spec": {"size": sizes[tick % len(sizes)]}})
            except Exception:  # noqa: BLE001 - the API server may be stopping
                pass


def run_demo(settings: Any) -> int:
    """Start everything, print how to use it, serve until Ctrl-C, stop everything."""
    from app.launch.launch import serve
    from control_plane.cluster import LocalCluster

    print("Starting a local kube-apiserver + etcd (the first run builds kube-apiserver from "
          "Debian's source: a few minutes)...", flush=True)
    started = time.monotonic()
    cluster = LocalCluster().start()
    ticker = None
    try:
        kube = KubeAPI.for_cluster(cluster)
        namespace = "demo-shop"
        seed_workload(kube, namespace)
        ticker = Ticker(kube, namespace)
        ticker.start()
        url = f"http://{settings.host}:{settings.port}"
        prewarm = settings.prewarm or ("pods", "configmaps", "deployments.apps", "events",
                                       "widgets.example.com")
        from dataclasses import replace

        # the history kept beside the cluster's own files (gone with them, as the cluster is)
        history = settings.history or f"sqlite:///{cluster.workdir}/history.db"
        settings = replace(settings, prewarm=tuple(prewarm), kubeconfig=str(cluster.kubeconfig),
                           history=history)

        def ready() -> None:
            print(f"""
kube-cache-gateway demo is up ({time.monotonic() - started:.0f} s): {url}
  local API server: {cluster.primary.url} (kubeconfig {cluster.kubeconfig})

Open the live page: {url}/ui/?resource=core/v1/pods&namespace={namespace}

Try:
  curl -s {url}/core/v1/namespaces/{namespace}/pods | python3 -m json.tool | head -30
  curl -s '{url}/core/v1/pods?labelSelector=app%3Dweb'
  curl -s '{url}/apps/v1/deployments?fieldSelector=metadata.name%3Dapi'
  curl -s '{url}/core/v1/pods?sortBy=-metadata.creationTimestamp&fields=status.phase&limit=3'
  curl -s '{url}/core/v1/pods?summary=status.phase,metadata.namespace'
  curl -N -H 'Accept: text/event-stream' {url}/core/v1/namespaces/{namespace}/configmaps
  curl -N '{url}/api/v1/namespaces/{namespace}/configmaps?watch=true'
  kubectl --server {url} get pods -n {namespace} -o wide
  kubectl --server {url} get widgets -A
  kubectl --server {url} get configmaps -n {namespace} -w
  curl -s {url}/metrics | grep kcg_cache_objects

What changed before it broke (the history, kept in {history}):
  curl -s '{url}/history/core/v1/namespaces/{namespace}/configmaps/ticker?limit=3&fields=patch'
  curl -s '{url}/history/example.com/v1/namespaces/{namespace}/widgets/gizmo?limit=3'

Press Ctrl-C to stop everything this command started.""", flush=True)

        return serve(settings, on_ready=ready)
    finally:
        if ticker is not None:
            ticker.stop()
        cluster.stop()
        print("Stopped the gateway, the demo workload and the local API server.", flush=True)
