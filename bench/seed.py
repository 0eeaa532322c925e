"""Realistic workload for benchmarks: Pods with two containers, env, resources, labels.

Labels: ``app`` (100 values), ``tier`` (3), ``track`` (stable/canary); spread over
100 namespaces. As the API server returns them (with its defaults and
managedFields) each Pod is about 3-4 KB of JSON.
"""

from __future__ import annotations

import time

from control_plane.kubeapi import KubeAPI

TIERS = ("web", "api", "db")


def pod(i: int, namespaces: int = 100) -> dict:
    env = [{"name": f"SETTING_{k}", "value": f"value-{i}-{k}"} for k in range(6)]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"pod-{i:05d}", "namespace": f"bench-{i % namespaces:03d}",
            "labels": {"app": f"app-{i % 100}", "tier": TIERS[i % 3],
                       "track": "canary" if i % 10 == 0 else "stable"},
            "annotations": {"team": "payments", "commit": f"{i * 2654435761 % 2**32:08x}"},
        },
        "spec": {
            "containers": [
                {"name": "main", "image": "registry.example.com/shop/app:1.24.3",
                 "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                 "env": env,
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                               "limits": {"cpu": "500m", "memory": "256Mi"}},
                 "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080},
                                    "periodSeconds": 10}},
                {"name": "proxy", "image": "registry.example.com/mesh/proxy:2.0.1",
                 "args": ["--port=15001", "--log-level=info", "--upstream=127.0.0.1:8080"],
                 "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                               "limits": {"cpu": "200m", "memory": "128Mi"}}},
            ],
        },
    }


def configmap(i: int, namespaces: int = 100) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"config-{i:04d}", "namespace": f"bench-{i % namespaces:03d}",
                         "labels": {"app": f"app-{i % 100}"}},
            "data": {"settings.yaml": f"replicas: {i % 5}\nfeature: on\n"}}


def seed(kube: KubeAPI, pods: int = 10_000, configmaps: int = 1_000, namespaces: int = 100,
         workers: int = 8, log=print) -> dict:
    """Create the namespaces, Pods and ConfigMaps; return counts and seconds."""
    started = time.monotonic()
    for n in range(namespaces):
        kube.ensure_namespace(f"bench-{n:03d}")
    by_ns: dict[str, list[dict]] = {}
    for i in range(pods):
        p = pod(i, namespaces)
        by_ns.setdefault(p["metadata"]["namespace"], []).append(p)
    from concurrent.futures import ThreadPoolExecutor

    def create(body: dict) -> None:
        ns = body["metadata"]["namespace"]
        kind = "pods" if body["kind"] == "Pod" else "configmaps"
        kube.create(f"/api/v1/namespaces/{ns}/{kind}", body)

    bodies = [pod(i, namespaces) for i in range(pods)] + \
             [configmap(i, namespaces) for i in range(configmaps)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for done, _ in enumerate(pool.map(create, bodies), 1):
            if done % 2000 == 0:
                log(f"  seeded {done}/{len(bodies)} objects ({time.monotonic() - started:.0f} s)")
    return {"pods": pods, "configmaps": configmaps, "seconds": time.monotonic() - started}
