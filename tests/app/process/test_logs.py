"""Logs: with --log-json every line the process writes is one JSON object, whoever writes it."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from datetime import datetime

import httpx
import pytest

from control_plane.cluster import free_port

_RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")

_EMITTERS = r'''
import logging, sys, threading, warnings
from app.process.logs import configure_logging
configure_logging("info", sys.argv[1] == "json")
logging.getLogger("app").info("from the gateway")
logging.getLogger("uvicorn.error").info("from the server")
warnings.warn("a warning")
try:
    raise ValueError("caught")
except ValueError:
    logging.getLogger("app").exception("with a traceback")
thread = threading.Thread(target=lambda: 1 / 0, name="worker-thread")
thread.start(); thread.join()
raise RuntimeError("nobody caught this")
'''


def _lines(kind: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _EMITTERS, kind], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 1  # the uncaught exception ends it
    return out.stderr.splitlines()


def test_every_line_is_json_with_an_rfc3339_utc_time_whoever_writes_it():
    docs = [json.loads(line) for line in _lines("json")]  # a line that is not JSON fails here
    for doc in docs:
        assert set(doc) >= {"time", "level", "logger", "msg"}, doc
        assert _RFC3339_UTC.match(doc["time"]), doc["time"]
    by_msg = {d["msg"]: d for d in docs}
    assert by_msg["from the server"]["logger"] == "uvicorn.error"
    assert any("a warning" in d["msg"] and d["logger"] == "py.warnings" for d in docs)
    assert "ValueError: caught" in by_msg["with a traceback"]["exception"]
    thread = next(d for d in docs if d["msg"].startswith("uncaught exception in thread"))
    assert "worker-thread" in thread["msg"] and "ZeroDivisionError" in thread["exception"]
    last = next(d for d in docs if d["msg"] == "uncaught exception")
    assert last["level"] == "critical" and "RuntimeError: nobody caught this" in last["exception"]


def test_text_lines_carry_the_same_utc_time():
    first = _lines("text")[0]
    stamp = first.split(" ", 1)[0]
    assert _RFC3339_UTC.match(stamp), first
    assert abs(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - time.time()) < 60


@pytest.mark.cluster
def test_serve_with_log_json_writes_only_json_lines_its_servers_too(local_cluster, tmp_path):
    kubeconfig = local_cluster.write_kubeconfig(tmp_path / "kc", local_cluster.admin)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--kubeconfig", str(kubeconfig),
                             "--port", str(port), "--log-json", "--log-level", "info"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        assert httpx.get(f"http://127.0.0.1:{port}/api/v1/namespaces").status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    docs = [json.loads(line) for line in err.splitlines()]
    assert docs and all(_RFC3339_UTC.match(d["time"]) for d in docs)
    loggers = {d["logger"] for d in docs}
    assert "uvicorn.error" in loggers, loggers  # "Uvicorn running on ...", "Shutting down"
    assert any("cache of" in d["msg"] and "ready" in d["msg"] for d in docs)
