"""Lint a Triton model repository before Triton loads it.

The rules mirror what Triton 2.51 refuses at load time (files, names, platforms, versions, tensors,
scheduling, ensemble wiring, cycles), what it loads but fails on once requests come (python
models, BLS calls), and what it accepts silently but is wrong (stray versions, names it cannot
know before run time). Every finding names the rule, the model, the file and the fix;
:data:`RULES` says for each what Triton does and where it checks it (``model-release lint
--explain RULE``). :func:`lint_repository` is the API.

The rule families live in their own modules: :mod:`.file_rules` (config.pbtxt, versions, model
files), :mod:`.config_rules` (platform, tensors, scheduling), :mod:`.ensemble_rules`,
:mod:`.python_rules` (model.py and BLS); this module walks the repository and adds the rules on
the dependency graph.
"""

from __future__ import annotations

from pathlib import Path

from .autocomplete import DEPENDS_ON_COMPLETION, complete
from .callgraph import call_depths, cycles, load_order
from ..config import CONFIG_FILE
from .findings import ERROR, WARNING, Finding, LintReport, listing
from .config_rules import backend_from_name, check_kind, check_scheduling, check_tensors, check_warmup
from .ensemble_rules import check_ensemble
from .file_rules import check_model_files, inferred_backend, is_symlink, read_config, scan_versions
from .python_rules import PythonReader, check_python
from .model_info import ModelInfo
from .rulebook import REFUSES, RULES
from .section_rules import check_model_metrics, check_runtime

__all__ = ["RULES", "ERROR", "WARNING", "Finding", "LintReport", "ModelInfo", "lint_repository"]


class _Linter:
    def __init__(self, root: Path, auto_complete: bool = True) -> None:
        self.root = root
        self.auto_complete = auto_complete
        self.findings: list[Finding] = []
        self.models: dict[str, ModelInfo] = {}
        self.refused: set[str] = set()  # models with a finding Triton refuses to load
        self.python = PythonReader(self.add)

    def add(self, rule: str, model: str, file: str, message: str) -> None:
        unread = self._unread_completion(rule, model) if rule in DEPENDS_ON_COMPLETION else ""
        if unread:
            rule, message = "autocomplete-unread", f"{message} [{rule}, only a warning: {unread}, so Triton may complete it]"
        self.findings.append(Finding(rule, RULES[rule].severity, model, file, message))
        if RULES[rule].triton == REFUSES:
            self.refused.add(model)

    def _add_new(self, rule: str, model: str, file: str, message: str) -> None:
        """``add``, unless the same finding is already there (a check run again on the completed config)."""
        before = len(self.findings)
        self.add(rule, model, file, message)
        if self.findings[-1] in self.findings[:before]:
            self.findings.pop()

    def _unread_completion(self, rule: str, model: str) -> str:
        """Why what ``rule`` checks on ``model`` may be completed unseen: the model's own completion, a member's for
        an ensemble rule, a target's for a BLS rule (empty: it may not)."""
        info = self.models.get(model)
        related = [model]
        if info is not None and rule.startswith("ensemble-"):
            related += sorted(info.steps)
        elif info is not None and rule.startswith("bls-"):
            related += sorted(info.deps)
        return next((self.models[m].unread_completion for m in related
                     if m in self.models and self.models[m].unread_completion), "")

    # --- one model -------------------------------------------------------------------------

    def scan(self, folder: Path) -> None:
        name = folder.name
        info = ModelInfo(name, folder, f"{name}/{CONFIG_FILE}")
        self.models[name] = info
        if is_symlink(folder):
            self.add("file-symlink", name, f"{name}/",
                     "the model folder is a symlink; the linter does not read through symlinks: put the folder itself there")
            return
        if not read_config(info, self.add):
            self._no_config(info)
            return
        config = info.config
        if config is None:
            return
        if config.name and config.name != name:
            self.add("name-mismatch", name, info.config_file,
                     f"config name {config.name!r} differs from its folder {name!r}; Triton refuses it: "
                     f"rename one of them (or leave name empty)")
        check_kind(info, self.add)
        scan_versions(info, self.add)
        check_model_files(info, self.add)
        if info.kind == "python":
            self.python.read(info)
        check_scheduling(info, self.add)  # ValidateModelConfig at the repository stage, before a backend completes it
        raw = info.config
        complete(info, self.add, self.auto_complete)  # what the backend fills in, then checked again (Model::Init)
        check_tensors(info, self.add)
        if info.config is not raw:
            check_scheduling(info, self._add_new)
        check_warmup(info, self.add)
        check_model_metrics(info, self.add)
        check_runtime(info, self.add)
        if info.kind == "ensemble":
            info.steps = {step.model_name for step in config.ensemble_scheduling.step}
            info.deps.update(info.steps)

    def _no_config(self, info: ModelInfo) -> None:
        from_file, from_name = inferred_backend(info.path), backend_from_name(info.name)
        if not self.auto_complete:
            self.add("config-missing", info.name, info.config_file,
                     "no config.pbtxt, and with auto-complete off (--disable-auto-complete-config) Triton reads it and "
                     "fails without it; write config.pbtxt with name, backend (or platform), inputs and outputs")
        elif from_file or from_name:
            source = "the model file" if from_file else f"the model name (backend {from_name!r} after its first '.')"
            self.add("config-autocomplete", info.name, info.config_file,
                     f"no config.pbtxt: Triton will infer a {from_file or from_name} config from {source}, which the "
                     "linter cannot check; write config.pbtxt with the inputs, outputs and batch size you mean")
        else:
            self.add("config-missing", info.name, info.config_file,
                     "no config.pbtxt, no model file Triton could infer one from, and no '.<backend>' in the model "
                     "name; write config.pbtxt with name, backend (or platform), inputs and outputs")

    # --- the dependency graph --------------------------------------------------------------

    def graph_rules(self) -> list[str]:
        graph = {n: sorted(d for d in m.deps if d in self.models and d != n) for n, m in self.models.items()}
        ensembles = {n: sorted(d for d in m.steps if d in self.models) for n, m in self.models.items()}
        self._cycles(graph, ensembles)
        self._blocking_depth(graph)
        order = load_order(graph)
        self._refused_members(order)
        return order

    def _cycles(self, graph: dict[str, list[str]], ensembles: dict[str, list[str]]) -> None:
        for name, steps in ensembles.items():
            if name in steps:
                self.add("ensemble-cycle", name, self.models[name].config_file,
                         "an ensemble step names the ensemble itself, which Triton refuses (\"circular dependency "
                         "between ensembles\"); step to another model")
        in_ensemble_cycle = set()
        for component in cycles({n: [d for d in s if d != n] for n, s in ensembles.items()}):
            in_ensemble_cycle.update(component)
            self.add("ensemble-cycle", component[0], self.models[component[0]].config_file,
                     f"ensembles {listing(component)} step into each other, so Triton refuses them all (\"circular "
                     "dependency between ensembles\"); break the cycle")
        for component in cycles(graph):
            if not set(component) <= in_ensemble_cycle:
                self.add("bls-cycle", component[0], self.models[component[0]].config_file,
                         f"models {listing(component)} call each other (BLS calls, or ensemble steps and BLS calls): "
                         "Triton loads them, but a request that goes round never ends; break the cycle")

    def _blocking_depth(self, graph: dict[str, list[str]]) -> None:
        depths = call_depths(graph)
        for name, m in self.models.items():
            blocking = [a.blocking_exec for a in m.python.values() if a.blocking_exec and a.bls_calls]
            if blocking and m.instances <= depths[name]:
                self.add("bls-blocking-depth", name, m.config_file,
                         f"blocking exec() (line {blocking[0]}) holds one of its {m.instances} instance(s) through "
                         f"{depths[name]} nested call level(s); give it at least {depths[name] + 1} instances "
                         "(instance_group count) or use await ...async_exec() in async def execute")

    def _refused_members(self, order: list[str]) -> None:
        """An ensemble is refused when a model it steps to is (Triton: "depends on ... which has no loaded version")."""
        for name in order:
            info = self.models[name]
            bad = sorted(s for s in info.steps if s in self.refused and s != name and s in self.models)
            if bad and name not in self.refused:
                self.add("ensemble-member-invalid", name, info.config_file,
                         f"steps to {listing(bad)}, which Triton refuses to load (see the findings on "
                         f"{'it' if len(bad) == 1 else 'them'}), so it refuses this ensemble too; fix "
                         f"{'that model' if len(bad) == 1 else 'those models'}")


def _model_folders(root: Path, linter: _Linter) -> list[Path]:
    try:
        entries = sorted(root.iterdir())
    except OSError as exc:
        linter.add("file-unreadable", "", str(root), f"the repository folder cannot be listed ({exc.strerror})")
        return []
    return [p for p in entries if not p.name.startswith(".") and p.is_dir()]


def lint_repository(path: str | Path, *, auto_complete: bool = True) -> LintReport:
    """Lint the Triton model repository at ``path``.

    Args:
        path: the repository folder (one sub-folder per model).
        auto_complete: whether the server completes configs (its default); False as for a server started with
            ``--disable-auto-complete-config`` (or ``--strict-model-config=true``): no backend fills anything in.

    Returns:
        The findings (errors and warnings) and the load order, dependencies first.
    """
    root = Path(path)
    report = LintReport(str(root))
    if not root.is_dir():
        report.findings.append(Finding("repo-not-found", ERROR, "", str(root),
                                       f"{str(root)!r} is not a folder; give the model repository's path"))
        return report
    linter = _Linter(root, auto_complete)
    for folder in _model_folders(root, linter):
        linter.scan(folder)
    for info in linter.models.values():
        if info.kind == "ensemble" and info.config is not None:
            check_ensemble(info, linter.models, linter.add)
        elif info.python:
            check_python(info, linter.models, linter.add)
    report.load_order = linter.graph_rules()
    report.findings = sorted(linter.findings, key=lambda f: (f.severity != ERROR, f.model, f.file, f.rule))
    report.models = sorted(linter.models)
    return report
