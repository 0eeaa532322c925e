"""The README's first command: `kube-cache-gateway demo` serves a live local cluster, and Ctrl-C stops it all."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import httpx
import pytest

from app.launch.cli import main

from control_plane.cluster import free_port
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster


def test_without_the_checkouts_control_plane_demo_says_to_use_serve(monkeypatch, capsys):
    """An installation made for serving (the image) carries no control_plane package."""
    for name in list(sys.modules):
        if name == "app.launch.demo" or name.split(".")[0] == "control_plane":
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "control_plane", None)  # import of it fails, as there
    assert main(["demo", "--port", "1"]) == 1
    said = capsys.readouterr().err
    assert "make demo" in said and "use serve" in said


@pytest.mark.timeout(240)
def test_demo_serves_the_demo_workload_and_ctrl_c_stops_everything(local_cluster, tmp_path):
    # local_cluster: the binaries are known to work here; the demo starts a cluster of its own.
    port = free_port()
    errors = (tmp_path / "stderr").open("w+")
    proc = subprocess.Popen([sys.executable, "-m", "app.launch.cli", "demo", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=errors, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        lines = []
        for line in proc.stdout:  # until the banner says where everything is
            lines.append(line)
            if "local API server:" in line:
                break
        banner = "".join(lines)
        assert f"http://127.0.0.1:{port}" in banner, banner + (tmp_path / "stderr").read_text()[-2000:]
        apiserver = re.search(r"local API server: (\S+)", banner).group(1)
        url = f"http://127.0.0.1:{port}"
        pods = httpx.get(f"{url}/core/v1/namespaces/demo-shop/pods", timeout=30).json()
        assert pods["kind"] == "PodList" and pods["items"]
        widgets = httpx.get(f"{url}/apis/example.com/v1/widgets", timeout=30).json()
        assert widgets["kind"] == "WidgetList" and widgets["items"]
        # the history command it printed works: the ticker's changes, each a patch
        for line in proc.stdout:
            lines.append(line)
            if "/history/" in line:
                break
        command = next(line for line in lines if "/history/" in line and "ticker" in line)
        history_url = re.search(r"'(http[^']+)'", command).group(1)
        changes: list = []

        def two_ticks() -> bool:
            changes[:] = httpx.get(history_url, timeout=30).json()["items"]
            return len(changes) >= 2

        wait_until(two_ticks, 20, message="the ticker's changes in the history")
        assert changes[0]["patch"] and changes[0]["type"] == "MODIFIED"
        assert any(p["path"] == "/data/tick" for p in changes[0]["patch"])
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=60)[0]
        assert proc.returncode == 0
        assert "Stopped the gateway, the demo workload and the local API server." in rest
        with pytest.raises(httpx.HTTPError):  # the API server it started is gone too
            httpx.get(f"{apiserver}/readyz", verify=False, timeout=2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        errors.close()
