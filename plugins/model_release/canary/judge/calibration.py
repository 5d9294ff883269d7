"""Probability quality of a classifier that serves class scores: log loss per row, calibration, the reliability diagram.

Labels can stay the same on every row while the probabilities behind them go flat (a temperature
above one) or overconfident: accuracy, agreement and flips see nothing. Two figures do:

- the **log loss** per row (``-log p[true class]``), gated against the champion's on the same rows
  by :func:`log_loss_change` (a paired bootstrap, :func:`.change.loss_change`), on by default;
- the **expected calibration error** (ECE: over ``bins`` equal-width bins of the top-1 score, the
  row-weighted gap between the mean score and the accuracy; Guo et al., ICML 2017), reported with
  the reliability diagram's data by :func:`reliability` and gateable by :func:`ece_gates`
  (an absolute ``max_ece`` and an increase over the champion ``max_ece_increase``, each bootstrapped
  with the rows' bins fixed, so the ECE is a function of column means).

Rows whose scores are not finite, or whose true class the model lacks, have no log loss and no bin:
they are left out and counted (the non-finite gate decides them, before any metric).
"""

from __future__ import annotations

import math

import numpy as np

from ...spec.paired import DEFAULT_BINS, MAX_ECE_INCREASE_SETTING, MAX_ECE_SETTING
from .change import loss_change
from .outcome import BLOCK, DEFAULT_CONFIDENCE, INCONCLUSIVE, Finding, Interval, decide, fmt, percent
from .paired import DEFAULT_RESAMPLES, DEFAULT_SEED, bootstrap_interval

#: log_loss.max_relative_drop when the spec gives none: a quarter worse than the champion on the same
#: rows, shown with the gate's confidence. Log loss swings with a few confident mistakes, so a tighter
#: default would block sound retrains; flattened or overconfident probabilities are several times worse
DEFAULT_LOG_LOSS_MAX_RELATIVE_DROP = 0.25
#: the smallest score a row's true class is given before its log is taken (as sklearn's log_loss)
EPSILON = 1e-15


def _normalised(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(scores clipped and each row summing to one, rows whose scores are all finite)."""
    s = np.asarray(scores, dtype=np.float64)
    s = s.reshape(len(s), -1)
    ok = np.isfinite(s).all(axis=1)
    p = np.clip(np.where(ok[:, None], s, 1.0), EPSILON, 1.0)
    return p / p.sum(axis=1, keepdims=True), ok


def row_log_loss(scores: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """[n] per-row log loss; NaN for a row with non-finite scores or a true class the model lacks (index < 0)."""
    p, ok = _normalised(scores)
    t = np.asarray(truth, dtype=np.int64).reshape(-1)
    known = ok & (t >= 0) & (t < p.shape[1])
    out = np.full(len(t), np.nan)
    out[known] = -np.log(p[np.flatnonzero(known), t[known]])
    return out


def _bins(scores: np.ndarray, truth: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(top-1 score, right or wrong, bin index, usable rows) of each row."""
    p, ok = _normalised(scores)
    t = np.asarray(truth, dtype=np.int64).reshape(-1)
    usable = ok & (t >= 0)
    confidence = p.max(axis=1)
    right = (p.argmax(axis=1) == t).astype(np.float64)
    index = np.minimum((confidence * bins).astype(np.int64), bins - 1)
    return confidence, right, index, usable


def _ece_columns(scores: np.ndarray, truth: np.ndarray, bins: int, usable: np.ndarray | None = None) -> np.ndarray:
    """[n, bins]: each row's (score - right) in its own bin's column, 0 elsewhere; the ECE is the sum of |column means|."""
    confidence, right, index, ok = _bins(scores, truth, bins)
    ok = ok if usable is None else usable
    columns = np.zeros((len(confidence), bins))
    rows = np.flatnonzero(ok)
    columns[rows, index[rows]] = confidence[rows] - right[rows]
    return columns[ok]


def _ece(means: np.ndarray) -> np.ndarray:
    return np.abs(means).sum(axis=1)


def reliability(scores: np.ndarray, truth: np.ndarray, bins: int = DEFAULT_BINS) -> dict[str, object]:
    """The reliability diagram's data and the ECE of one model.

    Returns:
        ``{"bins": [{lower, upper, rows, confidence, accuracy}], "ece", "rows", "rows_left_out"}``;
        a bin without rows has None for its mean score and accuracy.
    """
    confidence, right, index, ok = _bins(scores, truth, bins)
    table = []
    for b in range(bins):
        inside = ok & (index == b)
        k = int(inside.sum())
        table.append({"lower": b / bins, "upper": (b + 1) / bins, "rows": k,
                      "confidence": float(confidence[inside].mean()) if k else None,
                      "accuracy": float(right[inside].mean()) if k else None})
    n = int(ok.sum())
    ece = float(_ece(_ece_columns(scores, truth, bins).mean(axis=0, keepdims=True))[0]) if n else math.nan
    return {"bins": table, "ece": ece, "rows": n, "rows_left_out": int((~ok).sum())}


def log_loss_change(candidate_scores: np.ndarray, champion_scores: np.ndarray, truth: np.ndarray, *,
                    max_relative_drop: float | None = DEFAULT_LOG_LOSS_MAX_RELATIVE_DROP,
                    max_absolute_drop: float | None = None, confidence: float = DEFAULT_CONFIDENCE, prove: bool = False,
                    champion_name: str = "the champion", resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> list[Finding]:
    """The log-loss change gate: the candidate's per-row log loss against the champion's on the same rows."""
    return loss_change("log_loss", row_log_loss(candidate_scores, truth), row_log_loss(champion_scores, truth),
                       max_absolute_drop=max_absolute_drop, max_relative_drop=max_relative_drop, confidence=confidence,
                       prove=prove, champion_name=champion_name, resamples=resamples, seed=seed)


def ece_gates(candidate_scores: np.ndarray, truth: np.ndarray, *, max_ece: float | None = None,
              champion_scores: np.ndarray | None = None, max_ece_increase: float | None = None, bins: int = DEFAULT_BINS,
              confidence: float = DEFAULT_CONFIDENCE, prove: bool = False, resamples: int = DEFAULT_RESAMPLES,
              seed: int = DEFAULT_SEED) -> list[Finding]:
    """ECE gates: the candidate's ECE at most ``max_ece``; at most ``max_ece_increase`` above the champion's."""
    findings = []
    _, _, _, mine_ok = _bins(candidate_scores, truth, bins)
    if max_ece is not None and mine_ok.any():
        columns = _ece_columns(candidate_scores, truth, bins)
        interval = bootstrap_interval(columns, _ece, confidence, resamples=resamples, seed=seed)
        outcome = decide(interval, max_ece, prove=prove)
        findings.append(Finding(
            "calibration.ece", outcome, MAX_ECE_SETTING,
            _ece_message("expected calibration error", interval, max_ece, MAX_ECE_SETTING, outcome, confidence,
                         int(mine_ok.sum()), bins),
            candidate=interval.estimate, limit=f"<= {max_ece:g}", data={"ece": interval.to_dict(), "bins": bins}))
    if max_ece_increase is not None and champion_scores is not None:
        _, _, _, theirs_ok = _bins(champion_scores, truth, bins)
        both = mine_ok & theirs_ok
        if both.any():
            columns = np.hstack([_ece_columns(candidate_scores, truth, bins, both), _ece_columns(champion_scores, truth, bins, both)])
            interval = bootstrap_interval(columns, lambda m: _ece(m[:, :bins]) - _ece(m[:, bins:]), confidence,
                                          resamples=resamples, seed=seed)
            outcome = decide(interval, max_ece_increase, prove=prove)
            findings.append(Finding(
                "calibration.ece_change", outcome, MAX_ECE_INCREASE_SETTING,
                _ece_message("increase of the expected calibration error over the champion's", interval, max_ece_increase,
                             MAX_ECE_INCREASE_SETTING, outcome, confidence, int(both.sum()), bins),
                candidate=interval.estimate, champion=0.0, limit=f"<= {max_ece_increase:g}",
                data={"ece_increase": interval.to_dict(), "bins": bins}))
    return findings


def _ece_message(what: str, interval: Interval, limit: float, setting: str, outcome: str, confidence: float, rows: int,
                 bins: int) -> str:
    head = f"{what} {fmt(interval.estimate)} over {rows} rows in {bins} bins"
    if outcome == BLOCK:
        return (f"{head}: at least {fmt(interval.lower)} with {percent(confidence)} confidence, beyond {setting} "
                f"{limit:g}: the served probabilities do not mean what they say; recalibrate, or change {setting}")
    if outcome == INCONCLUSIVE:
        return f"{head}: between {fmt(interval.lower)} and {fmt(interval.upper)}, neither shown beyond {limit:g} nor within it"
    return f"{head}: at most {fmt(interval.upper)} with {percent(confidence)} confidence (limit {limit:g})"
