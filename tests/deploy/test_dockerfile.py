"""The image recipe, read as Docker reads it (the ``dockerfile`` package wraps BuildKit's own
parser): two stages, a slim Python 3.11 runtime without the build's tools, non-root, the gateway
as entry point authorizing callers, config by ``KCG_*``, OCI labels, a tight build context."""

from __future__ import annotations

import dataclasses
import fnmatch
import shlex

import dockerfile
import pytest

from app.settings import Settings
from tests.deploy.conftest import ROOT

_SETTINGS = {f"KCG_{f.name.upper()}" for f in dataclasses.fields(Settings)}


def stages() -> list[list[dockerfile.Command]]:
    """The Dockerfile's commands, one list per stage (each starting with its FROM)."""
    out: list[list[dockerfile.Command]] = []
    for command in dockerfile.parse_file(str(ROOT / "Dockerfile")):
        if command.cmd == "FROM":
            out.append([])
        if out:
            out[-1].append(command)
    return out


def pairs(command: dockerfile.Command) -> dict[str, str]:
    """ENV or LABEL key/value pairs."""
    values = command.value
    return {values[i]: values[i + 1].strip('"') for i in range(0, len(values), 2)}


def runtime() -> list[dockerfile.Command]:
    return stages()[-1]


def first(stage: list[dockerfile.Command], cmd: str) -> dockerfile.Command:
    return next(c for c in stage if c.cmd == cmd)


def args_of() -> dict[str, str]:
    return dict(c.value[0].split("=", 1) for c in dockerfile.parse_file(str(ROOT / "Dockerfile"))
                if c.cmd == "ARG" and "=" in c.value[0])


def test_two_stages_on_slim_python_3_11():
    build, final = stages()
    assert first(build, "FROM").value[-1] == "build"
    image = args_of()["PYTHON_IMAGE"]
    assert image.startswith("python:3.11-slim")
    assert first(final, "FROM").value[0] == "${PYTHON_IMAGE}"


def test_the_runtime_holds_wheels_only_never_sources_tests_or_a_venv():
    final = runtime()
    assert not [c for c in final if c.cmd in ("COPY", "ADD")], "the runtime copies nothing in"
    (install,) = [c for c in final if c.cmd == "RUN"]
    assert "--mount=type=bind,from=build,source=/wheels,target=/wheels" in install.flags
    assert "--no-index" in install.value[0] and "--no-cache-dir" in install.value[0]
    assert "gcc" not in install.value[0] and "apt-get" not in install.value[0]


def test_it_runs_as_65532_with_the_gateway_as_entry_point():
    final = runtime()
    assert first(final, "USER").value == ("65532:65532",)
    entry = first(final, "ENTRYPOINT")
    assert entry.json and entry.value == ("kube-cache-gateway", "serve")
    assert first(final, "EXPOSE").value == ("8080",)
    assert "--uid 65532" in first(final, "RUN").value[0]


def test_inside_the_image_it_listens_everywhere_and_authorizes_callers():
    env = {}
    for command in runtime():
        if command.cmd == "ENV":
            env.update(pairs(command))
    assert env["KCG_HOST"] == "0.0.0.0" and env["KCG_PORT"] == "8080"
    assert env["KCG_AUTHZ"] == "kubernetes"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"  # a read-only root: nothing written beside code
    assert {k for k in env if k.startswith("KCG_")} <= _SETTINGS


def test_oci_labels():
    labels = {}
    for command in runtime():
        if command.cmd == "LABEL":
            labels.update(pairs(command))
    for key in ("source", "version", "licenses", "title"):
        assert labels.get(f"org.opencontainers.image.{key}"), key
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"


def _ignored(path: str, rules: list[str]) -> bool:
    """Whether the build context leaves ``path`` out (.dockerignore: last matching rule wins)."""
    ignored = False
    for rule in rules:
        negate = rule.startswith("!")
        pattern = rule[1:] if negate else rule
        pattern = pattern.rstrip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        if any(fnmatch.fnmatch(p, pattern) or fnmatch.fnmatch(p, pattern.replace("**/", ""))
               for p in prefixes):
            ignored = not negate
    return ignored


def dockerignore_rules() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


@pytest.mark.parametrize("path, sent", [
    ("pyproject.toml", True), ("app/main.py", True), ("informer_core/store.py", True),
    ("control_plane/cluster.py", False), ("README.md", True),
    ("tests/app/auth/test_authorization.py", False), (".venv/bin/python", False), (".git/HEAD", False),
    ("docs/benchmarks.json", False), ("helm/kube-cache-gateway/values.yaml", False),
    ("app/__pycache__/main.cpython-311.pyc", False),
])
def test_the_build_context_is_the_package_and_nothing_else(path, sent):
    assert _ignored(path, dockerignore_rules()) is not sent


def test_the_build_stage_copies_what_the_package_needs():
    build = stages()[0]
    copied = {v for c in build if c.cmd == "COPY" for v in c.value[:-1]}
    assert copied == {"pyproject.toml", "README.md", "LICENSE", "constraints.txt", "app",
                      "informer_core"}  # not control_plane: a checkout's tools
    wheel = [c for c in build if c.cmd == "RUN" and c.value[0].startswith("pip wheel ")]
    assert len(wheel) == 1 and shlex.split(wheel[0].value[0])[-1] == "."
    assert "-c constraints.txt" in wheel[0].value[0], "the versions the suite passed with"
