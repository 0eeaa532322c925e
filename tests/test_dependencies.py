"""Dependencies you can reproduce: what the code imports is declared, and what is declared is
pinned in constraints.txt (which make, the Dockerfile and CI install with)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
OURS = {"app", "informer_core", "control_plane", "bench", "tests"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _imported_top_levels(package: str) -> set[str]:
    found = set()
    for path in (ROOT / package).rglob("*.py"):
        if path.name == "pytest_plugin.py":  # loaded by pytest only: its imports are test extras
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module.split(".")[0])
    return found - OURS - set(sys.stdlib_module_names)


def test_every_package_the_code_imports_is_declared():
    declared = {_name(r) for r in PROJECT["dependencies"]}
    distributions = metadata.packages_distributions()
    undeclared = {}
    for package in ("app", "informer_core", "control_plane"):
        for module in _imported_top_levels(package):
            dists = {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
            if not dists & declared:
                undeclared[module] = sorted(dists)
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"


def test_every_declared_package_is_pinned():
    pinned = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pinned[name.lower().replace("_", "-")] = version
    wanted = PROJECT["dependencies"] + PROJECT["optional-dependencies"]["test"]
    unpinned = sorted({_name(r) for r in wanted} - set(pinned))
    assert not unpinned, f"declared but not pinned in constraints.txt: {unpinned}"
    assert all(pinned.values()), "every line pins one version"
