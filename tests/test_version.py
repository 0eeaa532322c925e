"""One version, from one place: pyproject.toml. Whatever states it elsewhere agrees."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

from app.version import USER_AGENT, VERSION

ROOT = Path(__file__).resolve().parent.parent
DECLARED = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_the_package_states_the_declared_version():
    assert VERSION == DECLARED
    assert USER_AGENT.startswith(f"kube-cache-gateway/{DECLARED} ")


def test_the_command_prints_it():
    for argv in (["version"], ["--version"]):
        out = subprocess.run([sys.executable, "-m", "app", *argv], capture_output=True, text=True,
                             cwd=ROOT, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith(f"kube-cache-gateway {DECLARED}"), out.stdout


def test_the_files_that_cannot_read_it_state_it_alike():
    chart = yaml.safe_load((ROOT / "helm/kube-cache-gateway/Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (DECLARED, DECLARED)
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(rf"^ARG VERSION={re.escape(DECLARED)}$", dockerfile, re.M)
    kustomization = yaml.safe_load((ROOT / "deploy/kustomization.yaml").read_text())
    assert {i["newTag"] for i in kustomization["images"]} == {DECLARED}
    stated = set(re.findall(r"kube-cache-gateway:(\d+\.\d+\.\d+)", (ROOT / "README.md").read_text()
                            + dockerfile))
    assert stated <= {DECLARED}, stated


def test_the_declared_license_is_shipped_whole():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]
    assert declared == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
