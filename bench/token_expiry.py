"""A ServiceAccount token that really expires: the chart on a node, followed past its first token.

In a pod the gateway's credentials are the kubelet's projected token: it expires, and the
kubelet writes a new one into the volume at 80 % of its life. The suite shows the file is read
again when it changes (``tests/deploy/test_chart_on_node.py`` swaps it by hand); this run shows
the real thing, which takes longer than a suite test may: the chart installed on a
``LocalNode`` with the shortest token the API issues (600 s, a projected volume of its own
instead of the automounted one), followed until the API server refuses the pod's first
token, then:

- a resource never listed before is listed through the Service (a new informer, started with
  whatever token the gateway holds now);
- a change made after the expiry reaches a caller following the collection as Server-Sent
  Events since the start, and a list;
- every caller's request is reviewed by the API server with the gateway's own token
  (``--authz kubernetes``, the chart's default), so each answer above also shows it valid;
- the pod never restarted, and its log says how often the API server refused it;
- it goes on for 10.5 minutes after: every watch the gateway held at the expiry reaches its
  server-side timeout (at most 10 minutes) and is made again, with the token of that
  moment, and changes keep coming through (its ``kcg_informer_watch_errors`` stay 0).

The API server's ``--service-account-max-token-expiration`` cannot be below one hour (it
refuses to start), so the short life is asked for by the volume, as an operator would.
Every 20 s one change is written and awaited through the stream and a list; each sample
records the token the pod holds and whether the API server still takes the first one.

``make soak-token`` (needs root, about 24 minutes) writes ``docs/token-expiry.json``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from control_plane.client_tools import helm as helm_binary
from control_plane.client_tools import kubectl as kubectl_binary
from control_plane.image import archive, build, image_name
from control_plane.kubeapi import KubeAPI
from control_plane.node import LocalNode

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "helm" / "kube-cache-gateway"
RELEASE, NAMESPACE, DATA = "expiring", "token-expiry", "token-expiry-data"
TOKEN_SECONDS = 600  # the shortest life a TokenRequest may ask (the API's minimum)
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
FRESH = "limitranges"  # listed first after the expiry: never listed before it

# the automounted volume replaced by one asking a 600-second token, with the CA and namespace
# files the in-cluster configuration reads beside it
_SHORT_TOKEN = [
    {"op": "replace", "path": "/spec/template/spec/automountServiceAccountToken", "value": False},
    {"op": "add", "path": "/spec/template/spec/volumes/-", "value": {
        "name": "short-token", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_SECONDS}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt",
                                                                  "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                "fieldPath": "metadata.namespace"}}]}}]}}},
    {"op": "add", "path": "/spec/template/spec/containers/0/volumeMounts/-",
     "value": {"name": "short-token", "mountPath": TOKEN_DIR, "readOnly": True}},
]


def _say(msg: str) -> None:
    print(f"[token-expiry] {time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def claims(token: str) -> dict[str, Any]:
    """The JWT's claims (its middle part), unverified: when it was issued and expires."""
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def _total(metrics: str, name: str) -> float:
    """The sum of a metric's samples in a Prometheus text exposition."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
               if line.startswith(name) and not line.startswith(name + "_created"))


def fingerprint(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:12]


class Follower(threading.Thread):
    """A caller following ``url`` as Server-Sent Events from the start, reconnecting with
    ``Last-Event-ID`` whenever a connection ends; keeps when each change arrived."""

    def __init__(self, url: str, token: str) -> None:
        super().__init__(daemon=True)
        self.url, self.token = url, token
        self.arrived: dict[tuple[str, str], float] = {}  # (name, resourceVersion) -> when
        self.connections = 0
        self.failures: list[str] = []
        self.stopping = threading.Event()
        self._last_id: str | None = None

    def run(self) -> None:
        while not self.stopping.is_set():
            headers = {"Accept": "text/event-stream", "Authorization": f"Bearer {self.token}"}
            if self._last_id:
                headers["Last-Event-ID"] = self._last_id
            try:
                with httpx.stream("GET", self.url, headers=headers,
                                  timeout=httpx.Timeout(10, read=60)) as response:
                    if response.status_code != 200:
                        self.failures.append(f"{response.status_code} {response.read()[:200]!r}")
                        time.sleep(1)
                        continue
                    self.connections += 1
                    event: dict[str, str] = {}
                    for line in response.iter_lines():
                        if self.stopping.is_set():
                            return
                        if line == "":
                            self._apply(event)
                            event = {}
                        elif not line.startswith(":"):
                            name, _, value = line.partition(": ")
                            event[name] = value
            except httpx.HTTPError as exc:
                if not self.stopping.is_set():
                    self.failures.append(f"{type(exc).__name__}: {exc}"[:200])
                    time.sleep(1)

    def _apply(self, event: dict[str, str]) -> None:
        if "id" in event:
            self._last_id = event["id"]
        if event.get("event") in ("ADDED", "MODIFIED"):
            meta = json.loads(event["data"])["metadata"]
            self.arrived.setdefault((meta["name"], meta["resourceVersion"]), time.monotonic())


class Run:
    """The node, the release and the API's view of both."""

    def __init__(self, node: LocalNode) -> None:
        self.node = node
        assert node.cluster is not None
        self.kube = KubeAPI.for_cluster(node.cluster)
        self.admin = node.cluster.admin.token
        self.url = ""

    def tool(self, binary: Path, *args: str, timeout: float = 240) -> str:
        done = subprocess.run([str(binary), "--kubeconfig", str(self.node.kubeconfig), *args],
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{binary.name} {' '.join(args[:3])}: {done.stderr[-2000:]}")
        return done.stdout

    def install(self) -> None:
        self.tool(helm_binary(), "install", RELEASE, str(CHART), "--namespace", NAMESPACE,
                  "--create-namespace", "--wait", "--timeout", "180s", "--set", "replicas=1",
                  "--set", "podDisruptionBudget.enabled=false", "--set", "prewarm={configmaps}")
        deployment = f"{RELEASE}-kube-cache-gateway"
        self.tool(kubectl_binary("1.35"), "patch", "deployment", deployment, "-n", NAMESPACE,
                  "--type=json", "-p", json.dumps(_SHORT_TOKEN))
        self.tool(kubectl_binary("1.35"), "rollout", "status", f"deployment/{deployment}", "-n",
                  NAMESPACE, "--timeout=180s")
        service = self.kube.get(f"/api/v1/namespaces/{NAMESPACE}/services/{deployment}")
        self.url = f"http://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}"

    def pod(self) -> dict:
        pods = self.kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector="
                             f"app.kubernetes.io/instance={RELEASE}")["items"]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        assert len(live) == 1, [p["metadata"]["name"] for p in pods]
        return live[0]

    def token_of(self, pod: dict) -> str:
        """The token in the pod's volume, read where the kubelet writes it on the host."""
        assert self.node.workdir is not None
        volume = (self.node.workdir / "kubelet" / "pods" / pod["metadata"]["uid"] / "volumes"
                  / "kubernetes.io~projected" / "short-token")
        return (volume / "token").read_text()

    def accepted(self, token: str) -> bool:
        """Whether the API server still takes ``token`` (a review of it, as a caller's)."""
        review = self.kube.create("/apis/authentication.k8s.io/v1/tokenreviews",
                                  {"apiVersion": "authentication.k8s.io/v1",
                                   "kind": "TokenReview", "spec": {"token": token}})
        return bool(review["status"].get("authenticated"))

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url + path, timeout=30,
                         headers={"Authorization": f"Bearer {self.admin}"})


def run(minutes_after_expiry: float, limit_minutes: float) -> dict[str, Any]:
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as work, LocalNode() as node:
        _say(f"node Ready in {node.start_seconds:.0f} s; building the image")
        build()
        node.import_image(archive(Path(work) / "gateway.tar", image_name()))
        driver = Run(node)
        driver.kube.ensure_namespace(DATA)
        collection = f"/api/v1/namespaces/{DATA}/configmaps"
        driver.kube.create(collection, {"metadata": {"name": "marker"}, "data": {"n": "0"}})
        step = time.monotonic()
        driver.install()
        installed_s = time.monotonic() - step
        pod = driver.pod()
        first = driver.token_of(pod)
        issued = claims(first)
        life = issued["exp"] - issued["iat"]
        expires_in = issued["exp"] - time.time()
        _say(f"installed in {installed_s:.0f} s; the first token lives {life} s, expires in "
             f"{expires_in:.0f} s")
        follower = Follower(driver.url + collection, driver.admin)
        follower.start()
        samples: list[dict[str, Any]] = []
        refused_at: float | None = None
        deadline = time.monotonic() + limit_minutes * 60
        n = 0
        while time.monotonic() < deadline:
            n += 1
            wrote = time.monotonic()  # the event may come before the write's own answer
            written = driver.kube.put(f"{collection}/marker", {
                "metadata": {"name": "marker"}, "data": {"n": str(n)}})
            key = ("marker", written["metadata"]["resourceVersion"])
            listed = None
            while time.monotonic() < wrote + 30:
                answer = driver.get(collection)
                if answer.status_code == 200 and any(
                        i["metadata"]["resourceVersion"] == key[1]
                        for i in answer.json()["items"]):
                    listed = time.monotonic() - wrote
                    break
                time.sleep(0.1)
            while key not in follower.arrived and time.monotonic() < wrote + 30:
                time.sleep(0.05)
            streamed = follower.arrived.get(key)
            held = driver.token_of(pod)
            first_taken = driver.accepted(first)
            sample = {"t": round(time.monotonic() - started, 1),
                      "token": fingerprint(held), "token_expires_in_s":
                          round(claims(held)["exp"] - time.time()),
                      "first_token_accepted": first_taken,
                      "change_listed_ms": None if listed is None else round(listed * 1000),
                      "change_streamed_ms": None if streamed is None
                      else round((streamed - wrote) * 1000)}
            samples.append(sample)
            _say(json.dumps(sample))
            if not first_taken and refused_at is None:
                refused_at = time.monotonic()
            if refused_at is not None and time.monotonic() > refused_at + \
                    minutes_after_expiry * 60:
                break
            time.sleep(max(0.0, wrote + 20 - time.monotonic()))
        after: dict[str, Any] = {}
        if refused_at is not None:
            fresh = driver.get(f"/api/v1/{FRESH}")
            after["fresh_list_status"] = fresh.status_code
            after["fresh_list_said"] = fresh.text[:300] if fresh.status_code != 200 else ""
        follower.stopping.set()
        metrics = driver.get("/metrics").text
        after["watch_errors"] = _total(metrics, "kcg_informer_watch_errors")
        after["relists"] = _total(metrics, "kcg_informer_relists")
        pod_now = driver.pod()
        log = driver.tool(kubectl_binary("1.35"), "logs", "-n", NAMESPACE,
                          pod_now["metadata"]["name"])
        refusals = [line for line in log.splitlines() if "401" in line or
                    "Unauthorized" in line]
        expired = [s for s in samples if not s["first_token_accepted"]]
        outcome = {
            "token_life_s": life,
            "first_token_refused_after_s": None if refused_at is None
            else round(refused_at - step, 1),
            "tokens_seen": sorted({s["token"] for s in samples}),
            "samples": len(samples), "samples_after_expiry": len(expired),
            "changes_listed_after_expiry": sum(s["change_listed_ms"] is not None
                                               for s in expired),
            "changes_streamed_after_expiry": sum(s["change_streamed_ms"] is not None
                                                 for s in expired),
            "stream_reconnects": follower.connections - 1,
            "stream_failures": follower.failures,
            "restarts": pod_now["status"]["containerStatuses"][0]["restartCount"],
            "same_pod": pod_now["metadata"]["uid"] == pod["metadata"]["uid"],
            "gateway_log_refusals": refusals[:10], "gateway_log_refusal_count": len(refusals),
            "node_start_s": round(node.start_seconds, 1), "install_s": round(installed_s, 1),
            "minutes": round((time.monotonic() - started) / 60, 1),
            **after, "rows": samples}
        outcome["passed"] = bool(
            refused_at is not None and expired and len(outcome["tokens_seen"]) >= 2
            and after.get("fresh_list_status") == 200
            and outcome["changes_listed_after_expiry"] == len(expired)
            and outcome["changes_streamed_after_expiry"] == len(expired)
            and outcome["restarts"] == 0 and outcome["same_pod"]
            and after.get("watch_errors") == 0)
        return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.token_expiry",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--after", type=float, default=10.5,
                        help="minutes to go on once the first token is refused (10.5: every "
                             "watch open then has reached its timeout and been made again)")
    parser.add_argument("--limit", type=float, default=30.0, help="minutes at most")
    parser.add_argument("--json", type=Path, default=Path("docs/token-expiry.json"))
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("error: a node needs root (docs/local-node.md)", file=sys.stderr)
        return 2
    outcome = run(args.after, args.limit)
    outcome["command"] = "make soak-token  # python -m bench.token_expiry " + \
        " ".join(argv if argv is not None else sys.argv[1:])
    args.json.write_text(json.dumps(outcome, indent=2) + "\n")
    print(json.dumps({k: v for k, v in outcome.items() if k != "rows"}, indent=2))
    return 0 if outcome["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
