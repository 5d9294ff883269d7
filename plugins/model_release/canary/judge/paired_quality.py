"""Every paired gate of one candidate/champion pair on the golden set's ground truth, in one call.

The canary's judge calls :func:`classifier_findings` (or :func:`regressor_findings`) with both
models' answers read against the ground truth (:class:`~model_release.canary.judge.quality.Classified`,
each model by its own interface) and the limits (:class:`PairedLimits`, from the spec). It gets
the findings (:class:`.outcome.Finding`, one per gate) and the report's sections: flips, the
per-class table, the reliability diagrams, the per-slice tables.

Which change gates are paired (:data:`PAIRED_METRICS`): ``accuracy`` (discordant pairs),
``log_loss`` (per-row log loss), ``rmse`` and ``mae`` (per-row errors). The other metrics'
change limits, and every value threshold (``threshold``, ``min_*_change``, MLflow's), stay point
checks in the existing quality gates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...model.metrics import CLASSIFICATION
from .quality import Classified
from ...spec import CanarySpec
from ...spec.paired import (DEFAULT_BINS, DEFAULT_CONFIDENCE, DEFAULT_MAX_NEGATIVE_FLIPS, DEFAULT_MAX_NEGATIVE_FLIPS_PER_ERROR,
                            DEFAULT_MAX_PRECISION_DROP, DEFAULT_MAX_RECALL_DROP, DEFAULT_MIN_CLASS_SUPPORT)
from .calibration import DEFAULT_LOG_LOSS_MAX_RELATIVE_DROP, ece_gates, log_loss_change, reliability
from .change import accuracy_change, loss_change, negative_flips
from .classes import class_gates, slice_gates
from .outcome import Finding, check_confidence, family_confidence

#: the metrics whose change limits (max_absolute_drop, max_relative_drop) are decided on paired rows
PAIRED_METRICS = ("accuracy", "log_loss", "rmse", "mae")
#: (max_absolute_drop, max_relative_drop) of each paired metric when the spec names none (the
#: accuracy and RMSE defaults are today's quality defaults; log loss: see calibration.py)
DEFAULT_DROPS: dict[str, tuple[float | None, float | None]] = {
    "accuracy": (0.01, None), "log_loss": (None, DEFAULT_LOG_LOSS_MAX_RELATIVE_DROP), "rmse": (None, 0.05),
}


@dataclass(frozen=True)
class PairedLimits:
    """The limits of the paired gates.

    Attributes:
        confidence: of every bound (``canary.confidence``).
        prove: a pass needs proof; an undecided gate is inconclusive (``canary.prove``).
        drops: metric -> (max_absolute_drop, max_relative_drop) (``canary.quality.<metric>``).
        max_negative_flips: the share of rows the champion got right that the candidate may get wrong
            (``canary.champion.max_negative_flips``; None: off).
        max_negative_flips_per_error: or this many times the champion's error rate, where that is more
            (``canary.champion.max_negative_flips_per_error``; None: ``max_negative_flips`` alone).
        max_recall_drop, max_precision_drop, min_class_support: the per-class gates (``canary.classes``;
            ``min_class_support`` is also the rows a slice of ``golden.slices`` needs).
        max_ece, max_ece_increase, bins: the calibration gates, off unless given (``canary.calibration``).
    """

    confidence: float = DEFAULT_CONFIDENCE
    prove: bool = False
    drops: Mapping[str, tuple[float | None, float | None]] = field(default_factory=lambda: dict(DEFAULT_DROPS))
    max_negative_flips: float | None = DEFAULT_MAX_NEGATIVE_FLIPS
    max_negative_flips_per_error: float | None = DEFAULT_MAX_NEGATIVE_FLIPS_PER_ERROR
    max_recall_drop: float | None = DEFAULT_MAX_RECALL_DROP
    max_precision_drop: float | None = DEFAULT_MAX_PRECISION_DROP
    min_class_support: int = DEFAULT_MIN_CLASS_SUPPORT
    max_ece: float | None = None
    max_ece_increase: float | None = None
    bins: int = DEFAULT_BINS

    def __post_init__(self) -> None:
        check_confidence(self.confidence)

    def drop(self, metric: str) -> dict[str, float | None]:
        """The metric's limits as keyword arguments (both None: not gated)."""
        absolute, relative = self.drops.get(metric, (None, None))
        return {"max_absolute_drop": absolute, "max_relative_drop": relative}

    def gated(self, metric: str) -> bool:
        return any(v is not None for v in self.drop(metric).values())


def limits_from_spec(canary: CanarySpec, task: str, **limits: Any) -> PairedLimits:
    """The paired limits of ``task`` from the spec's canary section; ``limits`` given override them.

    A paired metric's ``max_absolute_drop`` / ``max_relative_drop`` come from ``canary.quality``; a
    classifier's log-loss gate is on by default unless ``canary.quality.log_loss`` names it (null: off).
    ``canary.confidence``, ``canary.prove``, ``canary.champion.max_negative_flips``, ``canary.classes`` (``enabled:
    false`` turns both class gates off) and ``canary.calibration`` give the rest.
    """
    drops = {m: (g.max_absolute_drop, g.max_relative_drop) for m, g in canary.quality_gates(task).items()
             if m in PAIRED_METRICS and (g.max_absolute_drop is not None or g.max_relative_drop is not None)}
    if task == CLASSIFICATION and "log_loss" not in canary.quality:
        drops["log_loss"] = DEFAULT_DROPS["log_loss"]
    classes, calibration = canary.classes, canary.calibration
    from_spec: dict[str, Any] = {
        "confidence": canary.confidence, "prove": canary.prove, "drops": drops, "max_negative_flips": canary.champion.max_negative_flips,
        "max_negative_flips_per_error": canary.champion.max_negative_flips_per_error,
        "max_recall_drop": classes.max_recall_drop if classes.enabled else None,
        "max_precision_drop": classes.max_precision_drop if classes.enabled else None,
        "min_class_support": classes.min_support, "max_ece": calibration.max_ece,
        "max_ece_increase": calibration.max_ece_increase, "bins": calibration.bins,
    }
    return PairedLimits(**{**from_spec, **limits})


def in_candidate_classes(theirs: Classified, mine: Classified, rename: Mapping[str, str] | None = None) -> np.ndarray:
    """The champion's answers as the candidate's class indices (by class text; -2: a class the candidate lacks)."""
    position = {text: i for i, text in enumerate(mine.served)}
    texts = [(rename or {}).get(t, t) for t in theirs.served]
    lookup = np.array([position.get(t, -2) for t in texts] + [-2], dtype=np.int64)
    return lookup[np.where(theirs.predicted >= 0, theirs.predicted, len(texts))]


def classifier_findings(mine: Classified, theirs: Classified | None, limits: PairedLimits | None = None, *,
                        champion_name: str = "the champion", rename: Mapping[str, str] | None = None,
                        slices: Mapping[str, np.ndarray] | None = None) -> tuple[list[Finding], dict[str, Any]]:
    """The paired gates of a classifier and its champion on the same golden rows.

    Args:
        mine: the candidate's answers against the ground truth.
        theirs: the champion's (its own class indices), or None: only the candidate's own calibration gate.
        limits: the limits (default :class:`PairedLimits`).
        champion_name: how the champion is named.
        rename: the champion's class text -> the candidate's (a native champion answers class values).
        slices: golden column name -> [n] values, for the per-slice gates.

    Returns:
        (findings, report sections ``flips``, ``classes``, ``reliability``, ``slices``).
    """
    limits = limits or PairedLimits()
    common = {"confidence": limits.confidence, "prove": limits.prove}
    findings: list[Finding] = []
    sections: dict[str, Any] = {}
    if mine.scores is not None:
        sections["reliability"] = {"candidate": reliability(mine.scores, mine.truth, limits.bins)}
    if theirs is None:
        if mine.scores is not None:
            findings += ece_gates(mine.scores, mine.truth, max_ece=limits.max_ece, bins=limits.bins, **common)
        return findings, sections
    right_c, right_h = mine.predicted == mine.truth, theirs.predicted == theirs.truth
    if limits.gated("accuracy"):
        findings += accuracy_change(right_c, right_h, **limits.drop("accuracy"), champion_name=champion_name, **common)
    if limits.max_negative_flips is not None:
        flips = negative_flips(right_c, right_h, max_share=limits.max_negative_flips,
                               per_error=limits.max_negative_flips_per_error, champion_name=champion_name, **common)
        findings.append(flips)
        sections["flips"] = flips.data
    found, sections["classes"] = class_gates(
        mine.truth, mine.predicted, in_candidate_classes(theirs, mine, rename), mine.served,
        max_recall_drop=limits.max_recall_drop, max_precision_drop=limits.max_precision_drop,
        min_support=limits.min_class_support, champion_name=champion_name, **common)
    findings += found
    if mine.scores is not None and theirs.scores is not None:
        sections["reliability"]["champion"] = reliability(theirs.scores, theirs.truth, limits.bins)
        if limits.gated("log_loss"):
            findings += log_loss_change(mine.scores, theirs.scores, mine.truth, **limits.drop("log_loss"),
                                        champion_name=champion_name, **common)
        findings += ece_gates(mine.scores, mine.truth, max_ece=limits.max_ece, champion_scores=theirs.scores,
                              max_ece_increase=limits.max_ece_increase, bins=limits.bins, **common)
    if slices:
        found, sections["slices"] = _sliced(slices, right_c, right_h, limits, champion_name)
        findings += found
    return findings, sections


def _sliced(slices: Mapping[str, np.ndarray], right_c: np.ndarray, right_h: np.ndarray, limits: PairedLimits,
            champion_name: str) -> tuple[list[Finding], dict[str, Any]]:
    """Accuracy and negative flips on each slice of each sliced column."""
    findings: list[Finding] = []
    tables: dict[str, Any] = {}
    confidence = family_confidence(limits.confidence, len(slices))  # the columns' gates hold it together too
    per_slice = int(limits.gated("accuracy")) * sum(v is not None for v in limits.drop("accuracy").values()) + int(
        limits.max_negative_flips is not None)
    for column, values in slices.items():
        def gates(mask: np.ndarray, confidence: float, label: str) -> list[Finding]:
            out = accuracy_change(right_c[mask], right_h[mask], **limits.drop("accuracy"), confidence=confidence,
                                  prove=limits.prove, champion_name=champion_name) if limits.gated("accuracy") else []
            if limits.max_negative_flips is not None:
                out.append(negative_flips(right_c[mask], right_h[mask], max_share=limits.max_negative_flips,
                                          per_error=limits.max_negative_flips_per_error,
                                          confidence=confidence, prove=limits.prove, champion_name=champion_name))
            return out

        found, tables[column] = slice_gates(values, column, gates, gates_per_slice=max(per_slice, 1),
                                            min_support=limits.min_class_support, confidence=confidence)
        findings += found
    return findings, tables


def regressor_findings(truth: np.ndarray, mine: np.ndarray, theirs: np.ndarray, limits: PairedLimits | None = None, *,
                       champion_name: str = "the champion") -> list[Finding]:
    """The paired RMSE and MAE change gates of a regressor and its champion (predictions shaped like ``truth``)."""
    limits = limits or PairedLimits()
    t = np.asarray(truth, np.float64).reshape(len(truth), -1)
    a, b = (np.asarray(x, np.float64).reshape(len(x), -1) for x in (mine, theirs))
    with np.errstate(invalid="ignore", over="ignore"):
        squared = ((a - t) ** 2).mean(axis=1), ((b - t) ** 2).mean(axis=1)
        absolute = np.abs(a - t).mean(axis=1), np.abs(b - t).mean(axis=1)
    common = {"confidence": limits.confidence, "prove": limits.prove, "champion_name": champion_name}
    findings = []
    if limits.gated("rmse"):
        findings += loss_change("rmse", *squared, root=True, **limits.drop("rmse"), **common)
    if limits.gated("mae"):
        findings += loss_change("mae", *absolute, **limits.drop("mae"), **common)
    return findings
