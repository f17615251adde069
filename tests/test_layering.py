"""The layers the README describes, read from the source: ``lifecycle/`` and ``charts/`` import no
Streamlit, and no module of ``lifecycle/`` imports itself back through others (an import circle), with
imports inside functions counted too, since they circle just the same once called."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``path`` imports (``from a import b`` counts ``a.b`` when it is a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found & known


def import_graph(package: str) -> dict[str, set[str]]:
    paths = sorted((ROOT / package).rglob("*.py"))
    known = {module_name(path) for path in paths}
    return {module_name(path): imported_modules(path, known) - {module_name(path)} for path in paths}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for neighbour in graph[node]:
            if neighbour not in index:
                visit(neighbour)
                low[node] = min(low[node], low[neighbour])
            elif neighbour in on_stack:
                low[node] = min(low[node], index[neighbour])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in graph:
        if node not in index:
            visit(node)
    return groups


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


def test_lifecycle_has_no_import_circle():
    assert circles(import_graph("lifecycle")) == []


def test_the_library_and_the_charts_import_no_streamlit():
    for package in ("lifecycle", "charts"):
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text())
            names = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                     for alias in node.names}
            names |= {node.module.split(".")[0] for node in ast.walk(tree)
                      if isinstance(node, ast.ImportFrom) and node.module}
            assert "streamlit" not in names, path.relative_to(ROOT)


# What may import the HTTP layer: the layer itself, the Failures page's faulty gateway (an HTTP service
# by nature, built on the Gateway page's) and the CLI (it prints the server's key sheet).
HTTP_SIDE = ("lifecycle.server", "lifecycle.faults", "lifecycle.cli")


def test_the_core_imports_nothing_from_the_http_layer():
    graph = import_graph("lifecycle")
    core = {module: imports for module, imports in graph.items()
            if not any(module == side or module.startswith(side + ".") for side in HTTP_SIDE)}
    reaching = {module: sorted(i for i in imports if i.startswith("lifecycle.server")) for module, imports in core.items()}
    assert {module: found for module, found in reaching.items() if found} == {}
    assert "lifecycle.journey" in core and "lifecycle.request" in core  # the journey's stages are checked
