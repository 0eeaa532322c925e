"""``/ui/`` in a real Chromium, driven over the DevTools protocol, against the real API server:
the page lists what the gateway holds, follows creations, changes and deletions live, counts
phases in its badges, and resumes after its stream is cut with what changed meanwhile."""

from __future__ import annotations

import base64
import contextlib
import itertools
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import orjson
import pytest
from websockets.sync.client import connect

from app.bridge import call_on_loop
from control_plane.cluster import free_port
from tests.app.conftest import run_gateway
from tests.app.streams.test_sse_browser import chromium

pytestmark = pytest.mark.cluster

_DOCS = Path(__file__).resolve().parents[3] / "docs"


class Page:
    """One Chromium tab, spoken to over the DevTools protocol."""

    def __init__(self, url: str) -> None:
        self.profile = tempfile.mkdtemp(prefix="kcg-ui-")
        port = free_port()
        self.proc = subprocess.Popen(
            [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--hide-scrollbars", "--window-size=1280,720", f"--remote-debugging-port={port}",
             f"--user-data-dir={self.profile}", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        target = None
        while target is None:
            try:
                pages = httpx.get(f"http://127.0.0.1:{port}/json", timeout=2).json()
                target = next((p for p in pages if p.get("type") == "page"), None)
            except httpx.HTTPError:
                pass
            if target is None:
                assert time.monotonic() < deadline, "Chromium did not open the page"
                time.sleep(0.2)
        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(connect(target["webSocketDebuggerUrl"], max_size=None))
        self._ids = itertools.count(1)

    def call(self, method: str, **params):
        number = next(self._ids)
        self.ws.send(orjson.dumps({"id": number, "method": method, "params": params}).decode())
        while True:
            message = orjson.loads(self.ws.recv(timeout=30))
            if message.get("id") == number:
                assert "error" not in message, message
                return message["result"]

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def rows(self) -> dict[str, list[str]]:
        return {r[0]: r[1:] for r in self.evaluate(
            "[...document.querySelectorAll('#rows tbody tr')]"
            ".map(tr => [tr.dataset.key, ...[...tr.cells].map(td => td.textContent)])")}

    def badges(self) -> dict[str, int]:
        return {b[0]: int(b[1]) for b in self.evaluate(
            "[...document.querySelectorAll('#badges .badge')]"
            ".map(b => [b.dataset.value, b.querySelector('b').textContent])")}

    def wait(self, predicate, what: str, timeout: float = 20.0):
        deadline = time.monotonic() + timeout
        while True:
            try:
                if predicate():
                    return
            except (AssertionError, KeyError, TypeError):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; rows {self.rows()}")
            time.sleep(0.1)

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def close(self) -> None:
        self._stack.close()
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.profile, ignore_errors=True)


def _pod(name: str, app: str) -> dict:
    return {"metadata": {"name": name, "labels": {"app": app}},
            "spec": {"containers": [{"name": "main", "image": f"{app}:1"}]}}


@pytest.mark.timeout(180)
def test_the_page_follows_the_cluster_live(local_cluster, kube, namespace, tmp_path):
    pods = f"/api/v1/namespaces/{namespace}/pods"
    for i, app in enumerate(["web", "web", "api", "db"]):
        kube.create(pods, _pod(f"{app}-{i}", app))
        kube.patch(f"{pods}/{app}-{i}/status", {"status": {"phase": "Running" if i < 3 else "Pending"}})
    with run_gateway(local_cluster, sse_retry_ms=300, history=f"sqlite:///{tmp_path}/h.db") as gw:
        assert httpx.get(f"{gw.url}/ui", follow_redirects=False).headers["location"] == "/ui/"
        url = (f"{gw.url}/ui/?resource=core/v1/pods&namespace={namespace}"
               "&filter=metadata.name!~db&columns=metadata.name,status.phase,spec.containers.0.image")
        page = Page(url)
        try:
            page.wait(lambda: page.evaluate("document.querySelector('#state').dataset.state") == "live",
                      "the stream to sync")
            # rows are painted on the next animation frame after SYNCED: wait for that frame
            page.wait(lambda: page.rows() == {f"{namespace}/web-0": ["web-0", "Running", "web:1"],
                                              f"{namespace}/web-1": ["web-1", "Running", "web:1"],
                                              f"{namespace}/api-2": ["api-2", "Running", "api:1"]},
                      "the first rows", timeout=5.0)
            page.wait(lambda: page.badges() == {"*": 3, "Running": 3}, "the badges")
            assert page.evaluate("[...document.querySelectorAll('#resource option')]"
                                 ".some(o => o.value === 'apps/v1/deployments')"), "picked from discovery"

            kube.create(pods, _pod("cache-9", "cache"))  # a row appears
            kube.patch(f"{pods}/web-1/status", {"status": {"phase": "Failed"}})  # one changes
            kube.delete(f"{pods}/api-2")  # one vanishes
            kube.create(pods, _pod("db-7", "db"))  # filtered out: never shown
            page.wait(lambda: page.rows() == {
                f"{namespace}/web-0": ["web-0", "Running", "web:1"],
                f"{namespace}/web-1": ["web-1", "Failed", "web:1"],
                f"{namespace}/cache-9": ["cache-9", "Pending", "cache:1"]}, "the changes")
            page.wait(lambda: page.badges() == {"*": 3, "Pending": 1, "Failed": 1, "Running": 1},
                      "the badges to follow")

            # The server ends the stream (a subscriber too slow); changes pass meanwhile;
            # the browser resumes by Last-Event-ID and the page shows them, with no repaint.
            entry = next(e for e in gw.gateway.default.caches.entries().values() if e.resource.resource == "pods")
            subscriber = next(iter(entry.hub.subscribers))

            def overflow():
                subscriber.overflowed = True
                subscriber._wakeup.set()

            page.evaluate("window.kcg.resets = 0; window.kcg.source.addEventListener("
                          "'RESET', () => window.kcg.resets++); true")
            call_on_loop(gw.gateway.loop, overflow)
            kube.patch(f"{pods}/web-0/status", {"status": {"phase": "Succeeded"}})
            kube.delete(f"{pods}/cache-9")
            page.wait(lambda: page.rows() == {f"{namespace}/web-0": ["web-0", "Succeeded", "web:1"],
                                              f"{namespace}/web-1": ["web-1", "Failed", "web:1"]},
                      "the changes made while away")
            assert page.evaluate("window.kcg.resets") == 0

            # a row's history: each change, newest first, and what it changed
            page.evaluate(f"document.querySelector('tr[data-key=\"{namespace}/web-1\"]').click(); true")

            def changes():
                return page.evaluate("[...document.querySelectorAll('#changes > li')].map(li => "
                                     "[li.querySelector('.type').textContent, "
                                     "[...li.querySelectorAll('.ops li')].map(o => o.textContent)])")

            page.wait(lambda: [t for t, _ in changes()] == ["MODIFIED", "ADDED"], "web-1's history")
            assert 'replace /status/phase "Failed"' in changes()[0][1]
            assert page.evaluate("document.querySelector('#past-title').textContent") == \
                f"History of {namespace}/web-1"
            # the namespace's changes in an hour from a while ago: every change since
            page.evaluate("document.querySelector('#from').value = new Date(Date.now() - 1800e3 - "
                          "new Date().getTimezoneOffset() * 60e3).toISOString().slice(0, 16); "
                          "document.querySelector('#hour').requestSubmit(); true")
            page.wait(lambda: {"DELETED", "MODIFIED", "ADDED"} <= {t for t, _ in changes()}
                      and page.evaluate("document.querySelectorAll('#changes .name').length") > 4,
                      "the hour's changes")
            page.screenshot(tmp_path / "ui.png")
            assert (tmp_path / "ui.png").stat().st_size > 10_000
        finally:
            page.close()


@pytest.mark.timeout(120)
def test_screenshot_of_the_demo_workload_for_the_readme(local_cluster, demo):
    """Writes docs/ui.png when KCG_UPDATE_SCREENSHOT=1; otherwise checks the page renders it."""
    with run_gateway(local_cluster) as gw:
        page = Page(f"{gw.url}/ui/?resource=core/v1/pods&namespace={demo}&columns=metadata.name,"
                    "status.phase,spec.nodeName,spec.containers.0.image,metadata.creationTimestamp")
        try:
            page.wait(lambda: len(page.rows()) >= 5 and len(page.badges()) >= 3, "the demo pods")
            if os.environ.get("KCG_UPDATE_SCREENSHOT") == "1":
                page.screenshot(_DOCS / "ui.png")
        finally:
            page.close()


@pytest.mark.timeout(120)
def test_the_cluster_picker_opens_the_page_of_the_cluster_picked(tmp_path):
    """Three clusters: the page under /clusters/b/ui/ reads b and offers every cluster, b
    picked; picking c opens c's page with the same query, and c's objects."""
    from tests.app.conftest import run_fake_clusters
    from tests.app.streams.test_merged import _fake

    fakes = {"a": _fake("in-a"), "b": _fake("in-b"), "c": _fake("in-c", "in-c-2")}
    with run_fake_clusters(fakes, tmp_path / "clusters.yaml", default="a") as gw:
        query = "?resource=core/v1/configmaps&namespace=apps&columns=metadata.name"
        page = Page(f"{gw.url}/clusters/b/ui/{query}")
        try:
            page.wait(lambda: page.rows() == {"apps/in-b": ["in-b"]}, "b's rows")
            page.wait(lambda: page.evaluate(
                "[...document.querySelectorAll('#cluster option')].map(o => [o.value, o.selected])")
                == [["a", False], ["b", True], ["c", False]], "the picker, b picked")
            assert page.evaluate("document.querySelector('#cluster').closest('label').hidden") is False
            page.evaluate("const s = document.querySelector('#cluster'); s.value = 'c';"
                          "s.dispatchEvent(new Event('change')); true")
            page.wait(lambda: page.evaluate("location.pathname + location.search")
                      == f"/clusters/c/ui/{query}", "c's page, the same query")
            page.wait(lambda: page.rows() == {"apps/in-c": ["in-c"], "apps/in-c-2": ["in-c-2"]},
                      "c's rows")
        finally:
            page.close()
