"""The repository package's modules import each other in one direction (no cycle, not even through a type import)."""

from __future__ import annotations

import ast
from pathlib import Path

import model_release.repository as package
from model_release.repository.lint.callgraph import cycles

PACKAGE = Path(package.__file__).parent


def _name(path: Path) -> str:
    """``lint.linter`` for repository/lint/linter.py, ``lint`` for repository/lint/__init__.py."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The package modules that ``path`` imports relatively (``from .x import``, ``from ..x import``)."""
    here = _name(path).split(".") if path.name == "__init__.py" else _name(path).split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and 0 < node.level <= len(here) + 1:
            base = here[:len(here) - node.level + 1]
            targets = [base + node.module.split(".")] if node.module else [base + [a.name] for a in node.names]
            for target in targets:
                while target and ".".join(target) not in modules:
                    target = target[:-1]  # from .lint.callgraph import x -> lint.callgraph; from . import config
                if target:
                    found.add(".".join(target))
    return found


def test_no_import_cycle_in_the_repository_package():
    paths = {_name(p): p for p in PACKAGE.rglob("*.py") if p != PACKAGE / "__init__.py"}
    graph = {name: sorted(_imports(path, set(paths)) - {name}) for name, path in paths.items()}
    assert "lint.linter" in graph["lint"] and "config" in graph["lint.file_rules"]  # the graph sees both levels
    assert cycles(graph) == []
    assert "lint.linter" not in graph["lint.ensemble_rules"]
    assert "lint.ensemble_rules" not in graph["lint.model_info"]
