"""The repository package's modules import each other in one direction (no cycle, not even through a type import)."""

from __future__ import annotations

import ast
from pathlib import Path

import model_release.repository as package
from model_release.repository.callgraph import cycles

PACKAGE = Path(package.__file__).parent


def _imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.append(node.module.split(".")[0])
            else:
                found.extend(alias.name for alias in node.names)
    return found


def test_no_import_cycle_in_the_repository_package():
    modules = {p.stem: p for p in PACKAGE.glob("*.py")}
    graph = {name: sorted({m for m in _imports(path) if m in modules and m != name}) for name, path in modules.items()}
    assert cycles(graph) == []
    assert "lint" not in graph["lint_ensemble"] and "lint_ensemble" not in graph["model_info"]
