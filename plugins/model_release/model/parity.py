"""Output parity between a reference and a candidate, shared by the export, TensorRT and canary gates.

Numeric outputs are compared elementwise the way Polygraphy does it: an element fails only when
its absolute difference exceeds ``atol`` *and* its relative difference (to the reference) exceeds
``rtol``. A NaN or Inf in the candidate where the reference has a finite value fails the element.
Label outputs (integers or strings that name a class) are compared for equality and reported as an
agreement rate.

Comparison streams: feed batches to :class:`ParityAccumulator` and memory stays bounded by the
batch size and ``worst_k``, whatever the golden set's size.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..errors import ParityError
from ..spec import Tolerances


@dataclass
class OutputParity:
    """The figures for one output."""

    name: str
    kind: str  # "numeric" | "label"
    total_rows: int = 0
    failing_rows: int = 0
    total_elements: int = 0
    failing_elements: int = 0
    atol: float | None = None
    rtol: float | None = None
    max_abs: float = 0.0
    max_rel: float = 0.0
    mean_abs: float = 0.0
    nonfinite: int = 0
    agreement: float | None = None
    min_agreement: float | None = None
    worst_rows: list[int] = field(default_factory=list)
    shape_error: str | None = None

    @property
    def failing_fraction(self) -> float:
        return self.failing_elements / self.total_elements if self.total_elements else 0.0

    @property
    def passed(self) -> bool:
        if self.shape_error:
            return False
        if self.kind == "label":
            required = 1.0 if self.min_agreement is None else self.min_agreement
            return (1.0 if self.agreement is None else self.agreement) >= required
        return self.failing_elements == 0

    def describe(self, reference: str = "the reference") -> str:
        """One sentence: what differs, the figures, and the tolerance."""
        if self.shape_error:
            return f'output "{self.name}": {self.shape_error}'
        if self.kind == "label":
            return (
                f'output "{self.name}" agrees with {reference} on {self.agreement:.4%} of {self.total_rows} rows '
                f"({self.failing_rows} differ; required agreement {self.min_agreement:.4%}){self._rows()}"
            )
        text = (
            f'output "{self.name}" differs from {reference} on {self.failing_rows} of {self.total_rows} rows '
            f"({self.failing_elements} of {self.total_elements} elements; max abs {self.max_abs:.3g}"
            f"{' > ' if self.max_abs > (self.atol or 0) else ' <= '}atol {self.atol:g}, max rel {self.max_rel:.3g}"
            f"{' > ' if self.max_rel > (self.rtol or 0) else ' <= '}rtol {self.rtol:g}, mean abs {self.mean_abs:.3g})"
        )
        if self.nonfinite:
            text += f"; {self.nonfinite} NaN/Inf elements where {reference} is finite"
        return text + self._rows()

    def _rows(self) -> str:
        """The golden rows that differ most (0-based; at most ``worst_k``), for a failed output."""
        if self.passed or not self.worst_rows:
            return ""
        more = ", ..." if self.failing_rows > len(self.worst_rows) else ""
        return f"; {'worst rows' if self.kind == 'numeric' else 'rows'} {', '.join(map(str, self.worst_rows))}{more}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["failing_fraction"] = self.failing_fraction
        d["passed"] = self.passed
        return d


@dataclass
class ParityReport:
    outputs: dict[str, OutputParity]

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs.values())

    @property
    def failures(self) -> list[OutputParity]:
        return [o for o in self.outputs.values() if not o.passed]

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {name: o.to_dict() for name, o in self.outputs.items()}

    def summary(self, reference: str = "the reference") -> str:
        if self.passed:
            return "; ".join(
                f"{o.name}: agreement {o.agreement:.4%}" if o.kind == "label" else f"{o.name}: max abs {o.max_abs:.3g}"
                for o in self.outputs.values()
            )
        return "; ".join(o.describe(reference) for o in self.failures)


class ParityAccumulator:
    """Compares outputs batch by batch.

    Args:
        tolerances: per-output atol/rtol (``default`` for outputs not named).
        label_outputs: names of outputs compared by equality, with the agreement each requires.
        worst_k: how many of the worst rows (by max abs difference) to remember per output.
    """

    def __init__(self, tolerances: Tolerances, label_outputs: Mapping[str, float] | None = None, worst_k: int = 10) -> None:
        self.tolerances = tolerances
        self.label_outputs = dict(label_outputs or {})
        self.worst_k = worst_k
        self._out: dict[str, OutputParity] = {}
        self._sum_abs: dict[str, float] = {}
        self._worst: dict[str, list[tuple[float, int]]] = {}
        self._rows = 0

    def update(self, reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray]) -> np.ndarray:
        """Add one batch; both mappings hold the same rows, in the same order.

        Returns:
            A boolean mask over the batch's rows: True where any output fails on that row (all
            True for an output that is missing or has the wrong shape).
        """
        batch_rows = None
        row_fail: np.ndarray | None = None
        for name, ref in reference.items():
            ref = np.asarray(ref)
            batch_rows = ref.shape[0] if ref.ndim else 1
            out = self._out.get(name)
            if out is None:
                kind = "label" if name in self.label_outputs else "numeric"
                out = self._out[name] = OutputParity(name=name, kind=kind)
                if kind == "label":
                    out.min_agreement = self.label_outputs[name]
                else:
                    tol = self.tolerances.for_output(name)
                    out.atol, out.rtol = tol.atol, tol.rtol
                self._sum_abs[name] = 0.0
                self._worst[name] = []
            if row_fail is None:
                row_fail = np.zeros(batch_rows, dtype=bool)
            if name not in candidate:
                out.shape_error = f"the candidate has no output named {name!r}; it has {sorted(candidate)}"
                row_fail[:] = True
                continue
            cand = np.asarray(candidate[name])
            if out.kind == "label":
                failed = self._update_labels(out, ref, cand)
            else:
                failed = self._update_numeric(out, ref, cand)
            if failed is None or failed.shape != row_fail.shape:
                row_fail[:] = True
            else:
                row_fail |= failed
        self._rows += batch_rows or 0
        return row_fail if row_fail is not None else np.zeros(0, dtype=bool)

    def _update_labels(self, out: OutputParity, ref: np.ndarray, cand: np.ndarray) -> np.ndarray | None:
        ref_rows = ref.reshape(ref.shape[0], -1) if ref.ndim else ref.reshape(1, 1)
        cand_rows = cand.reshape(cand.shape[0], -1) if cand.ndim else cand.reshape(1, 1)
        if ref_rows.shape[0] != cand_rows.shape[0]:
            out.shape_error = f"{cand_rows.shape[0]} rows where the reference has {ref_rows.shape[0]}"
            return None
        ref_rows, cand_rows = _as_comparable(ref_rows), _as_comparable(cand_rows)
        width = min(ref_rows.shape[1], cand_rows.shape[1])
        same = np.all(ref_rows[:, :width] == cand_rows[:, :width], axis=1)
        bad = np.flatnonzero(~same)
        out.total_rows += len(same)
        out.failing_rows += len(bad)
        out.total_elements += len(same)
        out.failing_elements += len(bad)
        out.agreement = 1.0 - out.failing_rows / out.total_rows if out.total_rows else 1.0
        for r in bad[: self.worst_k]:
            if len(out.worst_rows) < self.worst_k:
                out.worst_rows.append(int(r) + self._rows)
        return ~same

    def _update_numeric(self, out: OutputParity, ref: np.ndarray, cand: np.ndarray) -> np.ndarray | None:
        if ref.shape != cand.shape:
            out.shape_error = f"shape {tuple(cand.shape)} where the reference has {tuple(ref.shape)}"
            return None
        fast = self._numeric_all_finite(out, ref, cand)
        if fast is not None:
            return fast
        ref64 = ref.astype(np.float64, copy=False)
        cand64 = cand.astype(np.float64, copy=False)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            diff = np.abs(cand64 - ref64)
            ref_finite = np.isfinite(ref64)
            cand_finite = np.isfinite(cand64)
            # same non-finite value on both sides (NaN at NaN, +Inf at +Inf) is agreement
            both_same_nonfinite = ~ref_finite & ((np.isnan(ref64) & np.isnan(cand64)) | (ref64 == cand64))
            nonfinite_bad = ref_finite & ~cand_finite
            diff = np.where(both_same_nonfinite, 0.0, diff)
            diff = np.where(nonfinite_bad | (~ref_finite & ~both_same_nonfinite), np.inf, diff)
            denom = np.abs(ref64)
            rel = np.where(diff == 0, 0.0, np.where(denom > 0, diff / denom, np.inf))
            rel = np.where(np.isinf(diff), np.inf, rel)  # a mismatched Inf/NaN fails whatever the tolerances
        failing = (diff > out.atol) & (rel > out.rtol)
        rows = failing.reshape(failing.shape[0], -1) if failing.ndim > 1 else failing.reshape(-1, 1)
        per_row_fail = rows.any(axis=1)
        out.total_rows += rows.shape[0]
        out.failing_rows += int(per_row_fail.sum())
        out.total_elements += int(failing.size)
        out.failing_elements += int(failing.sum())
        out.nonfinite += int(nonfinite_bad.sum())
        if diff.size:
            finite_diff = diff[np.isfinite(diff)]
            out.max_abs = max(out.max_abs, float(diff.max()))
            out.max_rel = max(out.max_rel, float(rel.max()))
            self._sum_abs[out.name] += float(finite_diff.sum())
            out.mean_abs = self._sum_abs[out.name] / out.total_elements
            self._track_worst(out, diff, per_row_fail)
        return per_row_fail

    def _numeric_all_finite(self, out: OutputParity, ref: np.ndarray, cand: np.ndarray) -> np.ndarray | None:
        """The common case, in few passes over the batch: every difference finite. None otherwise.

        Same semantics as the general path: ``rel = diff / |ref|`` is NaN only where both are 0
        (never failing, ignored by the max) and Inf where ``ref`` is 0 and ``diff`` is not.
        """
        if ref.ndim == 0 or ref.size == 0:
            return None
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            diff = np.subtract(cand, ref, dtype=np.float64)
            np.abs(diff, out=diff)
            total = float(diff.sum())
            if not np.isfinite(total):  # a NaN or Inf somewhere (or an overflowing sum): general path
                return None
            rel = np.abs(ref, dtype=np.float64)
            np.divide(diff, rel, out=rel)
            batch_max_abs = float(diff.max())
            failing = None
            if batch_max_abs > (out.atol or 0.0):  # else no element can exceed both tolerances
                failing = diff > out.atol
                failing &= rel > out.rtol
        n_failing = int(np.count_nonzero(failing)) if failing is not None else 0
        rows = ref.shape[0]
        out.total_rows += rows
        out.total_elements += int(diff.size)
        out.failing_elements += n_failing
        out.max_abs = max(out.max_abs, batch_max_abs)
        max_rel = float(np.fmax.reduce(rel, axis=None))
        if max_rel == max_rel:  # not NaN (all-zero batches)
            out.max_rel = max(out.max_rel, max_rel)
        self._sum_abs[out.name] += total
        out.mean_abs = self._sum_abs[out.name] / out.total_elements
        if not n_failing:
            return np.zeros(rows, dtype=bool)
        assert failing is not None
        per_row_fail = failing.reshape(rows, -1).any(axis=1)
        out.failing_rows += int(per_row_fail.sum())
        self._track_worst(out, diff, per_row_fail)
        return per_row_fail

    def _track_worst(self, out: OutputParity, diff: np.ndarray, per_row_fail: np.ndarray) -> None:
        """Remember the ``worst_k`` failing rows by their largest absolute difference."""
        row_max = diff.reshape(diff.shape[0], -1).max(axis=1) if diff.ndim > 1 else diff
        heap = self._worst[out.name]
        for r in np.flatnonzero(per_row_fail):
            item = (float(row_max[r]), int(r) + self._rows)
            if len(heap) < self.worst_k:
                heapq.heappush(heap, item)
            elif item > heap[0]:
                heapq.heapreplace(heap, item)
        out.worst_rows = [r for _, r in sorted(heap, reverse=True)]

    def result(self) -> ParityReport:
        return ParityReport(outputs=dict(self._out))


def _as_comparable(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind in ("S", "O"):
        return np.vectorize(lambda v: v.decode() if isinstance(v, bytes) else str(v), otypes=[object])(a)
    return a


def compare(
    reference: Mapping[str, np.ndarray],
    candidate: Mapping[str, np.ndarray],
    tolerances: Tolerances,
    label_outputs: Mapping[str, float] | None = None,
) -> ParityReport:
    """Compare whole arrays in one call (see :class:`ParityAccumulator` for streaming)."""
    acc = ParityAccumulator(tolerances, label_outputs)
    acc.update(reference, candidate)
    return acc.result()


def compare_batches(
    pairs: Iterable[tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]]],
    tolerances: Tolerances,
    label_outputs: Mapping[str, float] | None = None,
) -> ParityReport:
    acc = ParityAccumulator(tolerances, label_outputs)
    for ref, cand in pairs:
        acc.update(ref, cand)
    return acc.result()


def raise_if_failed(report: ParityReport, *, stage: str, reference: str, hint: str) -> None:
    """Raise :class:`ParityError` naming each failing output, its figures and tolerance, and ``hint``."""
    if report.passed:
        return
    raise ParityError(f"{report.summary(reference)}. {hint}", stage=stage)
