"""The tree a newcomer reads: no import cycle, modules of at most 600 lines, each opening
with its concept, and the terminal's rendering importable without the command line.

Imports are read from the source (every ``import``, at module level, in functions and
under ``TYPE_CHECKING`` alike), so a cycle that only a type checker or a late import
closes still counts.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "loopctl_memory"
BENCHMARKS = ROOT / "benchmarks"
MOST_LINES = 600


def _modules(package: Path) -> dict[str, Path]:
    """Each module of ``package`` by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    """Which of ``package``'s modules each of its modules imports.

    ``from a.b import c`` imports ``a.b.c`` when that is a module, else ``a.b`` (the
    package, whose ``__init__`` runs); relative imports are resolved.
    """
    modules = _modules(package)
    top = package.name

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = name.split(".")[: None if is_package else -1]
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            for target in targets:
                module = known(target) if target.split(".")[0] == top else None
                if module is not None and module != name:
                    graph[name].add(module)
    return graph


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        order[node] = low[node] = len(order)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in order:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], order[other])
        if low[node] == order[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return found


def test_the_cycle_check_finds_a_cycle_through_a_type_checking_import(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("from .c import C\n")
    (package / "sub" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n"
    )
    (package / "d.py").write_text("def late():\n    from pkg import a\n")
    assert [["pkg.a", "pkg.sub.b", "pkg.sub.c"]] == cycles(import_graph(package))


def test_importing_a_sibling_through_the_package_is_no_cycle_but_a_name_of_it_is(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from pkg.helper import x\n")
    (package / "helper.py").write_text("from pkg import shared\nx = 1\n")
    (package / "shared.py").write_text("")
    assert [] == cycles(import_graph(package))
    (package / "helper.py").write_text("from pkg import y\nx = 1\n")
    assert [["pkg", "pkg.helper"]] == cycles(import_graph(package))


def test_no_import_cycle_in_the_package():
    assert [] == cycles(import_graph(PACKAGE))


def test_no_import_cycle_in_the_benchmarks():
    assert [] == cycles(import_graph(BENCHMARKS))


def _python_files() -> list[Path]:
    return sorted([*PACKAGE.rglob("*.py"), *BENCHMARKS.rglob("*.py")])


@pytest.mark.parametrize("path", _python_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_a_module_is_at_most_600_lines_and_opens_with_its_concept(path):
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MOST_LINES
    if text.strip() and path.name != "__init__.py":
        docstring = ast.get_docstring(ast.parse(text))
        assert docstring, f"{path.name} opens with no docstring"


def test_the_sql_package_is_folders_by_concept():
    """Besides its entry point and what migrations import, ``sql/`` holds only folders."""
    flat = sorted(path.name for path in (PACKAGE / "sql").glob("*.py"))
    assert ["__init__.py", "opening.py", "tables.py", "text.py", "tuning.py"] == flat


def test_the_rendering_and_the_demo_load_no_command_line():
    """The tables the CLI and the demo share import without click."""
    code = (
        "import sys\n"
        "import loopctl_memory.demo, loopctl_memory.rendering, loopctl_memory.names\n"
        "loaded = [m for m in sys.modules if m == 'click' or m.startswith('loopctl_memory.cli')]\n"
        "print(sorted(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert "[]" == result.stdout.strip()
