"""The parity reference of a composed pipeline: its members' native models, composed as the pipeline composes them.

A cascade serves the small member's output on the rows whose highest score reaches its threshold
and the large member's on the others (the BLS router, ``cascade/router.py.j2``: a row goes on when
its highest ``output`` value, as float32, is below ``threshold``); a fan-out serves its members'
outputs combined elementwise (``fanout/combine.py.j2``: mean, max or min). Compared with the release
model's native outputs alone, every row another member answers would differ, so members trained
apart could never be released together. :func:`compose_reference` computes the reference the canary
compares the served pipeline with: each member's native answers on the release's golden rows (the
release's own from its export reference; a registered member's from its native model, which intake
downloaded; an unregistered ``.onnx`` member's from onnxruntime, being its own native form) composed
with the same rule and thresholds. A cascade's reference also names the member that answers each row
(``answered_by``), so a router that routes other rows than its threshold says fails on those rows.

The file is written beside the export stage's results (``export/composed_reference.npz``), streamed
batch by batch; the export result records it with a sentence saying what it is, which the canary's
report repeats.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ExportError
from .golden import Batch, NpzWriter, iter_npz

#: the served output of a cascade naming the model that answered each row (``model.roles.ANSWERED_BY``)
ANSWERED_BY = "answered_by"
#: rows composed per batch
BATCH_ROWS = 1024

Member = Callable[[Batch], Mapping[str, np.ndarray]]


def compose_reference(spec: Any, intake: Any, export: Any, folder: Path) -> dict[str, Any] | None:
    """Write the composed reference of a cascade or fan-out into ``folder``; None for any other shape.

    Args:
        spec: the release spec (``repository.shape`` and its block, the release's name).
        intake: the intake result, with every member's intake (``members``).
        export: the release's export result: its golden rows and native reference.
        folder: where ``composed_reference.npz`` goes (the export stage's folder).

    Returns:
        ``{"path", "description", "rows", "near_threshold_rows"}`` (the last: a cascade's rows whose
        small score lies within 1e-6 of the threshold, where float rounding may route either way).

    Raises:
        ExportError: a member's native model gives no ``output``, or answers another number of rows.
    """
    repo = spec.repository
    if repo.shape not in ("cascade", "fanout"):
        return None
    block = repo.cascade if repo.shape == "cascade" else repo.fanout
    members = block.members() if repo.shape == "cascade" else dict(block.members)
    answer = {key: _member(key, source, spec, intake) for key, source in members.items()}
    path = Path(folder) / "composed_reference.npz"
    near = 0
    with NpzWriter(path) as out:
        for batch, own in _golden_with_reference(export):
            outputs = {key: _output(key, fn(batch) if fn is not None else own, block.output, batch) for key, fn in answer.items()}
            if repo.shape == "cascade":
                composed, near_rows = _route(outputs["small"], outputs["large"], float(block.threshold),
                                             f"{spec.name}_small", f"{spec.name}_large")
                near += near_rows
                out.append({block.output: composed[0], ANSWERED_BY: composed[1]})
            else:
                out.append({block.output: _combine([outputs[k] for k in members], block.combine)})
        rows = out.rows
    return {"path": str(path), "rows": rows, "near_threshold_rows": near, "description": _describe(spec, block)}


def _describe(spec: Any, block: Any) -> str:
    if spec.repository.shape == "cascade":
        return (f"the cascade composed from its members' native models: the small member's {block.output!r} where its "
                f"highest value is at least {block.threshold:g}, else the large member's (as the router routes)")
    return (f"the fan-out composed from its members' native models: the elementwise {block.combine} of their "
            f"{block.output!r} (as the combiner combines)")


def _golden_with_reference(export: Any) -> Iterator[tuple[Batch, Batch]]:
    """The golden rows and the release model's native answers on them, batch by batch, in step."""
    reference = iter_npz(export.reference_path, BATCH_ROWS)
    for batch in iter_npz(export.golden_path, BATCH_ROWS):
        yield batch, next(reference)


def _member(key: str, source: str, spec: Any, intake: Any) -> Member | None:
    """How a member answers a golden batch: None for the release's own model (its export reference)."""
    from ..spec import RELEASE

    if source == RELEASE:
        return None
    found = (intake.members.get(key) or {}).get("intake")
    if found is not None:  # a registered member: its native model, as intake downloaded it
        from ..types import IntakeResult
        from .native import load_native

        native = load_native(IntakeResult.from_dict(found))
        return lambda batch: native(batch)
    return _onnx_member(spec.resolve_path(source))


def _onnx_member(path: Path) -> Member:
    """An unregistered member: its ONNX file is its native form, run by onnxruntime."""
    import onnxruntime as ort

    from .mlmodel import triton_name

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    taken: set[str] = set()
    names = {o.name: triton_name(o.name, taken) for o in session.get_outputs()}

    def run(batch: Batch) -> dict[str, np.ndarray]:
        feeds = {i.name: np.asarray(batch[i.name]) for i in session.get_inputs()}
        return {names[n]: v for n, v in zip(names, session.run(list(names), feeds))}

    return run


def _output(key: str, answers: Mapping[str, np.ndarray], output: str, batch: Batch) -> np.ndarray:
    rows = len(next(iter(batch.values())))
    if output not in answers:
        raise ExportError(f"member {key!r}'s native model answers {sorted(answers)}, not {output!r}, so the pipeline's "
                          f"parity reference cannot be composed; its {output!r} output is what the pipeline serves")
    values = np.asarray(answers[output], dtype=np.float64)
    if len(values) != rows:
        raise ExportError(f"member {key!r}'s native model answered {len(values)} rows for {rows} golden rows")
    return values


def _route(small: np.ndarray, large: np.ndarray, threshold: float, small_name: str,
           large_name: str) -> tuple[tuple[np.ndarray, np.ndarray], int]:
    """The router's rule: a row whose highest small score (float32, as served) is below the threshold goes to the large member."""
    top = small.astype(np.float32).max(axis=-1)
    unsure = top < np.float32(threshold)
    composed = np.where(unsure[:, None], large, small)
    answered = np.where(unsure, large_name, small_name).astype(str).reshape(-1, 1)
    near = int((np.abs(top.astype(np.float64) - threshold) <= 1e-6).sum())
    return (composed, answered), near


def _combine(outputs: list[np.ndarray], how: str) -> np.ndarray:
    stacked = np.stack(outputs)
    return {"mean": stacked.mean, "max": stacked.max, "min": stacked.min}[how](axis=0)
