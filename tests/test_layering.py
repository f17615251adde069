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
HTTP_SIDE = ("lifecycle.api", "lifecycle.faults", "lifecycle.cli")


def test_the_core_imports_nothing_from_the_http_layer():
    graph = import_graph("lifecycle")
    core = {module: imports for module, imports in graph.items()
            if not any(module == side or module.startswith(side + ".") for side in HTTP_SIDE)}
    reaching = {module: sorted(i for i in imports if i.startswith("lifecycle.api")) for module, imports in core.items()}
    assert {module: found for module, found in reaching.items() if found} == {}
    assert "lifecycle.journey" in core and "lifecycle.stages.request" in core  # the journey's stages are checked


def test_a_stage_has_one_name_in_every_layer():
    """The page, the stage module, its charts and its tests share a name (views/forward_pass.py,
    lifecycle/stages/forward_pass.py, charts/forward_pass.py, tests/test_forward_pass.py)."""
    views = {path.stem for path in (ROOT / "views").glob("*.py")}
    stages = {path.stem for path in (ROOT / "lifecycle" / "stages").glob("*.py")} - {"__init__"}
    paged = views & stages
    assert {"request", "tokenization", "context_window", "forward_pass", "sampling", "generation", "streaming",
            "detokenization", "kv_cache"} <= paged
    for name in sorted(paged):
        assert (ROOT / "charts" / f"{name}.py").is_file(), name
        assert (ROOT / "tests" / f"test_{name}.py").is_file(), name



def test_a_pages_lesson_is_named_like_the_page():
    """A page's lesson sentences live in lifecycle/lessons/ under the page's name (lifecycle/lessons/next_token.py
    for views/next_token.py, tested in tests/lessons/test_next_token.py) beside their shared wording (words), and
    the page states each lesson with one of them, ``lesson(next_token_lesson(...))``: no sentence is built in a view."""
    views = {path.stem for path in (ROOT / "views").glob("*.py")}
    lessons = {path.stem for path in (ROOT / "lifecycle" / "lessons").glob("*.py")} - {"__init__"}
    assert "words" in lessons
    lessons.discard("words")
    assert lessons <= views, sorted(lessons - views)
    for name in sorted(lessons | {"words"}):
        assert (ROOT / "tests" / "lessons" / f"test_{name}.py").is_file(), name
    for view in sorted(views):
        tree = ast.parse((ROOT / "views" / f"{view}.py").read_text())
        own = {alias.asname or alias.name for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and node.module == f"lifecycle.lessons.{view}" for alias in node.names}
        calls = [node for node in ast.walk(tree)
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "lesson"]
        assert calls, f"views/{view}.py states no lesson"
        for call in calls:
            text = call.args[0]
            assert isinstance(text, ast.Call) and isinstance(text.func, ast.Name) and text.func.id in own, (
                f"views/{view}.py:{call.lineno}: lesson() takes a function of lifecycle/lessons/{view}.py")

def test_the_public_names_are_imported_on_first_use():
    import subprocess
    import sys

    script = ("import sys, lifecycle; loaded = sorted(m for m in sys.modules if m.startswith('lifecycle.')); "
              "print(loaded, 'numpy' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[] False"

    import importlib

    import lifecycle

    assert dir(lifecycle) == lifecycle.__all__ and len(lifecycle.__all__) >= 5
    for name in lifecycle.__all__:
        value = getattr(lifecycle, name)
        assert getattr(value, "__module__", "").startswith("lifecycle."), name
        assert getattr(importlib.import_module(value.__module__), name) is value
    try:
        lifecycle.no_such_stage
    except AttributeError as error:
        assert "no_such_stage" in str(error)
    else:
        raise AssertionError("an unknown name must raise AttributeError")
