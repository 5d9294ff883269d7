"""What the canary's outputs are compared with, and how.

The native reference (``export.reference_path``) holds the native model's outputs on the golden set.
For the ``classifier`` shape the served ensemble answers ``probabilities`` (FP32 [N, C]) and
``label`` (BYTES [N, top_k], names best first) while the reference has ``probabilities`` and the
native class values (e.g. int64 [N]): class values are mapped to names (``repository.labels[i]``
for ``intake.classes[i]``, else ``str(class)``) and the top-1 label is compared by agreement.
For other shapes every output present on both sides is compared by name: floating outputs
numerically (atol/rtol), the rest by agreement.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import CanaryRejected
from ..parity import ParityAccumulator, ParityReport
from ..spec import ReleaseSpec
from ..types import IntakeResult


def class_names(spec: ReleaseSpec, intake: IntakeResult) -> dict[str, str] | None:
    """Class value (as text) -> label name, or None when the spec names no labels."""
    labels = spec.repository.labels
    if not labels:
        return None
    classes = intake.classes if intake.classes is not None else list(range(len(labels)))
    if len(classes) != len(labels):
        raise CanaryRejected(
            f"repository.labels has {len(labels)} names but the model has {len(classes)} classes {classes!r}; "
            "give one label per class in the release spec",
            stage="canary",
        )
    return {str(c): name for c, name in zip(classes, labels)}


def label_set(spec: ReleaseSpec, intake: IntakeResult) -> list[str] | None:
    """Every label the classifier may answer, or None when unknown."""
    names = class_names(spec, intake)
    if names:
        return list(names.values())
    return [str(c) for c in intake.classes] if intake.classes is not None else None


def _to_text(values: np.ndarray) -> np.ndarray:
    return np.array([v.decode() if isinstance(v, bytes) else str(v) for v in values.reshape(-1)], dtype=object)


def _classes_to_names(values: np.ndarray, names: dict[str, str] | None) -> np.ndarray:
    flat = np.asarray(values).reshape(len(values), -1)[:, 0]  # the reference's top-1 class
    text = _to_text(flat)
    if names is None:
        return text
    unknown = sorted({t for t in text if t not in names})
    if unknown:
        raise CanaryRejected(
            f"the reference holds class values {unknown[:5]} that are not among the model's classes {sorted(names)}; "
            "re-run the export stage",
            stage="canary",
        )
    return np.array([names[t] for t in text], dtype=object)


def top1(values: np.ndarray) -> np.ndarray:
    """The best label of each row as text ([N, top_k] or [N] in)."""
    a = np.asarray(values)
    return _to_text(a.reshape(a.shape[0], -1)[:, 0] if a.ndim > 1 else a)


def comparable(
    spec: ReleaseSpec, intake: IntakeResult, reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, float], list[str]]:
    """Align reference and candidate outputs for :class:`ParityAccumulator`.

    Returns:
        (expected, served, label outputs with their required agreement, outputs compared on one side only).

    Raises:
        CanaryRejected: the two sides share no output, or a classifier lacks probabilities or label.
    """
    agreement = spec.canary.min_label_agreement
    if spec.repository.shape == "classifier":
        missing = [n for n in ("probabilities", "label") if n not in candidate]
        if missing:
            raise CanaryRejected(
                f"the served classifier has no output {missing} (it has {sorted(candidate)}); a classifier "
                "ensemble answers probabilities and label. Check the repository template.",
                stage="canary",
            )
        expected: dict[str, np.ndarray] = {}
        served: dict[str, np.ndarray] = {}
        if "probabilities" in reference:
            expected["probabilities"] = np.asarray(reference["probabilities"])
            served["probabilities"] = np.asarray(candidate["probabilities"])
        if "label" in reference:
            expected["label"] = _classes_to_names(np.asarray(reference["label"]), class_names(spec, intake))
            served["label"] = top1(candidate["label"])
        if not expected:
            raise CanaryRejected(
                f"the reference has neither probabilities nor label (it has {sorted(reference)}); re-run the export stage",
                stage="canary",
            )
        unmatched = sorted((set(reference) ^ set(candidate)) - {"probabilities", "label"})
        return expected, served, {"label": agreement}, unmatched
    shared = [n for n in reference if n in candidate]
    if not shared:
        raise CanaryRejected(
            f"the served model's outputs {sorted(candidate)} share no name with the reference's {sorted(reference)}; "
            "the entry model must answer the native model's output names",
            stage="canary",
        )
    expected = {n: np.asarray(reference[n]) for n in shared}
    served = {n: np.asarray(candidate[n]) for n in shared}
    labels = {n: agreement for n in shared if expected[n].dtype.kind not in "fc"}
    for n in labels:
        expected[n], served[n] = top1(expected[n]), top1(served[n])
    return expected, served, labels, sorted(set(reference) ^ set(candidate))


def compare_with_reference(
    spec: ReleaseSpec, intake: IntakeResult, reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray]
) -> tuple[ParityReport, list[str]]:
    """Parity of the served outputs against the native reference, with the canary's tolerances."""
    expected, served, labels, unmatched = comparable(spec, intake, reference, candidate)
    acc = ParityAccumulator(spec.canary.tolerances, labels)
    acc.update(expected, served)
    return acc.result(), unmatched


def compare_with_baseline(
    spec: ReleaseSpec, intake: IntakeResult, baseline: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray]
) -> dict[str, Any]:
    """Label agreement and max abs difference against the production model's outputs (report only).

    ``baseline`` holds the production model's outputs on the same golden rows, either native (class
    values, as in the reference) or served (label names); a classifier's class values are mapped to
    names the same way the reference's are.
    """
    out: dict[str, Any] = {}
    names = class_names(spec, intake) if spec.repository.shape == "classifier" else None
    for name in sorted(set(baseline) & set(candidate)):
        b, c = np.asarray(baseline[name]), np.asarray(candidate[name])
        if names and name == "label":
            text = top1(b)
            b = np.array([names.get(t, t) for t in text], dtype=object)
        if len(b) != len(c):
            out[name] = {"error": f"baseline has {len(b)} rows, the candidate {len(c)}"}
            continue
        if b.dtype.kind in "fc" and c.dtype.kind in "fc":
            if b.shape != c.shape:
                out[name] = {"error": f"baseline shape {b.shape}, candidate shape {c.shape}"}
                continue
            diff = np.abs(b.astype(np.float64) - c.astype(np.float64))
            out[name] = {"kind": "numeric", "rows": len(b), "max_abs": float(diff.max()) if diff.size else 0.0,
                         "mean_abs": float(diff.mean()) if diff.size else 0.0}
        else:
            same = top1(b) == top1(c)
            out[name] = {"kind": "label", "rows": len(b), "agreement": float(same.mean()) if len(same) else 1.0,
                         "differing_rows": int((~same).sum())}
    return {"outputs": out, "gating": False, "not_compared": sorted(set(baseline) ^ set(candidate))}
