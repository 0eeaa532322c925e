"""The house's layout, held: no import circle anywhere, and a map of ``app/`` that is whole.

An import inside a function is still an import: a circle that hides there is still a
circle (it only moves the failure from import time to the first call, and it ties
modules that should stand on floors of their own). So the graph counts every
``import`` statement wherever it stands, resolves relative imports, and names a module
by what it imports (``from app.kube import status`` is an edge to ``app.kube.status``).
"""

from __future__ import annotations

import ast
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("informer_core", "control_plane", "app")


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, pathlib.Path]:
    return {module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


def _owner(name: str, known: dict[str, pathlib.Path]) -> str | None:
    """The module (or package) of ours that ``name`` names or lies in."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(known: dict[str, pathlib.Path]) -> dict[str, set[str]]:
    """module -> the modules of ours it imports, anywhere in its text."""
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[:len(package) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{alias.name}" for alias in node.names]
            for target in targets:
                owner = _owner(target, known)
                if owner is not None and owner != name:
                    graph[name].add(owner)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_circle_finder_finds_a_circle_through_a_function_level_import(tmp_path):
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_graph_counts_imports_inside_functions_and_relative_ones(tmp_path, monkeypatch):
    package = tmp_path / "app"
    (package / "kube").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "kube" / "__init__.py").write_text("")
    (package / "kube" / "status.py").write_text("def f():\n    from app.settings import x\n")
    (package / "settings.py").write_text("from .kube import status\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    known = {module_name(p): p for p in package.rglob("*.py")}
    graph = import_graph(known)
    assert graph["app.settings"] == {"app.kube.status"}
    assert graph["app.kube.status"] == {"app.settings"}
    assert circles(graph) == [["app.kube.status", "app.settings"]]


def test_no_import_circle_in_the_library_the_control_plane_or_the_app():
    found = circles(import_graph(modules()))
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)



def test_the_floors_import_only_downwards():
    """informer_core stands alone; control_plane (the clusters, images and nodes the tests and
    benchmarks run on) may use it but never the gateway built on both."""
    graph = import_graph(modules())
    upward = [(name, target) for name, targets in graph.items() for target in targets
              if (name.startswith("informer_core") and not target.startswith("informer_core"))
              or (name.startswith("control_plane") and target.startswith("app"))]
    assert upward == [], upward

# -- the floors of app/ ------------------------------------------------------------------

# app/, floor by floor from the top, each wing (and each module at the top) one room: a room
# imports only rooms on floors below its own, so no wing leans on one that leans back on it.
# The request's notes (``kube.context``) and what it asks to do (``kube.access``) sit below
# the wings that write and read them, as kube-apiserver's ``endpoints/request`` sits below its
# filters; ``query`` is a ground floor of pure functions; ``process`` holds what every wing
# stands on, ``launch`` what stands on every wing.
FLOORS = (
    ("app", "__main__"),  # the package (create_app, asked for lazily) and ``python -m app``
    ("launch",),
    ("main",),
    ("gateway",),
    ("http",),
    ("streams",),
    ("clusters",),
    ("auth",),
    ("cache",),
    ("history",),
    ("kube",),
    ("query",),
    ("settings",),
    ("process",),
    ("bridge", "version"),
)


def room_of(module: str) -> str | None:
    """The room of ``app/`` a module is in: its wing, or itself at the top (``app``: the
    package's own ``__init__``); ``None`` outside ``app/``."""
    parts = module.split(".")
    if parts[0] != "app":
        return None
    return parts[1] if len(parts) > 1 else "app"


def upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The imports of ``graph`` that run from a room of ``app/`` to one on a floor above it,
    or to a room that has no floor."""
    floor = {room: level for level, rooms in enumerate(FLOORS) for room in rooms}
    found = []
    for name, targets in graph.items():
        here = room_of(name)
        for target in targets:
            there = room_of(target)
            if here is None or there is None or here == there:
                continue
            if here not in floor or there not in floor or floor[there] <= floor[here]:
                found.append((name, target))
    return sorted(found)


def test_the_floor_check_finds_an_import_up_and_one_across():
    graph = {"app.kube.shapes": {"app.auth.authorization", "app.query.selection"},
             "app.auth.authorization": {"app.kube.status"}, "app.launch.cli": {"app.main"},
             "app.bridge": {"app.version"}, "app.kube.status": set(), "app.version": set()}
    assert upward(graph) == [("app.bridge", "app.version"), ("app.kube.shapes", "app.auth.authorization")]
    assert upward({"app.kube.x": {"app.newwing.y"}}) == [("app.kube.x", "app.newwing.y")]


def test_every_room_of_app_has_a_floor_and_every_floor_a_room():
    rooms = {room_of(name) for name in modules() if name.startswith("app")}
    floors = [room for level in FLOORS for room in level]
    assert len(floors) == len(set(floors))
    assert rooms == set(floors)


def test_no_import_runs_up_a_floor_inside_app():
    found = upward(import_graph(modules()))
    assert not found, "imports up a floor:\n" + "\n".join(f"{a} -> {b}" for a, b in found)


# -- the map of app/ in the README ------------------------------------------------------

WINGS = ("launch", "process", "http", "streams", "cache", "history", "clusters", "kube", "query",
         "auth")
_MAX_PER_WING = 12


def _readme_map() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## What is inside")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def test_app_holds_only_its_wings_and_what_ties_them_together():
    top = sorted(p.name for p in (ROOT / "app").iterdir()
                 if p.name != "__pycache__" and (p.is_dir() or p.suffix == ".py"))
    assert top == sorted(["__init__.py", "__main__.py", "bridge.py", "gateway.py", "main.py", "version.py",
                          "settings.py", *WINGS])
    for wing in WINGS:
        count = len([p for p in (ROOT / "app" / wing).glob("*.py") if p.name != "__init__.py"])
        assert 0 < count <= _MAX_PER_WING, (wing, count)


def test_every_module_of_app_is_on_the_readme_map():
    mapped = _readme_map()
    missing = []
    for path in sorted((ROOT / "app").rglob("*.py")):
        if path.name == "__init__.py":
            continue
        relative = path.relative_to(ROOT / "app")
        # the map names a module by its file name under its wing's heading line
        if not re.search(rf"(?<![\w/]){re.escape(path.name)}(?![\w])", mapped):
            missing.append(str(relative))
    assert not missing, "modules missing from README's 'What is inside': " + ", ".join(missing)


def test_tests_mirror_the_wings():
    """Each test module of a wing is named for a module of that wing (``test_X.py`` or
    ``test_X_<what>.py`` for ``X.py``): a reader finds a module's tests from its name."""
    strays = []
    for wing in WINGS:
        modules_here = {p.stem for p in (ROOT / "app" / wing).glob("*.py") if p.name != "__init__.py"}
        for test in sorted((ROOT / "tests" / "app" / wing).glob("test_*.py")):
            stem = test.stem.removeprefix("test_")
            if not any(stem == m or stem.startswith(f"{m}_") for m in modules_here):
                strays.append(f"tests/app/{wing}/{test.name}")
    assert not strays, "tests named for no module of their wing: " + ", ".join(strays)
