"""The assemble stage: a versioned Triton model repository and its manifest, lint-clean.

Shapes (``repository.shape`` in the spec) and the models each writes, ``N`` being the spec's name:

- ``single``: ``N``, the ONNX model (or TensorRT plan) itself, outputs unchanged;
- ``classifier``: the ensemble ``N`` = [``N_preprocess`` (python, optional)] -> ``N_model`` ->
  ``N_postprocess`` (python: top-k label names, and the softmax of a model that answers raw scores,
  :mod:`model_release.export.heads`); outputs ``probabilities`` and ``label``;
- ``embedding``: ``N``, the ONNX model (or TensorRT plan) itself; its vector output plays the
  ``embedding`` role (judged as vectors against the champion);
- ``cascade``: the BLS router ``N`` over ``N_small`` and ``N_large`` (see ``CascadeSpec`` in :mod:`..spec`);
  outputs the cascade output and ``answered_by``;
- ``fanout``: the BLS stage ``N`` over ``N_<member>`` for every member; outputs the combined output.

Every model lives in ``models/<model>/<version>/`` with the version from ``repository.model_version``
(default 1) and an explicit version policy naming it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from ..model.dtypes import FLOAT_TYPES, numpy_from_triton
from ..errors import AssembleError, LintError
from ..model.roles import ANSWERED_BY, EMBEDDING, LABEL, LOGITS, PROBABILITIES, VARIABLE
from ..spec import RELEASE, CascadeSpec, FanoutSpec, ReleaseSpec
from ..stages import REPOSITORY
from ..types import AssembleResult, ExportResult, IntakeResult, TensorRTResult, TensorSpec
from ..workspace import Workspace, link_or_copy
from . import config as cfg
from .lint import LintReport, lint_repository
from .lint.callgraph import call_depths
from .manifest import build_manifest, write_manifest
from .onnx_io import onnx_io
from .render import render, template_root
from .warmup_samples import add_warmup, is_warmable_leaf



@dataclass
class ModelDir:
    """One model to write: its config and the files of its version folder (name -> bytes or a file to copy)."""

    name: str
    config: mc.ModelConfig
    files: dict[str, bytes | Path] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)  # models it calls through BLS


@dataclass
class _Leaf:
    """A model file and its tensors."""

    path: Path
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    plan: bool = False


def assemble(
    spec: ReleaseSpec,
    intake: IntakeResult,
    export: ExportResult,
    ws: Workspace,
    *,
    tensorrt: TensorRTResult | None = None,
) -> AssembleResult:
    """Write the release's Triton repository (``models/``) and manifest (``release.json``).

    Args:
        spec: the release spec (``repository`` decides the shape).
        intake: the intake result (classes, lineage).
        export: the exported ONNX model and its tensors.
        ws: the release workspace; writes into ``ws.stage_dir("repository", fresh=True)``.
        tensorrt: when built, the leaf serves its plan instead of the ONNX file.

    Returns:
        Where the repository and manifest are, the entry model, load order and versions.

    Raises:
        SpecError: the cascade or fanout block is invalid.
        AssembleError: the spec, template or model disagree (the message says which and how to fix).
        LintError: the written repository has errors Triton would reject (each one listed).
    """
    release_dir = ws.stage_dir(REPOSITORY, fresh=True)
    models_dir = release_dir / "models"
    version = spec.repository.model_version or 1
    entry = spec.name
    models, roles, labels = _models_of_shape(spec, intake, _release_leaf(export, tensorrt), export)
    _size_bls_instances(models, spec.repository.instances)
    calls = {m.name: sorted({*m.calls, *(s.model_name for s in m.config.ensemble_scheduling.step)}) for m in models}
    for model in models:
        if is_warmable_leaf(model.config):
            add_warmup(model.config, _inside(models_dir, model.name), export.golden_path)
        _write_model(models_dir, model, version)
    report = _lint_written(models_dir)
    versions = {model.name: version for model in models}
    classes = list(intake.classes) if intake.classes is not None else None
    manifest = build_manifest(
        release_id=ws.release_id,
        spec=spec,
        intake=intake,
        export=export,
        tensorrt=tensorrt,
        entry_model=entry,
        load_order=report.load_order,
        models=versions,
        release_dir=release_dir,
        roles=roles,
        labels=labels,
        classes=classes,
        calls=calls,
    )
    manifest_path = release_dir / "release.json"
    write_manifest(manifest_path, manifest)
    return AssembleResult(
        repository_dir=str(models_dir.resolve()),
        manifest_path=str(manifest_path.resolve()),
        entry_model=entry,
        load_order=report.load_order,
        models=versions,
        warnings=[str(finding) for finding in report.warnings],
        roles=roles,
        labels=labels,
        classes=classes,
        calls=calls,
    )


# --- the models of each shape -------------------------------------------------------------------


def _models_of_shape(
    spec: ReleaseSpec, intake: IntakeResult, release_leaf: _Leaf, export: ExportResult | None = None
) -> tuple[list[ModelDir], dict[str, str], list[str] | None]:
    """The models of the spec's repository shape, the output roles they play, and the labels (classifier)."""
    shape = spec.repository.shape
    if shape == "single":
        return [_leaf_model(spec.name, release_leaf, spec)], _single_roles(release_leaf.outputs), None
    if shape == "classifier":
        models, labels = _classifier(spec, intake, release_leaf, _head(export))
        return models, {PROBABILITIES: PROBABILITIES, LABEL: LABEL}, labels
    if shape == "embedding":
        vector = _head(export).get("output") or EMBEDDING
        _probabilities(release_leaf, f"model {intake.model_name!r}", shape, vector)  # one floating vector per row
        return [_leaf_model(spec.name, release_leaf, spec)], {EMBEDDING: vector}, None
    if shape == "cascade":
        block = _block(spec.repository.cascade, shape)
        models = _cascade(spec, release_leaf, block, export)
        return models, {PROBABILITIES: block.output, ANSWERED_BY: ANSWERED_BY}, _pipeline_labels(spec, intake, models[-1])
    if shape == "fanout":
        block = _block(spec.repository.fanout, shape)
        models = _fanout(spec, release_leaf, block, export)
        return models, {PROBABILITIES: block.output}, _pipeline_labels(spec, intake, models[-1])
    raise AssembleError(  # pragma: no cover - the spec's Literal refuses it first
        f"repository.shape {shape!r} is unknown; valid: classifier, embedding, cascade, fanout, single")


def _lint_written(models_dir: Path) -> LintReport:
    """Lint the written repository; its report, or LintError listing what Triton would reject."""
    report = lint_repository(models_dir)
    if report.errors:
        raise LintError(
            f"the assembled repository {models_dir} has {len(report.errors)} error(s) Triton would reject; "
            f"they come from the templates under {template_root()} with this spec: fix the template or the "
            "spec as each finding says, then assemble again:\n" + "\n".join(f"  {finding}" for finding in report.errors),
        )
    return report


def _head(export: ExportResult | None) -> dict[str, str]:
    """What the export decided the shape serves (:mod:`model_release.export.heads`): the output and its role."""
    return dict(export.head) if export is not None and export.head else {}


def _single_roles(outputs: list[TensorSpec]) -> dict[str, str]:
    """Outputs named after a role play it; a lone floating output of a model without classes is its prediction."""
    roles = {r: r for r in (PROBABILITIES, LABEL, VARIABLE) if any(t.name == r for t in outputs)}
    if not roles and len(outputs) == 1 and outputs[0].datatype in FLOAT_TYPES:
        roles[VARIABLE] = outputs[0].name
    return roles


def _block(block: CascadeSpec | FanoutSpec | None, shape: str) -> Any:
    if block is None:  # the spec refuses this at load; a spec built by hand may still lack it
        raise AssembleError(f"repository.shape is {shape!r} but repository.{shape} is missing")
    return block


def _release_leaf(export: ExportResult, tensorrt: TensorRTResult | None) -> _Leaf:
    if tensorrt is not None and tensorrt.built:
        if not tensorrt.plan_path or not Path(tensorrt.plan_path).is_file():
            raise AssembleError(
                f"tensorrt.built is true but its plan {tensorrt.plan_path!r} is not a file; rerun the tensorrt stage"
            )
        return _Leaf(Path(tensorrt.plan_path), list(export.inputs), list(export.outputs), plan=True)
    if not Path(export.onnx_path).is_file():
        raise AssembleError(f"export.onnx_path {export.onnx_path!r} is not a file; rerun the export stage")
    return _Leaf(Path(export.onnx_path), list(export.inputs), list(export.outputs))


def _member_leaf(spec: ReleaseSpec, key: str, source: str, release: _Leaf, export: ExportResult | None) -> _Leaf:
    """The release's leaf, a registered member's exported ONNX file (export/members/<key>/), or the named file."""
    if source == RELEASE:
        return release
    if source.startswith("models:/"):
        exported = (export.members if export is not None else {}).get(key)
        if exported is None or not Path(exported["onnx_path"]).is_file():
            raise AssembleError(f"member {key!r} ({source}) has no exported ONNX file in the export result; "
                                "rerun the intake and export stages")
        return _Leaf(Path(exported["onnx_path"]), [TensorSpec.from_dict(t) for t in exported["inputs"]],
                     [TensorSpec.from_dict(t) for t in exported["outputs"]])
    path = spec.resolve_path(source)
    inputs, outputs = onnx_io(path)
    return _Leaf(path, inputs, outputs)


def _leaf_model(name: str, leaf: _Leaf, spec: ReleaseSpec) -> ModelDir:
    repo = spec.repository
    config = mc.ModelConfig(name=name, max_batch_size=repo.max_batch_size)
    if leaf.plan:
        config.platform = "tensorrt_plan"
        filename = "model.plan"
    else:
        config.backend = "onnxruntime"
        filename = "model.onnx"
    for t in leaf.inputs:
        cfg.add_input(config, t.name, t.datatype, t.dims)
    for t in leaf.outputs:
        cfg.add_output(config, t.name, t.datatype, t.dims)
    kind = mc.ModelInstanceGroup.KIND_GPU if leaf.plan else mc.ModelInstanceGroup.KIND_AUTO
    config.instance_group.add(count=repo.instances, kind=kind)
    _dynamic_batching(config, spec)
    return ModelDir(name, config, {filename: leaf.path})


def _dynamic_batching(config: mc.ModelConfig, spec: ReleaseSpec) -> None:
    batching = spec.repository.dynamic_batching
    if batching is None or config.max_batch_size == 0:
        return
    too_big = [size for size in batching.preferred_batch_size if size > config.max_batch_size]
    if too_big:
        raise AssembleError(
            f"repository.dynamic_batching.preferred_batch_size {too_big} exceed repository.max_batch_size "
            f"{config.max_batch_size}; use sizes up to {config.max_batch_size}"
        )
    config.dynamic_batching.max_queue_delay_microseconds = batching.max_queue_delay_microseconds
    config.dynamic_batching.preferred_batch_size.extend(batching.preferred_batch_size)


def _python_model(
    name: str, spec: ReleaseSpec, inputs: list[TensorSpec], outputs: list[TensorSpec], source: str,
    *, data: dict[str, bytes] | None = None, keep_on_device: bool = False,
) -> ModelDir:
    config = mc.ModelConfig(name=name, backend="python", max_batch_size=spec.repository.max_batch_size)
    for t in inputs:
        cfg.add_input(config, t.name, t.datatype, t.dims)
    for t in outputs:
        cfg.add_output(config, t.name, t.datatype, t.dims)
    config.instance_group.add(count=spec.repository.instances, kind=mc.ModelInstanceGroup.KIND_CPU)
    if keep_on_device:  # BLS stages: let GPU tensors reach model.py as they are (DLPack), no host copy
        config.parameters["FORCE_CPU_ONLY_INPUT_TENSORS"].string_value = "no"
    return ModelDir(name, config, {"model.py": source.encode("utf-8"), **(data or {})})


def _ensemble(name: str, spec: ReleaseSpec, inputs: list[TensorSpec], outputs: list[TensorSpec], steps: list[tuple[str, dict[str, str], dict[str, str]]]) -> ModelDir:
    config = mc.ModelConfig(name=name, platform="ensemble", max_batch_size=spec.repository.max_batch_size)
    for t in inputs:
        cfg.add_input(config, t.name, t.datatype, t.dims)
    for t in outputs:
        cfg.add_output(config, t.name, t.datatype, t.dims)
    for model_name, input_map, output_map in steps:
        step = config.ensemble_scheduling.step.add(model_name=model_name, model_version=-1)
        step.input_map.update(input_map)
        step.output_map.update(output_map)
    return ModelDir(name, config, {".keep": b""})  # Triton wants the (empty) version folder to exist


def _probabilities(leaf: _Leaf, what: str, shape: str, output: str = PROBABILITIES) -> TensorSpec:
    for t in leaf.outputs:
        if t.name == output:
            if t.datatype not in ("FP32", "FP16", "FP64") or len(t.dims) != 1:
                raise AssembleError(
                    f"{what}: output {output!r} is {t.datatype} {list(t.dims)}, not a float vector of class "
                    f"scores per row; the {shape!r} shape needs one: use repository.shape: single"
                )
            return t
    names = [t.name for t in leaf.outputs]
    raise AssembleError(
        f"{what} has no {output!r} output (its outputs: {names}); the {shape!r} shape needs class "
        "probabilities (a regressor has none): use repository.shape: single"
    )


def _classifier(spec: ReleaseSpec, intake: IntakeResult, leaf: _Leaf, head: dict[str, str]) -> tuple[list[ModelDir], list[str]]:
    repo, name = spec.repository, spec.name
    probs = _probabilities(leaf, f"model {intake.model_name!r}", "classifier", head.get("output", PROBABILITIES))
    labels = _labels(spec, intake, probs)
    classes = len(labels)
    if repo.top_k > classes:
        raise AssembleError(f"repository.top_k {repo.top_k} exceeds the {classes} classes; use 1..{classes}")
    logits = head.get("role") == LOGITS
    scores = LOGITS if logits else PROBABILITIES  # the tensor from the model to the postprocess
    clash = {t.name for t in leaf.inputs} & {PROBABILITIES, LABEL, scores}
    if clash:
        raise AssembleError(f"model inputs {sorted(clash)} clash with the classifier's output names; rename them in the model")
    model, post, pre = f"{name}_model", f"{name}_postprocess", f"{name}_preprocess"
    probs_c = TensorSpec(PROBABILITIES, probs.datatype, (classes,))
    label = TensorSpec(LABEL, "BYTES", (repo.top_k,))
    models = [_leaf_model(model, leaf, spec)]
    steps = []
    feed = {t.name: t.name for t in leaf.inputs}
    if repo.preprocess:
        source = render(
            "classifier/preprocess.py.j2", ensemble=name,
            inputs=[(t.name, numpy_from_triton(t.datatype).name) for t in leaf.inputs],
        )
        models.append(_python_model(pre, spec, leaf.inputs, leaf.inputs, source))
        feed = {t.name: f"preprocessed_{t.name}" for t in leaf.inputs}
        steps.append((pre, {t.name: t.name for t in leaf.inputs}, feed))
    steps.append((model, feed, {probs.name: scores}))
    steps.append((post, {scores: scores}, {LABEL: LABEL, **({PROBABILITIES: PROBABILITIES} if logits else {})}))
    source = render("classifier/postprocess.py.j2", ensemble=name, scores=scores, probabilities=PROBABILITIES, label=LABEL,
                    top_k=repo.top_k, logits=logits)
    data = {"labels.json": (json.dumps({"labels": labels}, indent=2, ensure_ascii=False) + "\n").encode("utf-8")}
    post_inputs = [TensorSpec(scores, probs.datatype, (classes,))]
    models.append(_python_model(post, spec, post_inputs, [probs_c, label] if logits else [label], source, data=data))
    models.append(_ensemble(name, spec, list(leaf.inputs), [probs_c, label], steps))
    return models, labels


def _labels(spec: ReleaseSpec, intake: IntakeResult, probs: TensorSpec) -> list[str]:
    width = probs.dims[0]
    if spec.repository.labels is not None:
        labels = list(spec.repository.labels)
        origin = "repository.labels"
    elif intake.classes is not None:
        labels = [str(c) for c in intake.classes]
        origin = f"the classes of model {intake.model_name!r}"
    elif width > 0:
        labels = [str(i) for i in range(width)]
        origin = "the class indices"
    else:
        raise AssembleError(
            f"model {intake.model_name!r} records no classes and its {PROBABILITIES!r} output has no fixed width; "
            "give repository.labels in the spec"
        )
    count = intake.classes and len(intake.classes) or width
    if count > 0 and len(labels) != count:
        raise AssembleError(
            f"{origin} has {len(labels)} names but the model has {count} classes; give exactly {count} labels "
            "in repository.labels, in class order"
        )
    if width > 0 and len(labels) != width:
        raise AssembleError(f"{origin} has {len(labels)} names but output {PROBABILITIES!r} has width {width}; fix the labels or the model")
    if len(set(labels)) != len(labels):
        raise AssembleError(f"{origin} repeats a name ({labels}); labels must be distinct")
    return labels


def _pipeline_labels(spec: ReleaseSpec, intake: IntakeResult, entry: ModelDir) -> list[str] | None:
    """A cascade's or fan-out's class names: ``repository.labels``, checked as a classifier's are against the
    model's classes and the width of the scores the entry model serves; None without them (class values).

    They name the classes of the served scores, so the canary reads a ground truth given in label names
    (``golden.target``) as it does a classifier's; the served outputs stay the scores."""
    if spec.repository.labels is None:
        return None
    scores = entry.config.output[0]
    return _labels(spec, intake, TensorSpec(scores.name, "FP32", (int(scores.dims[0]),)))


def _same_inputs(members: dict[str, _Leaf]) -> list[TensorSpec]:
    (first_name, first), *rest = members.items()
    want = [(t.name, t.datatype, len(t.dims)) for t in first.inputs]
    for member, leaf in rest:
        got = [(t.name, t.datatype, len(t.dims)) for t in leaf.inputs]
        if got != want:
            raise AssembleError(
                f"member {member!r} ({leaf.path.name}) takes inputs {got} but {first_name!r} takes {want}; "
                "every member must take the same inputs (name, type, rank)"
            )
    return list(first.inputs)


def _member_output(members: dict[str, _Leaf], output: str, shape: str) -> TensorSpec:
    specs = {member: _probabilities(leaf, f"member {member!r} ({leaf.path.name})", shape, output) for member, leaf in members.items()}
    (first_name, first), *rest = specs.items()
    for member, t in rest:
        if t.datatype != first.datatype or (t.dims[0] != first.dims[0] and -1 not in (t.dims[0], first.dims[0])):
            raise AssembleError(
                f"output {output!r} of member {member!r} is {t.datatype} {list(t.dims)} but of {first_name!r} "
                f"{first.datatype} {list(first.dims)}; the members' outputs must agree"
            )
    width = max(t.dims[0] for t in specs.values())
    return TensorSpec(output, first.datatype, (width,))


def _size_bls_instances(models: list[ModelDir], instances: int) -> None:
    """Give every BLS stage more instances than call levels below it (from the call graph).

    A stage holds an instance while its nested calls run; with no more instances than nesting
    levels, concurrent requests can leave every instance waiting.
    """
    graph = {m.name: list(m.calls) for m in models}
    depths = call_depths(graph)
    for model in models:
        if model.calls:
            model.config.instance_group[0].count = max(instances, depths[model.name] + 1)


def _cascade(spec: ReleaseSpec, release: _Leaf, block: CascadeSpec, export: ExportResult | None = None) -> list[ModelDir]:
    name = spec.name
    members = {key: _member_leaf(spec, key, source, release, export) for key, source in block.members().items()}
    inputs = _same_inputs(members)
    output = _member_output(members, block.output, "cascade")
    models = [_leaf_model(f"{name}_{key}", leaf, spec) for key, leaf in members.items()]
    source = render(
        "cascade/router.py.j2", name=name, small=f"{name}_small", large=f"{name}_large",
        threshold=float(block.threshold), inputs=[t.name for t in inputs], output=block.output,
    )
    outputs = [output, TensorSpec(ANSWERED_BY, "BYTES", (1,))]
    router = _python_model(name, spec, inputs, outputs, source, keep_on_device=True)
    router.calls = [f"{name}_small", f"{name}_large"]
    models.append(router)
    return models


def _fanout(spec: ReleaseSpec, release: _Leaf, block: FanoutSpec, export: ExportResult | None = None) -> list[ModelDir]:
    name = spec.name
    members = {key: _member_leaf(spec, key, source, release, export) for key, source in block.members.items()}
    inputs = _same_inputs(members)
    output = _member_output(members, block.output, "fanout")
    models = [_leaf_model(f"{name}_{key}", leaf, spec) for key, leaf in members.items()]
    source = render(
        "fanout/combine.py.j2", name=name, members=[f"{name}_{key}" for key in members],
        inputs=[t.name for t in inputs], output=block.output, combine=block.combine,
    )
    stage = _python_model(name, spec, inputs, [output], source, keep_on_device=True)
    stage.calls = [f"{name}_{key}" for key in members]
    models.append(stage)
    return models


# --- writing ------------------------------------------------------------------------------------


def _inside(root: Path, *parts: str) -> Path:
    path = root.joinpath(*parts).resolve()
    if not path.is_relative_to(root.resolve()):
        raise AssembleError(f"refusing to write {path}: it is outside the repository {root}")
    return path


_MODEL_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_\-]{0,127}")


def _write_model(models_dir: Path, model: ModelDir, version: int) -> None:
    if not _MODEL_NAME_RE.fullmatch(model.name):
        raise AssembleError(
            f"model name {model.name!r} is not a plain name (a letter, then letters, digits, _ and -); "
            "it becomes a folder name: fix the spec's name"
        )
    cfg.pin_version(model.config, version)
    model_dir = _inside(models_dir, model.name)
    version_dir = _inside(model_dir, str(version))
    version_dir.mkdir(parents=True, exist_ok=True)
    cfg.write_config(model_dir / cfg.CONFIG_FILE, model.config)
    for filename, content in model.files.items():
        target = _inside(version_dir, filename)
        if target.parent != version_dir:
            raise AssembleError(f"refusing to write {filename!r}: files go directly into {version_dir}")
        if isinstance(content, Path):  # a model file: linked, not copied (it is never written in place)
            link_or_copy(content, target)
        else:
            target.write_bytes(content)
