"""Serving one process: the server's configuration from the settings."""

from __future__ import annotations

import logging

import httpx
import pytest

from app.launch.server import uvicorn_config
from app.settings import Settings
from control_plane.fake import FakeCluster
from tests.app.conftest import run_gateway


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.mark.parametrize("trusted, client", [((), "127.0.0.1"), (("127.0.0.1",), "203.0.113.9")])
def test_a_forwarded_client_address_is_believed_only_from_named_proxies(trusted, client):
    """A port-forward or a sidecar on loopback must not name the client the access log and
    the per-client stream limit see."""
    lines = _Lines()
    logger = logging.getLogger("kube-cache-gateway.access")
    level = logger.level
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    try:
        with run_gateway(FakeCluster(), access_log=True, forwarded_allow_ips=trusted) as gateway:
            assert httpx.get(gateway.url + "/version",
                             headers={"X-Forwarded-For": "203.0.113.9"}).status_code in (200, 404)
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)
    (line,) = [line for line in lines.lines if '"/version"' in line]
    assert f'"client":"{client}"' in line


def test_the_configuration_follows_the_settings():
    config = uvicorn_config(object(), Settings(port=9999, log_level="warning"))
    assert (config.host, config.port, config.log_level, config.proxy_headers) == (
        "127.0.0.1", 9999, "warning", False)
    assert uvicorn_config(object(), Settings(forwarded_allow_ips=("10.1.2.3",))).proxy_headers
