"""A small raw REST client for tests, the demo and benchmarks: JSON in, JSON out.

``RestVerbs`` holds the verbs over one ``request`` method, so the in-memory
``FakeCluster`` answers the very same calls.

The generated ``kubernetes`` models are slow and awkward for bulk seeding and
for custom resources; this speaks plain JSON with a bearer token over a pooled,
verified TLS connection, and is safe to share between threads.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import urllib3

from informer_core.listwatch import status_error

__all__ = ["KubeAPI", "RestVerbs", "widget_crd"]

_CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


class RestVerbs:
    """The verbs tests and the demo use, over one ``request`` method (real or in memory)."""

    def request(self, method: str, path: str, body: Any = None,
                content_type: str = "application/json", ok_missing: bool = False) -> Any:
        """Send a request; return the parsed answer.

        Raises:
            APIStatusError: an error answer (``NotFoundError`` unless ``ok_missing``).
        """
        raise NotImplementedError

    def get(self, path: str, **kw: Any) -> Any:
        return self.request("GET", path, **kw)

    def create(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)

    def patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, body, content_type="application/merge-patch+json")

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body)

    def delete(self, path: str, ok_missing: bool = True, body: Any = None) -> Any:
        return self.request("DELETE", path, body, ok_missing=ok_missing)

    def create_many(self, path: str, bodies: list[Any], workers: int = 8) -> list[Any]:
        """Create objects concurrently (seeding); return the created objects in order."""
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda b: self.create(path, b), bodies))

    def service_account_token(self, namespace: str, name: str, seconds: int = 3600,
                              audiences: tuple[str, ...] = (), bound_to: dict | None = None) -> str:
        """A token for a ServiceAccount from the TokenRequest API (creating the account if
        needed); ``bound_to``: the object (a Pod, a Secret) it is bound to, whose deletion
        invalidates it."""
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts"
        if self.get(f"{path}/{name}", ok_missing=True) is None:
            self.create(path, {"apiVersion": "v1", "kind": "ServiceAccount",
                               "metadata": {"name": name, "namespace": namespace}})
        spec: dict[str, Any] = {"expirationSeconds": seconds}
        if audiences:
            spec["audiences"] = list(audiences)
        if bound_to is not None:
            spec["boundObjectRef"] = {"apiVersion": bound_to.get("apiVersion", "v1"),
                                      "kind": bound_to["kind"],
                                      "name": bound_to["metadata"]["name"],
                                      "uid": bound_to["metadata"]["uid"]}
        answer = self.create(f"{path}/{name}/token", {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
        return answer["status"]["token"]

    def ensure_namespace(self, name: str) -> None:
        if self.get(f"/api/v1/namespaces/{name}", ok_missing=True) is None:
            self.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": name}})

    def create_crd(self, crd: dict, timeout: float = 30.0) -> dict:
        """Create a CRD (or keep an existing one) and wait until it is established and served."""
        name = crd["metadata"]["name"]
        if self.get(f"{_CRD_PATH}/{name}", ok_missing=True) is None:
            self.create(_CRD_PATH, crd)
        group = crd["spec"]["group"]
        version = next(v["name"] for v in crd["spec"]["versions"] if v.get("served", True))
        plural = crd["spec"]["names"]["plural"]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.get(f"{_CRD_PATH}/{name}", ok_missing=True) or {}
            established = any(c.get("type") == "Established" and c.get("status") == "True"
                              for c in (got.get("status") or {}).get("conditions") or [])
            if established:
                served = self.get(f"/apis/{group}/{version}", ok_missing=True) or {}
                if any(r.get("name") == plural for r in served.get("resources") or []):
                    return got
            time.sleep(0.1)
        raise TimeoutError(f"CRD {name} not established within {timeout} s")

    def delete_crd(self, name: str, timeout: float = 60.0) -> None:
        """Delete a CRD and wait until it is gone."""
        self.delete(f"{_CRD_PATH}/{name}")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.get(f"{_CRD_PATH}/{name}", ok_missing=True) is None:
                return
            time.sleep(0.1)
        raise TimeoutError(f"CRD {name} still present after {timeout} s")


class KubeAPI(RestVerbs):
    """Issue requests to one API server as one user."""

    def __init__(self, url: str, token: str, ca_file: str | None = None) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._http = urllib3.PoolManager(
            maxsize=16, cert_reqs="CERT_REQUIRED" if ca_file else "CERT_NONE",
            ca_certs=ca_file, assert_hostname=False if ca_file else None,
            timeout=urllib3.Timeout(connect=10, read=120), retries=False)

    @classmethod
    def for_cluster(cls, cluster: Any, user: Any = None, server: Any = None) -> KubeAPI:
        """Return a client for a ``LocalCluster`` (admin on its primary apiserver by default)."""
        server = server or cluster.primary
        return cls(server.url, (user or cluster.admin).token, str(server.ca_file))

    def text(self, path: str) -> str:
        """GET a path that answers text, not JSON (``/metrics``)."""
        response = self._http.request("GET", self.url + path, headers=dict(self._headers))
        if response.status >= 400:
            raise status_error(response.status, None, f"GET {path}: HTTP {response.status}")
        return response.data.decode()

    def request(self, method: str, path: str, body: Any = None,
                content_type: str = "application/json", ok_missing: bool = False) -> Any:
        headers = dict(self._headers)
        data = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = content_type
        response = self._http.request(method, self.url + path, body=data, headers=headers)
        try:
            parsed = orjson.loads(response.data) if response.data else None
        except orjson.JSONDecodeError:  # e.g. "404 page not found" for an unknown group
            parsed = {"message": response.data[:200].decode(errors="replace")}
        if response.status >= 400:
            if ok_missing and response.status == 404:
                return None
            raise status_error(response.status, parsed, f"{method} {path}: HTTP {response.status}")
        return parsed


def widget_crd(group: str = "example.com", plural: str = "widgets", kind: str = "Widget") -> dict:
    """A namespaced CRD with printer columns, for tests and the demo."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind,
                      "shortNames": [kind.lower()[:2]]},
            "versions": [{
                "name": "v1", "served": True, "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object",
                                               "x-kubernetes-preserve-unknown-fields": True}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "string", "jsonPath": ".spec.size"},
                    {"name": "Color", "type": "string", "jsonPath": ".spec.color",
                     "priority": 1},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
            }],
        },
    }
