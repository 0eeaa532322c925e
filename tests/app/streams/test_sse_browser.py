"""A real browser's EventSource: initial state, live events, and an automatic resume without loss."""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import tempfile
import threading
import time

import orjson
import pytest

from app.bridge import call_on_loop
from control_plane.cluster import free_port
from control_plane.pytest_plugin import unavailable
from tests.app.conftest import run_gateway

PAGE = """<!doctype html><html><body><script>
let seq = 0;  // reports travel as separate POSTs and may arrive out of order
const report = (kind, data, id) => fetch("/report", {method: "POST",
    body: JSON.stringify({seq: seq++, kind: kind, data: data, id: id})});
const source = new EventSource("%(stream)s");
source.onopen = () => report("open", "", "");
source.onerror = () => report("error", "", "");
for (const kind of ["ADDED", "MODIFIED", "DELETED", "SYNCED", "RESET", "ERROR"]) {
  source.addEventListener(kind, (e) => report(kind, e.data, e.lastEventId));
}
</script></body></html>"""


class PageServer:
    """Serves the page and collects what it reports."""

    def __init__(self) -> None:
        self.reports: list[dict] = []
        self.page = b""
        lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(outer.page)))
                self.end_headers()
                self.wfile.write(outer.page)

            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with lock:
                    outer.reports.append(orjson.loads(body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.port = free_port()
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def serve_stream_page(self, stream_url: str) -> None:
        self.page = (PAGE % {"stream": stream_url}).encode()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)

    def ordered(self) -> list[dict]:
        """Reports in the order the page saw the events."""
        return sorted(list(self.reports), key=lambda r: r["seq"])

    def changes(self) -> list[tuple[str, str]]:
        return [(r["kind"], orjson.loads(r["data"])["metadata"]["name"]) for r in self.ordered()
                if r["kind"] in ("ADDED", "MODIFIED", "DELETED")]

    def kinds(self) -> list[str]:
        return [r["kind"] for r in self.ordered()]

    def wait(self, predicate, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out; reports: {self.reports[-8:]}")


def chromium() -> str:
    found = os.environ.get("KCG_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        unavailable("no Chromium for the browser test (`make test` as root installs Debian's chromium)")
    return found


@pytest.mark.timeout(120)
def test_browser_eventsource_receives_state_live_events_and_resumes_without_loss(backend, kube, namespace):
    browser = chromium()
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    kube.create(base, {"metadata": {"name": "first"}})
    profile = tempfile.mkdtemp(prefix="kcg-chromium-")
    with PageServer() as page:
        with run_gateway(backend, cors_origins=(page.origin,), sse_retry_ms=300) as gw:
            page.serve_stream_page(f"{gw.url}/core/v1/namespaces/{namespace}/configmaps")
            proc = subprocess.Popen(
                [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", f"--user-data-dir={profile}", f"{page.origin}/page"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                page.wait(lambda: "SYNCED" in page.kinds(), timeout=60)
                assert page.changes() == [("ADDED", "first")]
                kube.create(base, {"metadata": {"name": "live"}})
                page.wait(lambda: ("ADDED", "live") in page.changes())

                # End the stream from the server side (a subscriber that fell behind) and
                # change things while the browser is away; it must resume by itself.
                (entry,) = gw.gateway.default.caches.entries().values()
                (subscriber,) = entry.hub.subscribers

                def overflow():
                    subscriber.overflowed = True
                    subscriber._wakeup.set()

                call_on_loop(gw.gateway.loop, overflow)
                page.wait(lambda: "ERROR" in page.kinds())
                kube.patch(f"{base}/first", {"data": {"k": "v"}})
                kube.create(base, {"metadata": {"name": "while-away"}})
                kube.delete(f"{base}/live")
                page.wait(lambda: page.kinds().count("open") >= 2)
                page.wait(lambda: ("DELETED", "live") in page.changes())
                time.sleep(0.5)  # let any late report land before judging order and count
                assert page.changes() == [("ADDED", "first"), ("ADDED", "live"), ("MODIFIED", "first"),
                                          ("ADDED", "while-away"), ("DELETED", "live")]
                assert "RESET" not in page.kinds() and page.kinds().count("SYNCED") == 1
                ids = [r["id"] for r in page.ordered() if r["kind"] in ("MODIFIED", "DELETED")]
                assert all(ids), "every live event carries an id for Last-Event-ID"
            finally:
                proc.terminate()
                proc.wait(10)
                shutil.rmtree(profile, ignore_errors=True)
