"""The runtime packages hold only the runtime, and engine modules import without cycles."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _modules(package: str) -> dict[str, Path]:
    found = {}
    for path in (REPO / package).rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def test_runtime_packages_hold_no_benchmark_or_test_model_code():
    shipped = {**_modules("engine"), **_modules("app")}
    leftovers = [
        str(p.relative_to(REPO))
        for p in shipped.values()
        if p.stem.startswith("bench") or p.stem == "tiny_model"
    ]
    assert leftovers == []
    for name, path in shipped.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("benchmarks"):
                # the only way in: `python -m engine bench`, which a bundle does not have
                assert name == "engine.cli", f"{name} imports {node.module}"


def _runtime_nodes(tree: ast.Module) -> list[ast.AST]:
    """Every node of `tree` Python may run: all but `if TYPE_CHECKING:` blocks."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return [n for n in ast.walk(tree) if id(n) not in skipped]


def _import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> modules of the same package it imports when run, at the top or lazily
    (inside functions); imports for type checkers only do not count."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in _runtime_nodes(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle in `graph`, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [node, nxt] if nxt in path else [node, nxt]
            if nxt not in state and (found := visit(nxt, path + [node])):
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [])):
            return found
    return None


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) is not None
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_engine_modules_import_each_other_without_cycles():
    graph = _import_graph(_modules("engine"))
    assert "engine.constraints.sources" in graph["engine.constraints.validate"]
    assert _cycle(graph) is None
