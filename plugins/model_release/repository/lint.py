"""Lint a Triton model repository before Triton loads it.

The rules mirror what Triton refuses at load time (names, platforms, files, versions, tensors,
ensemble wiring, cycles) and what it accepts silently but is wrong (stray versions, unused
tensors, BLS deadlock risks, names it cannot know before run time). Every finding names the rule,
the model, the file and the fix. :data:`RULES` lists them all; :func:`lint_repository` is the API.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from .callgraph import call_depths, cycles, load_order
from .config import CONFIG_FILE, ConfigParseError, parse_config
from .findings import ERROR, RULES, WARNING, Finding, LintReport
from .lint_ensemble import check_ensemble
from .lint_python import PythonAnalysis, analyze

__all__ = ["RULES", "ERROR", "WARNING", "Finding", "LintReport", "ModelInfo", "lint_repository"]

_PLATFORMS = {
    "ensemble": None,
    "onnxruntime_onnx": "onnxruntime",
    "tensorrt_plan": "tensorrt",
    "pytorch_libtorch": "pytorch",
    "tensorflow_savedmodel": "tensorflow",
    "tensorflow_graphdef": "tensorflow",
}
_DEFAULT_FILES = {
    "onnxruntime": "model.onnx",
    "tensorrt": "model.plan",
    "python": "model.py",
    "pytorch": "model.pt",
    "openvino": "model.xml",
    "tensorflow_savedmodel": "model.savedmodel",
    "tensorflow_graphdef": "model.graphdef",
}
_KNOWN_BACKENDS = {"onnxruntime", "tensorrt", "python", "pytorch", "tensorflow", "openvino", "fil", "dali", "identity", "vllm", "tensorrtllm"}
_VERSION_RE = re.compile(r"^[0-9]+$")


@dataclass
class ModelInfo:
    """What the linter learnt about one model folder."""

    name: str
    path: Path
    config_file: str
    config: mc.ModelConfig | None = None
    kind: str | None = None  # ensemble, python, onnxruntime, tensorrt, ... (the backend)
    versions: list[int] = field(default_factory=list)
    served: list[int] = field(default_factory=list)
    python: dict[int, PythonAnalysis] = field(default_factory=dict)
    deps: set[str] = field(default_factory=set)

    @property
    def instances(self) -> int:
        if self.config is None or not len(self.config.instance_group):
            return 1
        return sum(max(g.count, 1) for g in self.config.instance_group)


class _Linter:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.findings: list[Finding] = []
        self.models: dict[str, ModelInfo] = {}
        self._analyses: dict[bytes, PythonAnalysis] = {}

    def add(self, rule: str, model: str, file: str, message: str) -> None:
        self.findings.append(Finding(rule, RULES[rule][0], model, file, message))

    # --- one model -------------------------------------------------------------------------

    def scan(self, folder: Path) -> None:
        name = folder.name
        info = ModelInfo(name, folder, f"{name}/{CONFIG_FILE}")
        self.models[name] = info
        config_path = folder / CONFIG_FILE
        if not config_path.is_file():
            inferred = _inferred_backend(folder)
            if inferred:
                self.add("config-autocomplete", name, info.config_file,
                         f"no config.pbtxt: Triton will infer a {inferred} config from the model file, which the "
                         "linter cannot check; write config.pbtxt with the inputs, outputs and batch size you mean")
            else:
                self.add("config-missing", name, info.config_file,
                         "no config.pbtxt and no model file Triton could infer one from; write config.pbtxt "
                         "with name, backend (or platform), inputs and outputs")
            return
        try:
            config = info.config = parse_config(config_path.read_text(encoding="utf-8"))
        except (ConfigParseError, UnicodeDecodeError) as exc:
            self.add("config-parse", name, info.config_file, f"not a valid ModelConfig: {exc}; fix the text at that place")
            return
        if config.name and config.name != name:
            self.add("name-mismatch", name, info.config_file,
                     f"config name {config.name!r} differs from its folder {name!r}; Triton refuses it: "
                     f"rename one of them (or leave name empty)")
        self._kind(info)
        self._versions(info)
        self._tensors(info)
        self._scheduling(info)
        if info.kind == "python":
            self._python(info)

    def _kind(self, info: ModelInfo) -> None:
        config, name, file = info.config, info.name, info.config_file
        assert config is not None
        platform, backend = config.platform, config.backend
        if not platform and not backend:
            inferred = _inferred_backend(info.path)
            if inferred is None:
                self.add("platform-missing", name, file,
                         "config sets neither platform nor backend and no version folder holds a model file "
                         f"Triton knows ({', '.join(sorted(set(_DEFAULT_FILES.values())))}); add backend: \"...\"")
                return
            self.add("platform-inferred", name, file,
                     f"config sets neither platform nor backend; Triton infers backend {inferred!r} from the file "
                     f"name: write backend: \"{inferred}\" so a renamed file cannot change it")
            info.kind = inferred
            return
        if platform and platform not in _PLATFORMS:
            self.add("platform-unknown", name, file,
                     f"platform {platform!r} is not one Triton knows ({', '.join(sorted(_PLATFORMS))}); "
                     "fix it, or set backend instead")
            return
        if platform and backend and _PLATFORMS[platform] != backend:
            self.add("platform-conflict", name, file,
                     f"platform {platform!r} runs on backend {_PLATFORMS[platform]!r} but backend is {backend!r}; "
                     f"Triton loads it with {backend!r} and ignores the platform: keep one of the two")
        info.kind = "ensemble" if platform == "ensemble" else (backend or _PLATFORMS[platform])
        if info.kind not in _KNOWN_BACKENDS and info.kind != "ensemble":
            self.add("backend-unknown", name, file,
                     f"backend {info.kind!r} is not one the linter knows; check it is installed in the server "
                     "(its files are not checked)")

    def _versions(self, info: ModelInfo) -> None:
        config, name = info.config, info.name
        assert config is not None
        dirs: dict[int, Path] = {}
        for child in sorted(info.path.iterdir()):
            if not child.is_dir() or child.name.startswith("."):
                continue
            if not _VERSION_RE.fullmatch(child.name):
                self.add("version-not-numeric", name, f"{name}/{child.name}",
                         f"folder {child.name!r} is not a version number, so Triton ignores it; "
                         "rename it to a number (1, 2, ...) or move it out of the model folder")
                continue
            if child.name.startswith("0"):
                self.add("version-leading-zero", name, f"{name}/{child.name}",
                         f"version folder {child.name!r} starts with 0, so Triton ignores it; rename it to "
                         f"{int(child.name) or 1} if it is meant to be served")
                continue
            dirs[int(child.name)] = child
        info.versions = sorted(dirs)
        if not dirs:
            self.add("version-none", name, f"{name}/",
                     "no numeric version folder, so Triton has nothing to load; put the model files in "
                     f"{name}/1/ (an ensemble needs the folder too, even empty)")
            return
        policy = config.version_policy
        choice = policy.WhichOneof("policy_choice")
        if choice == "specific":
            missing = [v for v in policy.specific.versions if v not in dirs]
            info.served = sorted(v for v in set(policy.specific.versions) if v in dirs)
            if missing and not info.served:
                self.add("version-policy-none", name, info.config_file,
                         f"version_policy names versions {missing} and none of them has a folder (present: "
                         f"{info.versions}), so Triton has nothing to load; fix the policy or add the folders")
            elif missing:
                self.add("version-policy-missing", name, info.config_file,
                         f"version_policy names versions {missing} that have no folder; Triton loads only "
                         f"{info.served}: add the folders or fix the policy")
        elif choice == "all":
            info.served = list(info.versions)
        else:
            keep = policy.latest.num_versions if choice == "latest" and policy.latest.num_versions > 0 else 1
            info.served = info.versions[-keep:]
            if len(info.versions) > keep:
                self.add("version-stray", name, info.config_file,
                         f"versions {info.versions} exist and the latest policy serves {info.served}; if that is "
                         f"not meant, pin one with version_policy {{ specific {{ versions: [...] }} }} or remove the others")
        if info.kind and info.kind != "ensemble":
            expected = config.default_model_filename or _DEFAULT_FILES.get(
                config.platform if config.platform.startswith("tensorflow") else info.kind
            )
            for version in info.served:
                folder = dirs[version]
                if not any(folder.iterdir()):
                    self.add("version-empty", name, f"{name}/{version}/",
                             f"version folder {version} is empty; put {expected or 'the model files'} in it or remove it")
                elif expected and not (folder / expected).exists():
                    present = sorted(p.name for p in folder.iterdir())[:5]
                    self.add("model-file-missing", name, f"{name}/{version}/{expected}",
                             f"{info.kind} loads {expected!r} but version {version} holds {present}; add the file, "
                             "set default_model_filename, or fix the platform/backend")

    def _tensors(self, info: ModelInfo) -> None:
        config, name, file = info.config, info.name, info.config_file
        assert config is not None
        if config.max_batch_size < 0:
            self.add("batch-size-invalid", name, file, f"max_batch_size {config.max_batch_size} is negative; use 0 (no batching) or more")
        for kind, tensors in (("input", config.input), ("output", config.output)):
            seen: set[str] = set()
            for t in tensors:
                what = f"{kind} {t.name!r}"
                if t.name in seen:
                    self.add("tensor-duplicate", name, file,
                             f"two {kind}s are named {t.name!r}; Triton does not refuse it but a request carries one "
                             "tensor per name: rename or remove one")
                seen.add(t.name)
                if t.data_type == mc.TYPE_INVALID:
                    self.add("datatype-invalid", name, file, f"{what} has no data_type; set one, e.g. TYPE_FP32")
                dims = list(t.dims)
                if (not dims and not t.HasField("reshape")) or any(d == 0 or d < -1 for d in dims):
                    self.add("dims-invalid", name, file,
                             f"{what} has dims {dims}; give every dim as a positive size or -1 (variable), at least one")
                elif t.HasField("reshape") and not _same_count(dims, list(t.reshape.shape)):
                    self.add("reshape-mismatch", name, file,
                             f"{what}: dims {dims} and reshape {list(t.reshape.shape)} hold different numbers of "
                             "elements; make their products (and -1s) agree")

    def _scheduling(self, info: ModelInfo) -> None:
        config, name, file = info.config, info.name, info.config_file
        assert config is not None
        if config.HasField("dynamic_batching"):
            too_big = [s for s in config.dynamic_batching.preferred_batch_size if s > config.max_batch_size]
            if too_big:
                self.add("preferred-batch-size", name, file,
                         f"preferred_batch_size {too_big} exceeds max_batch_size {config.max_batch_size}; "
                         f"use sizes up to {config.max_batch_size}")
        for group in config.instance_group:
            if group.count < 0:
                self.add("instance-count-invalid", name, file,
                         f"instance_group count {group.count} is negative; Triton does not refuse it, but the count "
                         "means nothing: use 1 or more")
        if config.HasField("ensemble_scheduling") and info.kind not in (None, "ensemble"):
            self.add("scheduling-not-ensemble", name, file,
                     f"ensemble_scheduling is set but the platform is not 'ensemble' ({info.kind}); "
                     "set platform: \"ensemble\" or remove the steps")
        if info.kind == "ensemble":
            info.deps.update(step.model_name for step in config.ensemble_scheduling.step)

    def _python(self, info: ModelInfo) -> None:
        assert info.config is not None
        filename = info.config.default_model_filename or "model.py"
        for version in info.served:
            path = info.path / str(version) / filename
            if not path.is_file():
                continue  # model-file-missing says so
            source = path.read_bytes()
            key = hashlib.sha1(source).digest()
            if key not in self._analyses:
                self._analyses[key] = analyze(source.decode("utf-8", errors="replace"))
            info.python[version] = self._analyses[key]
            for call in self._analyses[key].bls_calls:
                info.deps.update(call.targets or ())

    # --- python rules ----------------------------------------------------------------------

    def python_rules(self, info: ModelInfo) -> None:
        assert info.config is not None
        decoupled = info.config.model_transaction_policy.decoupled
        for version, a in info.python.items():
            file = f"{info.name}/{version}/{info.config.default_model_filename or 'model.py'}"
            if a.syntax_error:
                self.add("python-syntax", info.name, file, f"does not parse ({a.syntax_error}); fix the syntax")
                continue
            if not a.has_class:
                self.add("python-no-model-class", info.name, file,
                         "defines no class TritonPythonModel, which the python backend instantiates; add it")
            elif a.execute_line is None:
                self.add("python-no-execute", info.name, file,
                         "TritonPythonModel has no execute(self, requests) method; add one")
            for func, line in a.awaits_in_sync:
                self.add("python-await-in-sync", info.name, file,
                         f"line {line}: await in {func}(), which is not async; declare it 'async def {func}' "
                         "(Triton supports async def execute)")
            for undefined, line in a.undefined:
                self.add("python-undefined-name", info.name, file,
                         f"line {line}: name {undefined!r} is used but never defined or imported; import or define it")
            if a.execute_line is not None:
                if decoupled and a.execute_returns_value:
                    self.add("decoupled-returns", info.name, file,
                             f"line {a.execute_returns_value}: the model is decoupled but execute returns a value; "
                             "send responses through request.get_response_sender() and return None")
                elif not decoupled and not a.execute_returns:
                    self.add("python-no-responses", info.name, file,
                             f"line {a.execute_line}: execute never returns; return one InferenceResponse per "
                             "request (or make the model decoupled)")
            for call in a.bls_calls:
                self._bls_call(info, file, call)

    def _bls_call(self, info: ModelInfo, file: str, call: Any) -> None:
        if call.targets is None:
            self.add("bls-target-dynamic", info.name, file,
                     f"line {call.line}: model_name={call.expression} is computed at run time, so the linter cannot "
                     "check the target or its load order; load that model before this one")
            return
        for target in call.targets:
            if target == info.name:
                self.add("bls-self-call", info.name, file,
                         f"line {call.line}: the model calls itself through BLS, which deadlocks once its instances "
                         "are all waiting on themselves; call another model")
                continue
            other = self.models.get(target)
            if other is None:
                self.add("bls-target-missing", info.name, file,
                         f"line {call.line}: BLS call to model {target!r}, which is not in the repository "
                         f"(models: {', '.join(sorted(self.models))}); add it or fix the name")
                continue
            if other.config is not None and call.outputs is not None:
                known = {t.name for t in other.config.output}
                unknown = [o for o in call.outputs if o not in known]
                if unknown:
                    self.add("bls-output-unknown", info.name, file,
                             f"line {call.line}: requests outputs {unknown} of {target!r}, which has {sorted(known)}; "
                             "request outputs it has")

    # --- the call graph --------------------------------------------------------------------

    def graph_rules(self) -> list[str]:
        graph = {n: sorted(d for d in m.deps if d in self.models and d != n) for n, m in self.models.items()}
        for name, m in self.models.items():
            if m.kind == "ensemble" and name in m.deps:
                self.add("dependency-cycle", name, m.config_file,
                         "an ensemble step names the ensemble itself; step to another model")
        for component in cycles(graph):
            first = component[0]
            self.add("dependency-cycle", first, self.models[first].config_file,
                     f"models {component} depend on each other (ensemble steps or BLS calls), so none can load "
                     "first; break the cycle")
        depths = call_depths(graph)
        for name, m in self.models.items():
            blocking = [a.blocking_exec for a in m.python.values() if a.blocking_exec and a.bls_calls]
            if blocking and m.instances <= depths[name]:
                self.add("bls-blocking-depth", name, m.config_file,
                         f"blocking exec() (line {blocking[0]}) holds one of its {m.instances} instance(s) through "
                         f"{depths[name]} nested call level(s); give it at least {depths[name] + 1} instances "
                         "(instance_group count) or use await ...async_exec() in async def execute")
        return load_order(graph)


def _inferred_backend(folder: Path) -> str | None:
    """The backend Triton would infer from a model file in a version folder, if any."""
    for backend in ("onnxruntime", "tensorrt", "python", "pytorch"):
        if any(folder.glob(f"*/{_DEFAULT_FILES[backend]}")):
            return backend
    return None


def _same_count(dims: list[int], reshape: list[int]) -> bool:
    if -1 in dims or -1 in reshape:
        return (-1 in dims) == (-1 in reshape)
    return math.prod(dims) == math.prod(reshape)


def lint_repository(path: str | Path) -> LintReport:
    """Lint the Triton model repository at ``path``.

    Args:
        path: the repository folder (one sub-folder per model).

    Returns:
        The findings (errors and warnings) and the load order, dependencies first.
    """
    root = Path(path)
    report = LintReport(str(root))
    if not root.is_dir():
        report.findings.append(Finding("repo-not-found", ERROR, "", str(root),
                                       f"{str(root)!r} is not a folder; give the model repository's path"))
        return report
    linter = _Linter(root)
    for folder in sorted(root.iterdir()):
        if folder.is_dir() and not folder.name.startswith("."):
            linter.scan(folder)
    for info in linter.models.values():
        if info.kind == "ensemble" and info.config is not None:
            check_ensemble(info, linter.models, linter.add)
        elif info.kind == "python" and info.config is not None:
            linter.python_rules(info)
    report.load_order = linter.graph_rules()
    report.findings = sorted(linter.findings, key=lambda f: (f.severity != ERROR, f.model, f.file, f.rule))
    report.models = sorted(linter.models)
    return report
