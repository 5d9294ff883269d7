"""The typed values that pass between stages.

Each stage reads the previous stage's result and the release workspace, never another stage's
internals. Results are small and JSON-serialisable (``to_dict`` / ``from_dict``) so Airflow can
carry them in XCom; large artifacts stay in the workspace and are named by path and digest.
A result carries what later stages need (paths, labels, output roles), so no stage re-derives
another's rules, and says in one line what happened (``headline()``), which the pipeline's
stage runner logs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T", bound="_Serialisable")


class _Serialisable:
    """to_dict / from_dict for (nested) dataclasses of plain JSON values."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any]) -> T:
        kwargs: dict[str, Any] = {}
        hints = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        for name, value in data.items():
            if name not in hints:
                continue  # tolerate fields written by a newer version
            f = hints[name]
            if f.type in ("list[TensorSpec]",) and value is not None:
                value = [TensorSpec.from_dict(v) for v in value]
            elif f.type == "tuple[int, ...]":
                value = tuple(value)
            kwargs[name] = value
        return cls(**kwargs)


@dataclass(frozen=True)
class TensorSpec(_Serialisable):
    """One input or output tensor as Triton sees it.

    Attributes:
        name: the Triton-valid tensor name.
        datatype: Triton's wire data type (``FP32``, ``INT64``, ``BYTES``, ...).
        dims: the shape without the batch dimension; -1 marks a variable dimension.
        source_name: the name in the model or its MLflow signature, when it differs.
    """

    name: str
    datatype: str
    dims: tuple[int, ...]
    source_name: str | None = None

    @property
    def original_name(self) -> str:
        return self.source_name or self.name


@dataclass
class IntakeResult(_Serialisable):
    """One immutable MLflow model version, downloaded into the workspace."""

    model_name: str
    version: str
    alias: str | None
    run_id: str | None
    source: str
    flavor: str
    model_dir: str
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    content_digest: str
    metrics: dict[str, float] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    name_map: dict[str, str] = field(default_factory=dict)
    classes: list[Any] | None = None
    tracking_uri: str | None = None
    #: a cascade's or fan-out's members: key -> {"lineage": {...}, "intake": this class as a dict for a
    #: registered member, else None} (:func:`model_release.intake.members.intake_members`)
    members: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def model_uri(self) -> str:
        return f"models:/{self.model_name}/{self.version}"

    def headline(self) -> str:
        via = f" (alias {self.alias})" if self.alias else ""
        return f"{self.model_uri}{via}, flavor {self.flavor}, run {self.run_id or '-'}"


@dataclass
class ExportResult(_Serialisable):
    """An ONNX file that passed the checker and the parity gate."""

    onnx_path: str
    onnx_sha256: str
    opset: int
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    parity: dict[str, dict[str, Any]]
    golden_path: str
    golden_rows: int
    reference_path: str = ""
    converter: dict[str, str] = field(default_factory=dict)
    cached: bool = False
    reproduce: str | None = None
    #: parity.json: the parity figures, the golden set's origin and notes
    parity_report: str = ""
    #: truth.npz (``target``: the ground truth of each golden row) when the spec names golden.target
    truth_path: str = ""
    #: a pipeline's registered members, key -> this class as a dict (their ONNX files under export/members/<key>/)
    members: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: a cascade's or fan-out's parity reference for the canary, its members' native models composed as the
    #: pipeline composes them (:mod:`model_release.model.composed`): path, description, rows; {} for other shapes
    composed_reference: dict[str, Any] = field(default_factory=dict)
    #: the opset the spec asked for (``export.opset``); ``opset`` is the one shipped
    opset_requested: int | None = None
    #: parity at other lengths of each variable axis and other batch sizes: one record per length
    lengths: list[dict[str, Any]] = field(default_factory=list)
    #: what the repository shape serves of the model (:mod:`model_release.export.heads`): {"output": its name in the
    #: model, "role": probabilities, logits or embedding, "why": how that was decided}; {} for a shape that serves all
    head: dict[str, str] = field(default_factory=dict)

    def headline(self) -> str:
        how = self.converter.get("parity") or f"checked on {self.golden_rows} golden rows"
        asked = (f" (export.opset {self.opset_requested} not reached: {self.converter.get('note.opset', 'see export.json')})"
                 if self.opset_requested not in (None, self.opset) else "")
        variable = [r for r in self.lengths if r.get("axes") != ["the batch axis"]]
        if variable:
            how += "; variable axes also at " + "; ".join(f"{', '.join(r['axes'])} = {r['length']}" for r in variable)
        return f"ONNX opset {self.opset}{asked} passed parity ({how}){'; cached ONNX reused' if self.cached else ''}"


@dataclass
class TensorRTResult(_Serialisable):
    """A TensorRT plan, or the reason none was built."""

    built: bool
    reason: str | None = None
    plan_path: str | None = None
    plan_sha256: str | None = None
    precision: str | None = None
    environment: dict[str, str] = field(default_factory=dict)
    parity: dict[str, dict[str, Any]] = field(default_factory=dict)

    def headline(self) -> str:
        return f"built {self.plan_path} ({self.precision})" if self.built else f"no plan: {self.reason}"


@dataclass
class AssembleResult(_Serialisable):
    """A versioned Triton model repository, lint-clean, with its manifest."""

    repository_dir: str
    manifest_path: str
    entry_model: str
    load_order: list[str]
    models: dict[str, int]
    warnings: list[str] = field(default_factory=list)
    #: role -> the entry model's output that plays it (see :mod:`model_release.model.roles`)
    roles: dict[str, str] = field(default_factory=dict)
    #: the label names the classifier answers, in class order (None for other shapes)
    labels: list[str] | None = None
    #: the native class values, in the same order as ``labels`` (the reference holds these)
    classes: list[Any] | None = None
    #: model -> the models it calls (ensemble steps and BLS targets): where a request's time goes
    calls: dict[str, list[str]] = field(default_factory=dict)

    def headline(self) -> str:
        return f"{len(self.models)} models, entry {self.entry_model}, load order {self.load_order}"


@dataclass
class CanaryResult(_Serialisable):
    """The canary's verdict and where its report is."""

    passed: bool
    report_json: str
    report_html: str | None
    summary: str
    figures: dict[str, Any] = field(default_factory=dict)
    server: dict[str, Any] = field(default_factory=dict)
    #: the release the channel's pointer named when the canary read it (None: no pointer); promotion
    #: replaces only this release, so a candidate is never promoted over a champion it was not judged against
    champion_release: str | None = None
    #: served (from the store), native (MLflow alias, not served) or none (first release)
    champion_kind: str = "none"
    #: whether the channel's pointer was read (then champion_release None means the channel had no release)
    champion_pinned: bool = False
    #: the repository to ship when the canary tuned its serving configuration (canary.tune); None: the assembled one
    repository_dir: str | None = None
    #: ``passed``, ``rejected`` or ``inconclusive`` (not passed, not rejected: a later canary decides); empty in a
    #: result written before the verdict was kept (``passed`` says all there was)
    verdict: str = ""

    def headline(self) -> str:
        return self.summary


@dataclass
class PromoteResult(_Serialisable):
    """What was promoted where, and what the channel pointed at before."""

    release_id: str
    store_uri: str
    release_prefix: str
    channel: str
    previous_release: str | None
    objects: int
    bytes: int
    uploaded: int = 0
    skipped: int = 0
    mlflow_alias: str | None = None

    def headline(self) -> str:
        return (f"{self.release_id} -> {self.release_prefix} (channel {self.channel}, was {self.previous_release}; "
                f"{self.objects} objects, {self.uploaded} uploaded, {self.skipped} already there)")
