"""No import cycles among model_release's modules, and the layering the design names (README, Layout).

Every import statement counts: at module level, inside functions (a lazy import is still a
dependency) and under ``TYPE_CHECKING``. ``from pkg import name`` depends on the module
``pkg.name`` when there is one, else on ``pkg`` itself.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

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


@functools.cache
def package_graph() -> Mapping[str, frozenset[str]]:
    """``import_graph()`` of model_release, parsed once for the module's tests (which only read it)."""
    return MappingProxyType({name: frozenset(targets) for name, targets in import_graph().items()})


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (the product's own Tarjan, which
    the linter uses for BLS call cycles)."""
    from model_release.repository.lint.callgraph import cycles as components

    return sorted(sorted(c) for c in components({m: sorted(t) for m, t in graph.items()}))


def test_the_graph_sees_imports_of_every_kind() -> None:
    graph = package_graph()
    assert "model_release.model.native" in graph["model_release.intake.stage"]  # a lazy import inside a function
    assert "model_release.model.mlmodel" in graph["model_release.model.native"]
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
    found = cycles(package_graph())
    assert found == [], "import cycles (every import counts, lazy and TYPE_CHECKING ones too): " + "; ".join(
        " <-> ".join(c) for c in found
    )


def test_stage_modules_do_not_reach_into_the_embedded_stack() -> None:
    """``local/`` holds the embedded stand-ins (MLflow on SQLite, moto, free ports): only the local
    Triton launcher (``triton/local.py``, for its ports), the CLI and the demo may use it."""
    allowed = {"model_release.cli", "model_release.local.demo", "model_release.local.distributed_demo", "model_release.triton.local"}
    graph = package_graph()
    offenders = sorted(
        f"{m} -> {t}" for m, targets in graph.items() for t in targets
        if t.startswith("model_release.local") and not m.startswith("model_release.local") and m not in allowed
    )
    assert offenders == []


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def arrows(graph: dict[str, set[str]], source: str, target: str) -> list[str]:
    """Every import from a module of package ``source`` into a module of package ``target``."""
    return sorted(f"{m} -> {t}" for m, targets in graph.items() if _within(m, source)
                  for t in targets if _within(t, target))


#: the package's entry points, at its top, and the one runner of the stages below them
ENTRY_POINTS = ("model_release.cli", "model_release.local.demo", "model_release.local.distributed_demo", "model_release.reexport",
                "model_release.reference.__main__")
RUNNER = "model_release.pipeline"


def test_no_arrow_runs_back_up_to_the_runner_or_an_entry_point() -> None:
    """A room (a sub-package: export/, local/, canary/, ...) never imports a command or a demo, and only
    the Airflow room (the core <- airflow <- dags direction) wraps the runner. The demos live in ``local/``
    (the embedded stack they run on); they are entry points themselves, so one may build on the other."""
    graph = package_graph()
    back_up = sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets if m.count(".") >= 2
                     and m not in ENTRY_POINTS and (
        t in ENTRY_POINTS or t == RUNNER and not _within(m, "model_release.airflow")))
    assert back_up == [], back_up


def test_arrows_finds_a_planted_import_into_a_forbidden_package(tmp_path: Path) -> None:
    pkg = tmp_path / "model_release"
    for folder in (pkg / "triton", pkg / "canary", pkg / "canary_extra"):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "canary" / "stage.py").write_text("X = 1\n")
    (pkg / "canary_extra" / "b.py").write_text("Y = 1\n")
    (pkg / "triton" / "server.py").write_text("def f():\n    from ..canary.stage import X\n    from ..canary_extra import b\n")
    assert arrows(import_graph(pkg), "model_release.triton", "model_release.canary") == [
        "model_release.triton.server -> model_release.canary.stage"]


def test_the_triton_room_imports_nothing_from_the_canary() -> None:
    """``triton/`` is the plumbing the canary and the roll-out share: it must not depend on either."""
    assert arrows(package_graph(), "model_release.triton", "model_release.canary") == []


def test_the_canarys_judging_imports_nothing_from_its_reporting() -> None:
    """Judging returns gates and figures; the report (report.json, plots, page, MLflow record) is drawn
    from them afterwards, so ``canary/judge/`` never reaches into ``canary/report/``."""
    graph = package_graph()
    assert any(_within(m, "model_release.canary.judge") for m in graph)  # the room exists: the check checks something
    assert arrows(graph, "model_release.canary.judge", "model_release.canary.report") == []
    # nor through another module: nothing judging reaches (serving's records, the champion) reaches reporting
    assert sorted(m for m in reachable(graph, "model_release.canary.judge") if _within(m, "model_release.canary.report")) == []


def reachable(graph: dict[str, set[str]], package: str) -> set[str]:
    """Every module the modules of ``package`` import, directly or through others."""
    seen: set[str] = set()
    todo = [m for m in graph if _within(m, package)]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_reachable_follows_imports_through_other_modules(tmp_path: Path) -> None:
    graph = {"p.judge.a": {"p.serve"}, "p.serve": {"p.report.doc"}, "p.report.doc": set(), "p.other": {"p.report.x"}}
    assert reachable(graph, "p.judge") == {"p.serve", "p.report.doc"}


def unresolved_imports(package: Path = PACKAGE) -> list[str]:
    """Every ``from X import Y`` of the package, lazy ones inside functions included, whose ``Y`` X does not have.

    A lazy import that names a moved function fails only when its branch runs (a served champion's
    ``read_channel`` once did, after the store's pointer code moved): this finds it without running it.
    """
    import importlib

    problems = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "shim_model.py":  # runs inside Triton's python backend, against pb_utils
            continue
        name = _module_name(path, package)
        base_parts = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                parts = base_parts[: len(base_parts) - (node.level - 1)]
                module = ".".join(parts + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if not module.startswith("model_release"):
                continue
            try:
                imported = importlib.import_module(module)
            except ImportError as exc:
                problems.append(f"{path.relative_to(package.parent)}:{node.lineno} {module}: {exc}")
                continue
            for alias in node.names:
                if alias.name == "*" or hasattr(imported, alias.name):
                    continue
                try:
                    importlib.import_module(f"{module}.{alias.name}")
                except ImportError:
                    problems.append(f"{path.relative_to(package.parent)}:{node.lineno} {module} has no {alias.name}")
    return problems


def test_every_import_in_the_package_resolves_lazy_ones_included() -> None:
    assert unresolved_imports() == []


def test_an_import_of_a_moved_name_is_found(tmp_path: Path) -> None:
    package = tmp_path / "model_release"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "late.py").write_text("def f():\n    from model_release.store.channels import read_channel\n")
    assert unresolved_imports(package) == ["model_release/late.py:2 model_release.store.channels has no read_channel"]
