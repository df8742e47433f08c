"""The layers hold: the import contracts in pyproject.toml are kept, and no engine or app
module imports itself back through others, counting imports inside functions and under
TYPE_CHECKING; the app's views live in rooms, not one flat folder (docs/architecture.md
draws the layers)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import grimp
import pytest
from importlinter.cli import lint_imports

REPO = Path(__file__).resolve().parents[1]


def _cycles(graph: grimp.ImportGraph, prefix: str) -> list[list[str]]:
    """The import circles among the modules under `prefix`: every strongly connected set of
    two or more modules (Tarjan's algorithm, iteratively)."""
    modules = sorted(m for m in graph.modules if m == prefix or m.startswith(prefix + "."))
    inside = set(modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & inside) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                nxt = edges[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:  # back in the caller: it learns how far up this node reaches
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


def _write_package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_the_import_contracts_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.syspath_prepend(str(REPO))
    assert lint_imports(config_filename=str(REPO / "pyproject.toml"), no_cache=True) == 0


def test_no_engine_module_imports_itself_back() -> None:
    graph = grimp.build_graph("engine", cache_dir=None)
    assert _cycles(graph, "engine") == []


def test_no_app_module_imports_itself_back() -> None:
    # The main window's helpers once named MainWindow for type checkers: a circle inside
    # app.views.main. They name the Protocols of app.views.main.parts instead.
    graph = grimp.build_graph("app", cache_dir=None)
    assert _cycles(graph, "app") == []


def test_the_views_live_in_rooms() -> None:
    views = REPO / "app" / "views"
    loose = sorted(p.name for p in views.glob("*.py") if p.name != "__init__.py")
    assert loose == []
    rooms = sorted(p.name for p in views.iterdir() if (p / "__init__.py").exists())
    assert rooms == [
        "chat", "common", "constraints", "extract", "inspector", "library", "main", "mcp",
        "preferences", "server",
    ]  # fmt: skip


def test_circles_hidden_in_functions_and_type_checking_are_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The two circles the engine had: one through an import inside a function, one
    # through an import only type checkers run.
    _write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/types.py": """
                def validate():
                    from pkg.checks import check
                    return check
            """,
            "pkg/checks.py": """
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from pkg.types import validate
                def check(): ...
            """,
            "pkg/plain.py": "import pkg.checks\n",
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pkg", raising=False)
    graph = grimp.build_graph("pkg", cache_dir=None)
    assert _cycles(graph, "pkg") == [["pkg.checks", "pkg.types"]]


def test_a_broken_contract_fails_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A lower layer importing a higher one under TYPE_CHECKING still breaks the contract.
    _write_package(
        tmp_path,
        {
            "layered/__init__.py": "",
            "layered/high.py": "import layered.low\n",
            "layered/low.py": """
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    import layered.high
            """,
            "setup.cfg": """
                [importlinter]
                root_package = layered
                exclude_type_checking_imports = False

                [importlinter:contract:layers]
                name = layers
                type = layers
                layers =
                    layered.high
                    layered.low
            """,
        },
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert lint_imports(config_filename=str(tmp_path / "setup.cfg"), no_cache=True) == 1
