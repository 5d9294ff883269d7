"""Lint findings, the report, and the table of rules (id -> severity, what it catches)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

ERROR, WARNING = "error", "warning"

#: rule id -> (severity, what it catches)
RULES: dict[str, tuple[str, str]] = {
    "repo-not-found": (ERROR, "the repository path is not a folder"),
    "config-missing": (ERROR, "a model folder without config.pbtxt or a model file Triton could infer one from"),
    "config-autocomplete": (WARNING, "no config.pbtxt: Triton infers one from the model file, unchecked"),
    "config-parse": (ERROR, "config.pbtxt is not a valid ModelConfig"),
    "name-mismatch": (ERROR, "config name differs from the folder name"),
    "platform-missing": (ERROR, "neither platform nor backend, nor a model file to infer one from"),
    "platform-inferred": (WARNING, "no platform or backend: Triton infers the backend from the file name"),
    "platform-unknown": (ERROR, "a platform Triton does not know"),
    "platform-conflict": (WARNING, "platform and backend disagree: Triton goes by the backend"),
    "backend-unknown": (WARNING, "a backend this linter does not know"),
    "scheduling-not-ensemble": (ERROR, "ensemble_scheduling on a model that is not an ensemble"),
    "model-file-missing": (ERROR, "a served version folder lacks the file its platform loads"),
    "version-none": (ERROR, "no numeric version folder"),
    "version-empty": (ERROR, "a served version folder is empty"),
    "version-not-numeric": (WARNING, "a version folder Triton ignores because it is not a number"),
    "version-leading-zero": (WARNING, "a version folder starting with 0, which Triton ignores"),
    "version-policy-missing": (WARNING, "a specific version policy names a missing version (others load)"),
    "version-policy-none": (ERROR, "a specific version policy names no existing version"),
    "version-stray": (WARNING, "several versions under a latest policy: the highest is served"),
    "batch-size-invalid": (ERROR, "max_batch_size below 0"),
    "preferred-batch-size": (ERROR, "a preferred batch size above max_batch_size"),
    "instance-count-invalid": (WARNING, "an instance group with a negative count"),
    "tensor-duplicate": (WARNING, "two inputs or two outputs with the same name"),
    "datatype-invalid": (ERROR, "a tensor without a data type"),
    "dims-invalid": (ERROR, "a tensor with no dims, a 0 or a value below -1"),
    "reshape-mismatch": (ERROR, "reshape whose element count differs from dims"),
    "ensemble-instance-group": (ERROR, "instance_group on an ensemble"),
    "ensemble-no-steps": (ERROR, "an ensemble without steps"),
    "ensemble-step-missing": (ERROR, "an ensemble step naming a model not in the repository"),
    "ensemble-version-missing": (ERROR, "an ensemble step asking for a version the member does not serve"),
    "ensemble-batch-size": (ERROR, "an ensemble batching beyond a member's max_batch_size"),
    "ensemble-map-unknown": (ERROR, "a map key that is not a tensor of the member"),
    "ensemble-input-unmapped": (ERROR, "a member input missing from its step's input_map"),
    "ensemble-tensor-double": (ERROR, "an ensemble tensor with two producers"),
    "ensemble-tensor-unproduced": (ERROR, "an ensemble tensor nobody produces"),
    "ensemble-input-unused": (ERROR, "an ensemble input no step reads"),
    "ensemble-tensor-unused": (ERROR, "an intermediate tensor nobody reads"),
    "ensemble-dtype-mismatch": (ERROR, "producer and consumer data types differ"),
    "ensemble-shape-mismatch": (ERROR, "producer and consumer shapes differ"),
    "dependency-cycle": (ERROR, "models that depend on each other (ensemble steps, BLS calls)"),
    "python-syntax": (ERROR, "model.py does not parse"),
    "python-no-model-class": (ERROR, "model.py has no TritonPythonModel class"),
    "python-no-execute": (ERROR, "TritonPythonModel has no execute method"),
    "python-await-in-sync": (ERROR, "await in a function that is not async"),
    "python-undefined-name": (ERROR, "a name used but never defined or imported"),
    "python-no-responses": (ERROR, "execute of a non-decoupled model returns nothing"),
    "decoupled-returns": (ERROR, "execute of a decoupled model returns responses instead of None"),
    "bls-target-missing": (ERROR, "a BLS call to a model not in the repository"),
    "bls-target-dynamic": (WARNING, "a BLS call whose model name is computed at run time"),
    "bls-output-unknown": (ERROR, "a BLS call requesting an output the target does not have"),
    "bls-self-call": (ERROR, "a model calling itself through BLS (deadlock)"),
    "bls-blocking-depth": (WARNING, "blocking exec with no more instances than nested call levels"),
}


@dataclass(frozen=True)
class Finding:
    """One problem: which rule, how bad, in which model and file, and what to do."""

    rule: str
    severity: str
    model: str
    file: str
    message: str

    def __str__(self) -> str:
        return f"{self.severity}: {self.file}: [{self.rule}] model {self.model!r}: {self.message}"

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass
class LintReport:
    """All findings on a repository, and the order to load its models in."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    load_order: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == WARNING]

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "ok": self.ok,
            "errors": [f.to_dict() for f in self.errors],
            "warnings": [f.to_dict() for f in self.warnings],
            "load_order": list(self.load_order),
            "models": list(self.models),
        }
