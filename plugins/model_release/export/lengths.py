"""Variable axes: which the release declares, that the ONNX file keeps them, and parity along each.

An axis is *declared variable* when the MLflow signature gives it as -1 (a ``(-1, -1)`` token-id
tensor: batch and sequence) or ``export.dynamic_axes`` names it. Every declared axis is exported
dynamic (:func:`with_declared_axes` hands the converters the intake with those dims at -1), must
come out of the conversion variable (:func:`check_kept`: a file that fixed one is refused, naming
the axis and the size it was fixed at, never shipped fixed), and is checked at two or more lengths
(:func:`check_lengths`): the golden rows at their own length (the main parity run) and, here, at
least one shorter and one longer: ``tensorrt.shapes.<input>`` ``min`` and ``max`` when the spec
gives the range, else half and twice the golden length. Axes of the same golden length move
together (``input_ids`` and ``attention_mask`` share their sequence axis); the batch axis is
checked at 1 and 3 rows. A length is made by cutting the golden rows or repeating them along the
axis: parity compares the native model with onnxruntime on the same inputs, whatever they mean.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ExportError, ParityError, SpecError
from ..model.native import NativeModel, cast_input
from ..model.parity import ParityAccumulator
from ..spec import ReleaseSpec
from ..types import IntakeResult, TensorSpec
from .base import first_line

#: golden rows each length is checked on (the main parity run covers every row at the golden length)
ROWS_PER_LENGTH = 8
#: the batch sizes the batch axis is checked at, besides the golden batches
BATCH_SIZES = (1, 3)
#: how the batch axis is named in messages and records; ALL: the variant moves axis 0 of every input
BATCH, ALL = "the batch axis", "*"


def declared_axes(spec: ReleaseSpec, intake: IntakeResult) -> dict[str, list[int]]:
    """Input name -> its declared variable axes (tensor axes, 0 the batch, which is left out), sorted.

    Raises:
        SpecError: ``export.dynamic_axes`` names no input, or an axis beyond the input's rank.
    """
    out = {s.name: [i + 1 for i, d in enumerate(s.dims) if d == -1] for s in intake.inputs}
    by_name = {n: s for s in intake.inputs for n in (s.name, s.original_name)}
    for name, axes in spec.export.dynamic_axes.items():
        tensor = by_name.get(name)
        if tensor is None:
            raise SpecError(f"export.dynamic_axes names {name!r}, which is not an input of the model; its inputs: "
                            f"{[s.name for s in intake.inputs]}. Name one of those in {spec.where}")
        beyond = [a for a in axes if a > len(tensor.dims)]
        if beyond:
            raise SpecError(f"export.dynamic_axes.{name} names axes {beyond}, but input {tensor.name!r} has axes 0.."
                            f"{len(tensor.dims)} (dims {list(tensor.dims)} after the batch); fix it in {spec.where}")
        out[tensor.name] = sorted(set(out[tensor.name]) | set(axes))
    return {k: v for k, v in out.items() if v}


def with_declared_axes(intake: IntakeResult, axes: Mapping[str, list[int]]) -> IntakeResult:
    """The intake with every declared axis at -1 in its input dims (what the converters export dynamic)."""
    inputs = [dataclasses.replace(s, dims=tuple(-1 if i + 1 in axes.get(s.name, ()) else d for i, d in enumerate(s.dims)))
              for s in intake.inputs]
    return dataclasses.replace(intake, inputs=inputs)


def axis_name(name: str, axis: int) -> str:
    """How a message names an axis: ``input_ids[1]``."""
    return f"{name}[{axis}]"


def check_kept(inputs: list[TensorSpec], axes: Mapping[str, list[int]], *, where: str) -> None:
    """Refuse a converted file that fixed a declared variable axis.

    Raises:
        ExportError: names each fixed axis and its size.
    """
    dims = {t.name: t.dims for t in inputs}
    fixed = [(n, a, dims[n][a - 1]) for n, wanted in axes.items() for a in wanted if n in dims and dims[n][a - 1] != -1]
    if fixed:
        listed = ", ".join(f"{axis_name(n, a)} fixed at {size}" for n, a, size in fixed)
        raise ExportError(
            f"the converter exported {listed}, but the model declares {'that axis' if len(fixed) == 1 else 'those axes'} "
            f"variable ({where}); the file would refuse every other length, so it is not shipped. Make the model's "
            "forward work for any length along the axis, or declare it fixed (log the signature with that size)")


@dataclass(frozen=True)
class Variant:
    """One check: the axes it moves, to which length, and the golden length they had."""

    axes: tuple[tuple[str, int], ...]
    length: int
    golden: int

    @property
    def names(self) -> list[str]:
        return [BATCH] if self.axes[0][0] == ALL else [axis_name(n, a) for n, a in self.axes]

    @property
    def label(self) -> str:
        return f"{', '.join(self.names)} = {self.length} (golden {self.golden})"


def variants(spec: ReleaseSpec, axes: Mapping[str, list[int]], sample: Mapping[str, np.ndarray], *, batch: bool) -> list[Variant]:
    """The lengths to check: each group of declared axes of one golden length, and the batch axis."""
    groups: dict[int, list[tuple[str, int]]] = {}
    for name, wanted in axes.items():
        for a in wanted:
            groups.setdefault(int(np.shape(sample[name])[a]), []).append((name, a))
    rows = len(next(iter(sample.values())))
    out = [Variant(((ALL, 0),), size, rows) for size in BATCH_SIZES if size != rows] if batch else []
    for golden, members in sorted(groups.items()):
        for length in _lengths(spec, members, golden):
            out.append(Variant(tuple(members), length, golden))
    return out


def _lengths(spec: ReleaseSpec, members: list[tuple[str, int]], golden: int) -> list[int]:
    """``tensorrt.shapes`` min and max of the group's axes when given, else half and twice the golden length."""
    picked: set[int] = set()
    for name, axis in members:
        given = spec.tensorrt.shapes.get(name)
        if given is not None and len(given.min) >= axis:
            picked |= {given.min[axis - 1], given.max[axis - 1]}
    if not picked:
        picked = {max(1, golden // 2), 2 * golden}
    picked.discard(golden)
    return sorted(picked) or [golden + 1]


def resized(arr: np.ndarray, axis: int, length: int) -> np.ndarray:
    """``arr`` cut to ``length`` along ``axis``, or its rows repeated along it until they reach it."""
    have = arr.shape[axis]
    if length > have:
        arr = np.concatenate([arr] * math.ceil(length / have), axis=axis)
    return np.take(arr, np.arange(length), axis=axis)


def feeds_for(variant: Variant, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The golden sample with the variant's axes at its length (at most :data:`ROWS_PER_LENGTH` rows)."""
    feeds = {k: np.asarray(v)[:ROWS_PER_LENGTH] for k, v in sample.items()}
    for name, axis in variant.axes:
        for key in (list(feeds) if name == ALL else [name]):
            feeds[key] = resized(feeds[key], axis, variant.length)
    return feeds


def check_lengths(spec: ReleaseSpec, intake: IntakeResult, native: NativeModel, session: Any, inputs: list[TensorSpec],
                  names: list[str], labels: Mapping[str, float], sample: Mapping[str, np.ndarray],
                  axes: Mapping[str, list[int]]) -> list[dict[str, Any]]:
    """Parity of the native model and ``session`` (onnxruntime) at every :func:`variants` length.

    Returns:
        One record per length: the axes, the length, the golden length, the rows and the figures.

    Raises:
        SpecError: the native model itself fails at a length (the range to check belongs in the spec).
        ExportError: onnxruntime fails at a length (the graph holds the traced length as a constant).
        ParityError: an output differs beyond its tolerance at a length.
    """
    import onnxruntime as ort

    quiet = ort.RunOptions()
    quiet.log_severity_level = 4  # a failing length is reported here, in one line
    by_name = {s.name: s for s in intake.inputs}
    records = []
    for variant in variants(spec, axes, sample, batch=spec.repository.max_batch_size > 0):
        moved = feeds_for(variant, sample)
        feeds = {s.name: cast_input(moved[s.name], s) for s in inputs}  # as the ONNX inputs take them
        try:
            expected = native({n: cast_input(v, by_name[n]) for n, v in feeds.items()})
        except Exception as exc:  # noqa: BLE001 - a model fails in its own ways
            raise SpecError(
                f"the native {intake.flavor} model fails at {variant.label} ({first_line(exc)}), so that length cannot be "
                f"checked; give the range it takes as tensorrt.shapes.{variant.axes[0][0]} (min, opt, max) in {spec.where}"
            ) from None
        try:
            served = dict(zip(names, session.run(names, feeds, quiet)))
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own kinds
            raise ExportError(
                f"the ONNX file fails at {variant.label} where the native model answers ({first_line(exc)}): the "
                "conversion fixed that length inside the graph (a traced shape became a constant). Export with the "
                "torch.export exporter (export.opset 18 or above), or make forward() independent of the traced length"
            ) from None
        acc = ParityAccumulator(spec.export.tolerances, labels)
        acc.update({n: np.asarray(expected[n]) for n in names}, served)
        report = acc.result()
        records.append({"axes": variant.names, "length": variant.length,
                        "golden_length": variant.golden, "rows": len(next(iter(feeds.values()))),
                        "passed": report.passed, "outputs": report.to_dict()})
        if not report.passed:
            raise ParityError(f"at {variant.label}: {report.summary(f'the native {intake.flavor} model')}; the golden "
                              f"length passed, so the export is exact only at the traced length. Loosen "
                              f"export.tolerances in {spec.where} only if that difference is acceptable")
    return records


def summary(records: list[dict[str, Any]]) -> str:
    """One phrase: the lengths checked per axis group."""
    groups: dict[str, list[int]] = {}
    for r in records:
        groups.setdefault(", ".join(r["axes"]), []).append(r["length"])
    return "; ".join(f"{k} at {', '.join(map(str, v))}" for k, v in groups.items())

