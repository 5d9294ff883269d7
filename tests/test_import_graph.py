"""No import cycles among model_release's modules, and the layering DESIGN.md names.

Every import statement counts: at module level, inside functions (a lazy import is still a
dependency) and under ``TYPE_CHECKING``. ``from pkg import name`` depends on the module
``pkg.name`` when there is one, else on ``pkg`` itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import PROJECT

PACKAGE = PROJECT / "plugins" / "model_release"


def _module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the package's modules it imports (anywhere in its code)."""
    files = {_module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base_parts = name.split(".") if is_pkg else name.split(".")[:-1]
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for target in targets:
                while target and target not in files:  # `import a.b.c` where only a.b is a module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (the product's own Tarjan, which
    the linter uses for BLS call cycles)."""
    from model_release.repository.lint.callgraph import cycles as components

    return sorted(sorted(c) for c in components({m: sorted(t) for m, t in graph.items()}))


def test_the_graph_sees_imports_of_every_kind() -> None:
    graph = import_graph()
    assert "model_release.native" in graph["model_release.intake"]  # a lazy import inside a function
    assert "model_release.mlmodel" in graph["model_release.native"]
    assert "model_release.canary.stage" in graph["model_release.canary"]  # a package's __init__


def test_cycle_finder_finds_a_planted_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "model_release"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from .sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import f\n")
    (pkg / "c.py").write_text("from . import a\n")
    assert cycles(import_graph(pkg)) == [["model_release.a", "model_release.sub.b"]]


def test_no_import_cycles_among_model_release_modules() -> None:
    found = cycles(import_graph())
    assert found == [], "import cycles (every import counts, lazy and TYPE_CHECKING ones too): " + "; ".join(
        " <-> ".join(c) for c in found
    )


def test_stage_modules_do_not_reach_into_the_embedded_stack() -> None:
    """``local/`` holds the embedded stand-ins (MLflow on SQLite, moto, free ports): only the local
    Triton launcher (``triton/local.py``, for its ports), the CLI and the demo may use it."""
    allowed = {"model_release.cli", "model_release.demo", "model_release.triton.local"}
    graph = import_graph()
    offenders = sorted(
        f"{m} -> {t}" for m, targets in graph.items() for t in targets
        if t.startswith("model_release.local") and not m.startswith("model_release.local") and m not in allowed
    )
    assert offenders == []
