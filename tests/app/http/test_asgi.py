"""The entry point's split: resource paths to the hot path, the rest to FastAPI."""

from __future__ import annotations

import asyncio
import types

import httpx
import orjson
import pytest
from fastapi import FastAPI

from app.http.asgi import GatewayApp, is_resource_path, route_label
from app.http.metrics import Metrics
from app.kube.shapes import RequestShapes
from tests.app.conftest import run_gateway


@pytest.mark.parametrize("path, expected", [
    ("/api/v1/pods", True), ("/api/v1/namespaces/a/pods/b", True), ("/core/v1/pods", True),
    ("/apis/apps/v1/deployments", True), ("/apps/v1/deployments", True),
    ("/api", False), ("/api/v1", False), ("/api/v1/", False), ("/apis", False),
    ("/apis/apps", False), ("/apis/apps/v1", False), ("/apis/apps/v1/", False),
    ("/healthz", False), ("/readyz", False), ("/metrics", False), ("/version", False), ("/", False),
])
def test_resource_paths_are_told_from_discovery_and_operations(path, expected):
    assert is_resource_path(path) is expected


@pytest.mark.parametrize("path, label", [
    ("/api/v1/pods", "resource"), ("/apps/v1/deployments", "resource"), ("/healthz", "/healthz"),
    ("/api", "/api"), ("/api/v1", "discovery"), ("/apis/apps/v1", "discovery"), ("/foo/bar", "other"),
    ("/", "other"),
])
def test_latency_route_labels_are_few_and_never_the_path(path, label):
    assert route_label(path) == label


def test_route_labels_are_kept_for_a_few_short_paths_only():
    """The entry keeps each path's label (a client asks the same again); a caller making up
    paths by the million must not grow that, nor a long path be kept at all."""
    app = _app_with_broken_cache()
    for i in range(4200):
        _get_quietly(app, f"/api/v1/namespaces/n{i}/pods")
    assert 0 < len(app._routes) <= 4096
    app._routes.clear()
    _get_quietly(app, "/api/v1/namespaces/" + "n" * 600 + "/pods")
    assert app._routes == {}
    _get_quietly(app, "/api/v1/pods")
    assert app._routes == {"/api/v1/pods": "resource"}
    assert app.state.gateway.metrics.latency.observed("resource", 500)[0] == 4202


def _get_quietly(app: GatewayApp, path: str) -> None:
    """Drive the app with one GET, no HTTP client around it (thousands in a test)."""
    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        pass

    scope = {"type": "http", "method": "GET", "path": path, "query_string": b"", "headers": [],
             "root_path": ""}
    asyncio.run(app(scope, receive, send))


class _BrokenCache:
    factory = types.SimpleNamespace(discovery=types.SimpleNamespace(view=None))

    async def resolve(self, target):
        raise RuntimeError("boom")


def _app_with_broken_cache() -> GatewayApp:
    api = FastAPI()
    metrics = Metrics(lambda: {})
    cluster = types.SimpleNamespace(caches=_BrokenCache(), shapes=RequestShapes())
    api.state.gateway = types.SimpleNamespace(default=cluster, metrics=metrics)
    return GatewayApp(api)


def _get(app: GatewayApp, path: str) -> httpx.Response:
    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            return await client.get(path)

    return asyncio.run(get())


def test_an_unexpected_error_on_the_hot_path_is_a_500_status_and_is_timed(caplog):
    app = _app_with_broken_cache()
    answer = _get(app, "/api/v1/pods")
    assert answer.status_code == 500
    assert orjson.loads(answer.content)["reason"] == "InternalError"
    assert "boom" in caplog.text
    latency = app.state.gateway.metrics.latency
    count, seconds = latency.observed("resource", 500)
    assert count == 1 and seconds > 0


class _FailsMidway:
    """An answer that starts, then fails before its body."""

    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        raise RuntimeError("midway")


def test_an_error_after_the_answer_started_sends_no_second_answer(monkeypatch, caplog):
    import app.http.asgi as asgi

    async def endpoint(scope, receive):
        return _FailsMidway()

    monkeypatch.setattr(asgi, "resource_answer", endpoint)
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    app = _app_with_broken_cache()
    scope = {"type": "http", "method": "GET", "path": "/api/v1/pods", "query_string": b"",
             "headers": [], "root_path": ""}
    asyncio.run(app(scope, receive, send))
    assert [m["type"] for m in sent] == ["http.response.start"]  # no 500 after the 200
    assert sent[0]["status"] == 200
    assert "midway" in caplog.text
    assert app.state.gateway.metrics.latency.observed("resource", 200)[0] == 1


def test_a_resource_request_before_start_up_is_a_503_status():
    answer = _get(GatewayApp(FastAPI()), "/api/v1/pods")
    assert answer.status_code == 503
    assert orjson.loads(answer.content)["reason"] == "ServiceUnavailable"


@pytest.mark.parametrize("path", ["/core/v1/namespaces/demo-shop/configmaps", "/api", "/api/v1",
                                  "/version", "/healthz", "/metrics", "/nowhere"])
def test_a_loopback_gateway_refuses_requests_addressed_to_other_hosts(gateway, path):
    port = gateway.settings.port
    for host in ("evil.example.com", f"evil.example.com:{port}", f"10.0.0.5:{port}",
                 f"localhost.evil.example.com:{port}"):
        refused = httpx.get(gateway.url + path, headers={"Host": host})
        assert refused.status_code == 403, (host, refused.text)
        status = refused.json()
        assert status["kind"] == "Status" and status["reason"] == "Forbidden"
        assert "DNS rebinding" in status["message"]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}"):
        assert httpx.get(gateway.url + path, headers={"Host": host}).status_code != 403, host


def test_a_gateway_allowed_to_serve_anonymously_elsewhere_accepts_any_host(backend, demo):
    with run_gateway(backend, host="0.0.0.0", allow_anonymous=True) as gw:  # still bound to loopback
        got = httpx.get(f"{gw.url}/core/v1/namespaces/demo-shop/configmaps",
                        headers={"Host": "gateway.example.com"})
        assert got.status_code == 200
