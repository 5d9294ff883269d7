"""What the TensorRT stage decides before (and instead of) building, without a GPU.

Written against TensorRT 10's ONNX parser, which takes the default ONNX domain only:

- :func:`ml_operators`: the ``ai.onnx.ml`` operators of a graph (every scikit-learn, XGBoost and
  LightGBM export has them: ``TreeEnsembleClassifier``, ``LinearClassifier``, ``Scaler``...). Such a
  graph is skipped before building under ``prefer`` (the operators are named in the reason) and
  refused under ``require``.
- :func:`profile_shapes`: the optimization profile of each input. The batch dimension ranges over
  ``1..max_batch_size``; a dynamic non-batch dimension takes its range from ``tensorrt.shapes`` in
  the spec, and without one the build is refused rather than fixed to 1 (a plan built for 1 fails
  on every longer input at serve time).
- :func:`fallback`: a parse or build failure under ``prefer`` is not the release's end: the
  repository serves the ONNX model, and the reason goes into the result (and so the manifest).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ExportError, SpecError
from ..spec import ReleaseSpec
from ..types import TensorRTResult, TensorSpec

ML_DOMAIN = "ai.onnx.ml"

Profile = dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]


def ml_operators(onnx_path: str | Path) -> list[str]:
    """The ``ai.onnx.ml`` operators the graph uses (subgraphs and functions included), sorted, each once."""
    import onnx

    model = onnx.load(str(onnx_path), load_external_data=False)
    found: set[str] = set()

    def walk(graph) -> None:  # noqa: ANN001
        for node in graph.node:
            if node.domain == ML_DOMAIN:
                found.add(node.op_type)
            for attr in node.attribute:
                if attr.g is not None and attr.HasField("g"):
                    walk(attr.g)
                for sub in attr.graphs:
                    walk(sub)

    walk(model.graph)
    for function in model.functions:
        found.update(n.op_type for n in function.node if n.domain == ML_DOMAIN)
    return sorted(found)


def profile_shapes(inputs: list[TensorSpec], max_batch: int, spec: ReleaseSpec) -> Profile:
    """(min, opt, max) full shapes of every input: batch 1..max_batch, other dims fixed or from ``tensorrt.shapes``.

    Raises:
        SpecError: a dynamic non-batch dimension has no range in the spec, or a range does not fit
            the input (names the input, the dimension and the spec field to set).
    """
    ranges = spec.tensorrt.shapes
    unknown = sorted(set(ranges) - {t.name for t in inputs})
    if unknown:
        raise SpecError(f"tensorrt.shapes names {unknown}, which are not inputs of the model (its inputs: "
                        f"{[t.name for t in inputs]}) in {spec.where}")
    opt_batch = max(1, max_batch // 2)
    profile: Profile = {}
    for t in inputs:
        dims = tuple(t.dims)
        given = ranges.get(t.name)
        dynamic = [i for i, d in enumerate(dims) if d < 1]
        if given is None:
            if dynamic:
                raise SpecError(
                    f"input {t.name!r} has dynamic non-batch dimension(s) {dynamic} (dims {list(dims)}), which a TensorRT "
                    f"profile needs a range for; add tensorrt.shapes.{t.name}: {{min: [...], opt: [...], max: [...]}} "
                    f"({len(dims)} values each) to {spec.where}")
            lo = mid = hi = dims
        else:
            if len(given.min) != len(dims):
                raise SpecError(f"tensorrt.shapes.{t.name} has {len(given.min)} values per bound but input {t.name!r} has "
                                f"{len(dims)} non-batch dims {list(dims)}; give one value per dimension in {spec.where}")
            for i, d in enumerate(dims):
                if d >= 1 and not (given.min[i] == given.opt[i] == given.max[i] == d):
                    raise SpecError(f"tensorrt.shapes.{t.name}: dimension {i} of {t.name!r} is fixed at {d}, but the range "
                                    f"says {given.min[i]}..{given.max[i]}; repeat {d} there in {spec.where}")
            lo, mid, hi = tuple(given.min), tuple(given.opt), tuple(given.max)
        profile[t.name] = ((1, *lo), (opt_batch, *mid), (max_batch, *hi))
    return profile


def not_buildable(spec: ReleaseSpec, onnx_path: str | Path, inputs: list[TensorSpec]) -> str | None:
    """Why this graph cannot become a plan, decided before any GPU is asked (None: it can be tried).

    Raises:
        ExportError: ``require`` and the graph has ``ai.onnx.ml`` operators.
        SpecError: a dynamic dimension has no range (any mode: the spec must say it).
    """
    ops = ml_operators(onnx_path)
    if ops:
        why = (f"the ONNX graph uses ai.onnx.ml operators {ops}, which TensorRT's ONNX parser does not take "
               "(scikit-learn, XGBoost and LightGBM exports do)")
        if spec.tensorrt.mode == "require":
            raise ExportError(f"tensorrt.mode is 'require' but {why}; set tensorrt.mode to 'prefer' (the ONNX model is "
                              f"served) or 'off' in {spec.where}")
        return f"skipped before building: {why}; the ONNX model is served (tensorrt.mode is 'prefer')"
    profile_shapes(inputs, max(1, spec.repository.max_batch_size), spec)
    return None


def fallback(spec: ReleaseSpec, error: ExportError, environment: dict[str, str]) -> TensorRTResult:
    """The result of a parse or build failure under ``prefer``: no plan, the ONNX model served, the reason kept.

    Raises:
        ExportError: ``require``: the failure stops the release.
    """
    if spec.tensorrt.mode == "require":
        raise error
    return TensorRTResult(built=False, reason=f"fell back to ONNX: {error.message} (tensorrt.mode is 'prefer')",
                          environment=environment, precision=spec.tensorrt.precision)
