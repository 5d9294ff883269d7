"""Reusing a proven parity result: what it depends on, and checking a stored one before trusting it.

A parity check compares the native model with onnxruntime on the golden set, so its result is a
function of exactly these, which together make its key (:func:`parity_key`):

- the ONNX file's sha256 and the model version's content digest (with its flavor and tensor specs);
- the golden set actually used (:func:`golden_digest`): its source, the bytes of the file it is
  read from (for the logged input example: the ``MLmodel`` file, which says how to read it, and
  the example's file), ``golden.rows`` and ``golden.batch_rows``;
- each output's effective tolerance (atol/rtol) and, for label outputs, ``min_label_agreement``;
- the versions of what computes it (onnxruntime, numpy, mlflow, the model's framework) and a
  digest of the gate's own source (parity, golden set reading, the native adapters, this stage).

Only passing results are stored. Before one is reused its figures are checked again: every
output present, each with the tolerance the spec now asks for, and passing under it
(:func:`stored_report`); its files are verified by sha256 as they are restored (see
:mod:`model_release.export.cache`). Anything that does not match means: check again.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from ..model.parity import OutputParity, ParityReport
from ..model.mlmodel import input_example_info
from ..spec import ReleaseSpec
from ..types import IntakeResult, TensorSpec
from . import cache
from .base import package_version

#: the modules whose code decides a parity result (a change of any of them invalidates stored results)
GATE_MODULES = ("model_release.model.parity", "model_release.model.golden", "model_release.model.dtypes",
                "model_release.model.native", "model_release.export.stage", "model_release.export.lengths",
                "model_release.export.heads")


def parity_key(spec: ReleaseSpec, intake: IntakeResult, onnx_sha256: str, outputs: list[TensorSpec],
               labels: Mapping[str, float], versions: Mapping[str, str],
               checked: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]] | None:
    """The key of one parity check and the parts it was made of; None when the golden set cannot be digested.

    Args:
        spec: the release spec (``export`` tolerances, ``golden`` section).
        intake: the intake result (content digest, flavor, tensor specs, model folder).
        onnx_sha256: the sha256 of the ONNX file that is checked.
        outputs: the ONNX file's outputs.
        labels: label output name → required agreement.
        versions: the converter's library versions (the model's framework among them).
        checked: what else the check covers (the other lengths of variable axes, the derived reference of a head).
    """
    golden = golden_digest(spec, intake)
    if golden is None:
        return None
    tolerances = {o.name: ({"min_agreement": labels[o.name]} if o.name in labels
                           else spec.export.tolerances.for_output(o.name).model_dump()) for o in outputs}
    parts = {
        "onnx_sha256": onnx_sha256,
        "model": {"content_digest": intake.content_digest, "flavor": intake.flavor,
                  "inputs": [s.to_dict() for s in intake.inputs], "outputs": [s.to_dict() for s in outputs]},
        "golden": golden,
        "tolerances": tolerances,
        "versions": {**versions, **{p: package_version(p) for p in ("onnxruntime", "numpy", "mlflow")}},
        "code": gate_code_digest(),
        **({"checked": dict(checked)} if checked else {}),
    }
    return cache.digest({"format": cache.FORMAT, "parity": parts}), parts


def golden_digest(spec: ReleaseSpec, intake: IntakeResult) -> dict[str, Any] | None:
    """What decides the golden set's rows, without reading them as arrays; None if its source is missing.

    A golden file is hashed whole (however many rows are used: the digest is of the file, the cut is
    ``rows``). The logged input example is the example file named by ``MLmodel`` (hashed with
    ``MLmodel`` itself, whose ``saved_input_example_info`` says how it is read).
    """
    g = spec.golden
    out: dict[str, Any] = {"source": g.source, "rows": g.rows, "batch_rows": g.batch_rows,
                           "target": g.target, "allow_nonfinite_inputs": g.allow_nonfinite_inputs}
    try:
        if g.source == "file":
            path = spec.resolve_path(g.path or "")
            out.update(suffix=path.suffix, sha256=_sha256(path))
            if path.suffix == ".parquet":
                out["pyarrow"] = package_version("pyarrow")
            return out
        model_dir = Path(intake.model_dir)
        mlmodel = (model_dir / "MLmodel").read_bytes()
        info = input_example_info(mlmodel)
        if not info.get("artifact_path"):
            return None
        out.update(mlmodel=hashlib.sha256(mlmodel).hexdigest(), example=_sha256(model_dir / str(info["artifact_path"])),
                   pandas=package_version("pandas"))
        return out
    except (OSError, ValueError):
        return None


def stored_report(meta: Mapping[str, Any], parts: Mapping[str, Any], outputs: list[TensorSpec]) -> ParityReport | None:
    """The stored report if it still stands for this check, else None.

    It must name every output with the tolerance (or required agreement) of ``parts``, cover the
    stored number of rows, and pass when its figures are judged again.
    """
    try:
        report = ParityReport(outputs={n: _output_from_dict(d) for n, d in dict(meta["report"]).items()})
        rows = int(meta["rows"])
        if cache.digest(meta.get("parts")) != cache.digest(parts) or sorted(report.outputs) != sorted(o.name for o in outputs):
            return None
        if not report.passed:
            return None
        for name, o in report.outputs.items():
            want = dict(parts.get("tolerances", {})).get(name)
            got = {"min_agreement": o.min_agreement} if o.kind == "label" else {"atol": o.atol, "rtol": o.rtol}
            if got != want or o.total_rows != rows:
                return None
    except (AttributeError, KeyError, TypeError, ValueError):  # a malformed report is not a result
        return None
    return report


@functools.lru_cache(maxsize=1)
def gate_code_digest() -> str:
    """sha256 over the source of :data:`GATE_MODULES`."""
    import importlib

    h = hashlib.sha256()
    for name in GATE_MODULES:
        module = importlib.import_module(name)
        h.update(name.encode() + b"\0" + Path(str(module.__file__)).read_bytes())
    return h.hexdigest()


def _output_from_dict(d: Mapping[str, Any]) -> OutputParity:
    names = {f.name for f in fields(OutputParity)}
    return OutputParity(**{k: v for k, v in d.items() if k in names})


def _sha256(path: Path) -> str:
    from ..workspace import sha256_file

    return sha256_file(path)
