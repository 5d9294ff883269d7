"""The export stage: native model → checked ONNX file, behind the parity gate.

Steps: load the native model; convert it with its flavor's converter (or reuse the conversion
cache); check that the file imports the asked opset and keeps every declared variable axis
variable (:mod:`.lengths`); run the ONNX checker and strict shape inference; optionally simplify
with onnxslim; then stream the golden set through the native model and onnxruntime, comparing
every output with its tolerance, and check it again at other lengths of every variable axis (or reuse a stored passing result of exactly this check: same ONNX file, model, golden
set, tolerances, runtime versions and gate code, see :mod:`~model_release.export.paritycache`;
``converter["parity"]`` and ``parity.json`` say which happened). A fully cached export loads
neither the native model nor onnxruntime. Everything lands in ``<workspace>/export/``: ``model.onnx``, ``golden.npz`` (the
inputs, keyed by the Triton input names), ``reference.npz`` (the native outputs, keyed by the
Triton output names), ``parity.json``, ``failing_rows.npz`` when parity fails, ``reproduce.sh``,
``spec.json`` and ``export.json`` (written last).
"""

from __future__ import annotations

import logging
import shlex
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ExportError, ParityError, SpecError
from ..model.golden import NpzWriter, check_golden, golden_origin, iter_golden, write_truth
from ..model.parity import ParityAccumulator, ParityReport
from ..model.roles import is_label_datatype
from ..safe_text import echo
from ..spec import ReleaseSpec
from ..stages import EXPORT
from ..types import ExportResult, IntakeResult, TensorSpec
from ..workspace import Workspace, atomic_write_bytes, atomic_write_json, sha256_file
from . import cache, paritycache
from . import heads, lengths
from .base import Converter, converter_for, first_line, package_version, unpack
from .checks import check_onnx, check_opset, opset_imports, opset_of, simplify, tensor_specs
from ..model.native import NativeModel, cast_input, load_native

log = logging.getLogger(__name__)

#: at most this many failing rows are saved to failing_rows.npz
MAX_FAILING_ROWS = 1000


def export(
    spec: ReleaseSpec,
    intake: IntakeResult,
    ws: Workspace,
    *,
    converters: Mapping[str, Converter] | None = None,
) -> ExportResult:
    """Export the intake's model to ONNX and prove it computes what the native model computes.

    Args:
        spec: the release spec (``export`` and ``golden`` sections).
        intake: the intake stage's result.
        ws: the release workspace; output goes to ``<ws>/export/`` (replaced whole).
        converters: flavor → converter overrides (see :class:`~model_release.export.base.Converter`).

    Returns:
        The export result (the pipeline's stage runner saves it as ``<ws>/export/export.json``).

    Raises:
        ExportError: no converter, the conversion failed, or the checker refused the file.
        ParityError: an output differs from the native model beyond its tolerance.
        SpecError, IntakeError: the golden set is missing or disagrees with the signature; a per-output
            tolerance names no output of the model.
    """
    started = time.perf_counter()
    out = ws.stage_dir(EXPORT, fresh=True)
    atomic_write_json(out / "spec.json", spec.model_dump(mode="json"))
    check_golden(spec, intake)  # a bad or too small golden set fails here, before any conversion
    native = _LazyNative(intake)  # loaded only when something runs it (a conversion, a parity check)
    converter = converter_for(intake.flavor, converters)
    versions = {**converter.versions(), "onnxruntime": package_version("onnxruntime")}
    if spec.export.simplify:
        versions["onnxslim"] = package_version("onnxslim")
    axes = lengths.declared_axes(spec, intake)
    planned = heads.plan(spec, intake)  # a model the repository shape cannot serve is refused before any conversion
    converted = _convert(spec, lengths.with_declared_axes(intake, axes), ws, out, converter, native, versions)
    check_opset(spec, converted.opset, converted.notes, intake.flavor)
    lengths.check_kept(converted.inputs, axes, where=_declared_where(spec, axes))
    check_tolerance_names(spec, converted.outputs)
    head = _head(spec, intake, converted, native, planned)
    proven = _prove(spec, intake, ws, out, converted, native, versions, axes, head)
    _remember(spec, ws, out, converted, proven, versions, head)
    truth = str(out / "truth.npz") if spec.golden.target and write_truth(spec, intake, out / "truth.npz") else ""
    result = ExportResult(
        onnx_path=str(converted.onnx_path), onnx_sha256=proven.onnx_sha, opset=converted.opset,
        inputs=converted.inputs, outputs=converted.outputs,
        parity=proven.report.to_dict(), golden_path=str(out / "golden.npz"), golden_rows=proven.rows,
        reference_path=str(out / "reference.npz"), parity_report=str(out / "parity.json"), truth_path=truth,
        converter={**versions, "flavor": intake.flavor, "cache_key": converted.key, "parity": proven.note,
                   **({"parity_key": proven.check[0]} if proven.check else {}),
                   **{f"note.{k}": v for k, v in converted.notes.items()}},
        cached=converted.hit, reproduce=_write_reproduce(out, ws), opset_requested=spec.export.opset,
        lengths=proven.lengths, head=head,
    )
    log.info("export: %s in %.2fs (cached=%s)", proven.report.summary(REFERENCE_NAME.format(intake.flavor)),
             time.perf_counter() - started, result.cached)
    return result


def check_tolerance_names(spec: ReleaseSpec, outputs: list[TensorSpec]) -> None:
    """Refuse a per-output tolerance (``export.tolerances.X``, ``tensorrt.tolerances.X``) that names no output.

    A misspelled output name would otherwise fall back to ``default`` silently. An output may be
    named by its Triton name or its name in the model.

    Raises:
        SpecError: a tolerance names no output; the message lists the outputs there are.
    """
    import difflib

    valid = sorted({o.name for o in outputs} | {o.original_name for o in outputs})
    for section, tolerances in (("export", spec.export.tolerances), ("tensorrt", spec.tensorrt.tolerances)):
        for name in tolerances.named():
            if name in valid:
                continue
            close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise SpecError(
                f"{section}.tolerances.{echo(name)[1:-1]} in {spec.where} names no output of the model; its outputs: "
                f"{', '.join(repr(v) for v in valid)}. {hint}Name one of those (or set {section}.tolerances.default)"
            )


#: how the parity figures name the reference
REFERENCE_NAME = "the {} model"


@dataclass
class _Converted:
    """The ONNX file to prove: converted now or restored from the conversion cache."""

    key: str
    onnx_path: Path
    onnx_sha: str
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    opset: int
    notes: dict[str, str]
    hit: bool
    #: the files to check: "onnx" (ships) and, with export.simplify, "simplified"
    candidates: dict[str, Path]
    #: the head decided on this conversion before (:func:`.heads.decide`), from the cache
    head: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Proven:
    """The parity result of the file that ships, checked now or reused from the parity cache."""

    report: ParityReport
    rows: int
    onnx_sha: str
    note: str
    reused: bool
    #: (key, parts) of the parity check of the shipped file; None without the cache
    check: tuple[str, dict[str, Any]] | None
    #: parity at other lengths of every variable axis (:func:`.lengths.check_lengths`)
    lengths: list[dict[str, Any]] = field(default_factory=list)


def _convert(spec: ReleaseSpec, intake: IntakeResult, ws: Workspace, out: Path, converter: Converter,
             native: _LazyNative, versions: dict[str, str]) -> _Converted:
    """Restore the conversion from the cache, or convert, check and (optionally) simplify now."""
    require_batch = spec.repository.max_batch_size > 0
    options = {"opset": spec.export.opset, "simplify": spec.export.simplify, "batch": require_batch,
               "inputs": [s.to_dict() for s in intake.inputs], "converter": type(converter).__qualname__}
    key = cache.cache_key(intake.content_digest, intake.flavor, versions, options)
    onnx_path = out / "model.onnx"
    hit = _restore_conversion(ws.root, key, onnx_path) if spec.export.cache else None
    if hit is not None:
        meta, onnx_sha = hit
        log.info("export: reusing cached ONNX %s", key)
        return _Converted(key, onnx_path, onnx_sha, [TensorSpec.from_dict(d) for d in meta["inputs"]],
                          [TensorSpec.from_dict(d) for d in meta["outputs"]], int(meta["opset"]),
                          dict(meta.get("notes", {})), True, {"onnx": onnx_path}, dict(meta.get("head") or {}))
    sample = next(iter(iter_golden(spec, intake)))
    model, notes = unpack(converter.convert(native.get(), intake, spec.export.opset, sample))
    _save(model, onnx_path)
    model = check_onnx(onnx_path)
    inputs, outputs = tensor_specs(model, require_batch=require_batch)
    _check_names(inputs, outputs, intake, native.get(), sample)
    candidates = {"onnx": onnx_path}
    if spec.export.simplify:
        slim_path = out / "model.slim.onnx"
        _save(simplify(model), slim_path)
        check_onnx(slim_path, what="the simplified ONNX model")
        candidates["simplified"] = slim_path
    return _Converted(key, onnx_path, sha256_file(onnx_path), inputs, outputs, opset_of(model),
                      {"opset_imports": opset_imports(model), **notes}, False, candidates)


def _head(spec: ReleaseSpec, intake: IntakeResult, conv: _Converted, native: _LazyNative, planned: str | None) -> dict[str, Any]:
    """The output the repository shape serves and what it holds (:func:`.heads.head_of`); the native model runs only
    when a classifier's scores must be told apart and this conversion's cache entry has not told them already."""
    def answers(output: str) -> np.ndarray:
        return native.get()(next(iter(iter_golden(spec, intake))))[output]

    return heads.head_of(spec, conv.outputs, planned, conv.head, answers)


def _declared_where(spec: ReleaseSpec, axes: Mapping[str, list[int]]) -> str:
    named = [n for n in axes if n in spec.export.dynamic_axes]
    return "the MLflow signature's -1" + (f" and export.dynamic_axes in {spec.where}" if named else "")


def _prove(spec: ReleaseSpec, intake: IntakeResult, ws: Workspace, out: Path, conv: _Converted,
           native: _LazyNative, versions: dict[str, str], axes: Mapping[str, list[int]], head: dict[str, Any]) -> _Proven:
    """The parity gate: reuse a stored result of exactly this check, or run it; write parity.json; raise on failure."""
    reference_name = REFERENCE_NAME.format(intake.flavor)
    labels = {o.name: spec.export.min_label_agreement for o in conv.outputs if is_label_datatype(o.datatype)}
    check = None
    reused = None
    if spec.export.cache and len(conv.candidates) == 1:  # one file to check: a stored result of it may stand
        check = paritycache.parity_key(spec, intake, conv.onnx_sha, conv.outputs, labels, versions, _checked(spec, axes, head))
        reused = _reuse_parity(ws.root, check, conv.outputs, out) if check else None
    if reused is not None:
        report, rows, origin, checked = reused
        proven = _Proven(report, rows, conv.onnx_sha, f"reused from cache {check[0]} (checked in release {origin})", True,
                         check, checked)
        log.info("export: parity %s", proven.note)
    else:
        run = _run_parity(spec, intake, native.get(), conv.candidates, conv.inputs, conv.outputs, labels, out, head)
        report, onnx_sha = _choose_simplified(run, conv, reference_name)
        if "simplified" in run.reports and spec.export.cache:  # the shipped file is decided only now
            check = paritycache.parity_key(spec, intake, onnx_sha, conv.outputs, labels, versions, _checked(spec, axes, head))
        checked = _other_lengths(spec, intake, native.get(), conv, labels, axes) if report.passed else []
        proven = _Proven(report, run.rows, onnx_sha, f"checked on {run.rows} golden rows", False, check, checked)
    atomic_write_json(out / "parity.json", {
        "passed": proven.report.passed, "reference": reference_name, "rows": proven.rows,
        "golden": golden_origin(spec), "outputs": proven.report.to_dict(), "notes": conv.notes,
        "reused": proven.note if proven.reused else None, "lengths": proven.lengths,
    })
    if not proven.report.passed:
        raise ParityError(_parity_message(spec, proven.report, reference_name, ws))
    return proven


def _checked(spec: ReleaseSpec, axes: Mapping[str, list[int]], head: dict[str, Any]) -> dict[str, Any]:
    """What parity checks besides the golden rows (part of its cache key): the other lengths, the derived reference."""
    return {"axes": dict(axes), "batch": spec.repository.max_batch_size > 0, "head": head,
            "shapes": {k: v.model_dump() for k, v in spec.tensorrt.shapes.items()}}


def _choose_simplified(run: _ParityRun, conv: _Converted, reference_name: str) -> tuple[ParityReport, str]:
    """Keep the simplified graph when it passed (it then ships); return the shipped file's report and sha256."""
    report = run.reports["onnx"]
    if "simplified" not in run.reports:
        return report, conv.onnx_sha
    slim = run.reports["simplified"]
    if slim.passed:
        conv.candidates["simplified"].replace(conv.onnx_path)
        # the file that ships is the simplified one: its figures are the release's (a failing
        # unsimplified graph still blocks the release, as it always did)
        report = slim if report.passed else report
        conv.notes["simplify"] = "onnxslim applied; parity re-checked"
    else:
        conv.candidates["simplified"].unlink()
        conv.notes["simplify"] = f"onnxslim result rejected, kept the unsimplified graph: {slim.summary(reference_name)}"
    return report, sha256_file(conv.onnx_path)


def _remember(spec: ReleaseSpec, ws: Workspace, out: Path, conv: _Converted, proven: _Proven, versions: dict[str, str],
              head: dict[str, Any]) -> None:
    """Store what this export computed (a new conversion, a new parity result) in the caches."""
    if not conv.hit and spec.export.cache:
        cache.store(ws.root, cache.CONVERSION, conv.key, {"model.onnx": conv.onnx_path}, {
            "opset": conv.opset, "notes": conv.notes, "versions": versions, "head": head,
            "inputs": [s.to_dict() for s in conv.inputs], "outputs": [s.to_dict() for s in conv.outputs],
        })
    if not proven.reused and proven.check is not None:
        cache.store(ws.root, cache.PARITY, proven.check[0], {"golden.npz": out / "golden.npz", "reference.npz": out / "reference.npz"},
                    {"report": proven.report.to_dict(), "rows": proven.rows, "parts": proven.check[1], "computed_in": ws.release_id,
                     "lengths": proven.lengths})


class _LazyNative:
    """The native model, loaded on first use (a fully cached export never needs it)."""

    def __init__(self, intake: IntakeResult) -> None:
        self.intake = intake
        self._model: NativeModel | None = None

    def get(self) -> NativeModel:
        if self._model is None:
            self._model = load_native(self.intake)
        return self._model


def _restore_conversion(root: Path, key: str, onnx_path: Path) -> tuple[dict[str, Any], str] | None:
    """The cached conversion's metadata and the ONNX file's sha256, its file copied to ``onnx_path``; None on a miss."""
    meta = cache.read_meta(root, cache.CONVERSION, key)
    if meta is None:
        return None
    sha = cache.restore(root, cache.CONVERSION, key, meta, "model.onnx", onnx_path)
    return (meta, sha) if sha else None


def _reuse_parity(root: Path, check: tuple[str, dict[str, Any]], outputs: list[TensorSpec],
                  out: Path) -> tuple[ParityReport, int, str, list[dict[str, Any]]] | None:
    """A stored passing parity result for exactly this check, its files restored into ``out``; None to check again."""
    key, parts = check
    meta = cache.read_meta(root, cache.PARITY, key)
    report = paritycache.stored_report(meta, parts, outputs) if meta else None
    if meta is None or report is None:
        return None
    for name in ("golden.npz", "reference.npz"):
        if not cache.restore(root, cache.PARITY, key, meta, name, out / name):
            log.warning("export: the cached parity entry %s has a missing or damaged %s; checking parity again", key, name)
            return None
    return report, int(meta["rows"]), str(meta.get("computed_in", "?")), list(meta.get("lengths", []))


def _save(model: Any, path: Path) -> None:
    import onnx

    try:
        atomic_write_bytes(path, model.SerializeToString())
    except ValueError:  # over 2 GB: external data
        onnx.save(model, str(path), save_as_external_data=True)


def _check_names(inputs: list[TensorSpec], outputs: list[TensorSpec], intake: IntakeResult, native: NativeModel,
                 sample: Mapping[str, np.ndarray]) -> None:
    want_in = [s.name for s in intake.inputs]
    if sorted(s.name for s in inputs) != sorted(want_in):
        raise ExportError(f"the converted model's inputs {[s.name for s in inputs]} are not the signature's {want_in}")
    native_out = native(sample)
    missing = [o.name for o in outputs if o.name not in native_out]
    if missing:
        raise ExportError(
            f"the converted model has outputs {missing} that the native {intake.flavor} model does not produce "
            f"(it produces {sorted(native_out)}); the converter and the native adapter disagree"
        )


def _other_lengths(spec: ReleaseSpec, intake: IntakeResult, native: NativeModel, conv: _Converted,
                   labels: Mapping[str, float], axes: Mapping[str, list[int]]) -> list[dict[str, Any]]:
    """Parity of the shipped file at other lengths of every variable axis and at other batch sizes (:mod:`.lengths`)."""
    sample = next(iter(iter_golden(spec, intake)))
    session = _session(conv.onnx_path)
    return lengths.check_lengths(spec, intake, native, session, conv.inputs, [o.name for o in conv.outputs], labels,
                                 sample, axes)


def _session(path: Path) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


@dataclass
class _ParityRun:
    rows: int = 0
    reports: dict[str, ParityReport] = field(default_factory=dict)


def _run_parity(spec: ReleaseSpec, intake: IntakeResult, native: NativeModel, candidates: Mapping[str, Path],
                inputs: list[TensorSpec], outputs: list[TensorSpec], labels: Mapping[str, float], out: Path,
                head: Mapping[str, str]) -> _ParityRun:
    """Stream the golden set through the native model and every candidate ONNX file."""
    sessions = {k: _session(p) for k, p in candidates.items()}
    accs = {k: ParityAccumulator(spec.export.tolerances, labels) for k in candidates}
    names = [o.name for o in outputs]
    by_name = {s.name: s for s in intake.inputs}
    run = _ParityRun()
    failing = NpzWriter(out / "failing_rows.npz")
    kept = 0
    with NpzWriter(out / "golden.npz") as golden, NpzWriter(out / "reference.npz") as reference:
        try:
            for batch in iter_golden(spec, intake):
                feeds = {s.name: cast_input(batch[s.name], s) if s.datatype == "BYTES" else batch[s.name].astype(_np(s), copy=False) for s in inputs}
                native_in = {n: cast_input(v, by_name[n]) for n, v in feeds.items()}
                ref_all = native(native_in)
                ref = {n: np.asarray(ref_all[n]) for n in names}
                for key, sess in sessions.items():
                    cand = _run_onnx(sess, names, feeds, candidates[key], run.rows)
                    mask = accs[key].update(ref, cand)
                    if key == "onnx" and mask.any() and kept < MAX_FAILING_ROWS:
                        rows = np.flatnonzero(mask)[: MAX_FAILING_ROWS - kept]
                        failing.append({"row": rows + run.rows, **_take(feeds, rows, "input."),
                                        **_take(ref, rows, "native."), **_take(cand, rows, "onnx.")})
                        kept += len(rows)
                golden.append(feeds)
                reference.append({**ref, **heads.derived_reference(head, ref_all, intake.classes)})
                run.rows += len(next(iter(feeds.values())))
        except BaseException:
            failing.discard()
            raise
    if kept:
        failing.close()
    else:
        failing.discard()
    run.reports = {k: a.result() for k, a in accs.items()}
    return run


def _run_onnx(session: Any, names: list[str], feeds: Mapping[str, np.ndarray], path: Path, first_row: int) -> dict[str, np.ndarray]:
    """One golden batch through onnxruntime; its failure is an ExportError naming the rows and the file."""
    try:
        return dict(zip(names, session.run(names, feeds)))
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own kinds
        rows = len(next(iter(feeds.values())))
        raise ExportError(f"onnxruntime could not run {path} on golden rows {first_row}..{first_row + rows - 1} "
                          f"({first_line(exc)}); the converted graph does not take these inputs") from None


def _np(spec: TensorSpec) -> np.dtype:
    from ..model.dtypes import numpy_from_triton

    return numpy_from_triton(spec.datatype)


def _take(arrays: Mapping[str, np.ndarray], rows: np.ndarray, prefix: str) -> dict[str, np.ndarray]:
    return {prefix + k: np.asarray(v)[rows] for k, v in arrays.items()}


def _parity_message(spec: ReleaseSpec, report: ParityReport, reference: str, ws: Workspace) -> str:
    parts = []
    for o in report.failures:
        if o.kind == "label":
            fix = (f"a converter that changes predicted labels is not acceptable unless the spec lowers the required "
                   f"agreement (export.min_label_agreement in {spec.where})")
        elif o.nonfinite:
            fix = "NaN/Inf cannot be tolerated away: fix the model or the converter"
        elif o.shape_error:
            fix = "the converter and the native model disagree on this output's shape"
        else:
            which = "atol" if o.max_abs > (o.atol or 0) else "rtol"
            fix = (f"loosen export.tolerances.{o.name}.{which} in {spec.where} "
                   "only if that difference is acceptable")
        parts.append(f"{o.describe(reference)}. {fix[0].upper()}{fix[1:]}")
    where = ws.stage_dir(EXPORT)
    return (f"{'; '.join(parts)}; the ONNX file and the differing rows are in {where}/ "
            "(model.onnx, failing_rows.npz, parity.json)")


def _write_reproduce(out: Path, ws: Workspace) -> str:
    """A shell script that re-runs this export from the workspace (intake.json and spec.json)."""
    cmd = [sys.executable, "-m", "model_release.reexport", "--root", str(ws.root.resolve()), "--release", ws.release_id]
    script = ("#!/bin/sh\n# Re-runs the export stage of this release from its saved intake result and spec.\n"
              f"exec {shlex.join(cmd)} \"$@\"\n")
    path = out / "reproduce.sh"
    atomic_write_bytes(path, script.encode())
    path.chmod(0o755)
    return shlex.join(cmd)

