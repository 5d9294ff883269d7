"""Per-class and per-slice gates of a classifier against the champion, on the same rows.

Overall accuracy can stay within its limit while one small class collapses. Per class ``k``:

- **recall**: the rows whose truth is ``k``, right or wrong for each model: the paired accuracy
  gate on those rows (:func:`.change.accuracy_finding`), allowed ``max_recall_drop``;
- **precision**: of the rows each model answers ``k``, the share that are ``k``: the models answer
  ``k`` on different rows, so its drop is bounded by a paired bootstrap over all rows (the same
  resampled rows for both), allowed ``max_precision_drop``.

A class with fewer than ``min_support`` golden rows (for precision: fewer answers by either model)
is reported, not gated. The gates of one table hold the confidence together (Bonferroni: each is
tested at ``1 - (1 - confidence) / gates``), so more classes do not mean more false blocks.

Slices (:func:`slice_gates`): the rows of each value of a categorical golden column
(``golden.slices``), with the same gates run on each slice's rows.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...spec.paired import (DEFAULT_MAX_PRECISION_DROP, DEFAULT_MAX_RECALL_DROP, DEFAULT_MIN_CLASS_SUPPORT,  # noqa: F401
                             MIN_SUPPORT_SETTING, PRECISION_SETTING, RECALL_SETTING, SLICES_SETTING)
from .change import accuracy_finding
from .outcome import BLOCK, DEFAULT_CONFIDENCE, INCONCLUSIVE, Finding, Interval, decide, family_confidence, fmt, percent
from .paired import DEFAULT_RESAMPLES, DEFAULT_SEED, Discordance, bootstrap_intervals



def class_gates(truth: np.ndarray, candidate: np.ndarray, champion: np.ndarray, classes: list[str], *,
                max_recall_drop: float | None = DEFAULT_MAX_RECALL_DROP,
                max_precision_drop: float | None = DEFAULT_MAX_PRECISION_DROP, min_support: int = DEFAULT_MIN_CLASS_SUPPORT,
                confidence: float = DEFAULT_CONFIDENCE, prove: bool = False, champion_name: str = "the champion",
                resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> tuple[list[Finding], list[dict[str, object]]]:
    """Recall and precision of every class against the champion's.

    Args:
        truth: [n] true class index of each row (negative: a class the model lacks).
        candidate, champion: [n] predicted class index of each row, by each model.
        classes: the class names, by index.
        max_recall_drop, max_precision_drop: allowed drops (None: that gate is off, its figures still shown).
        min_support: rows a class needs to be gated.
        confidence: of all the gates of the table together.
        prove, champion_name, resamples, seed: as in :mod:`.change`.

    Returns:
        (the findings of the gated classes, the table: one row per class with its figures and outcomes).
    """
    t, a, b = (np.asarray(x, dtype=np.int64).reshape(-1) for x in (truth, candidate, champion))
    support = [int((t == k).sum()) for k in range(len(classes))]
    answered = [(int((a == k).sum()), int((b == k).sum())) for k in range(len(classes))]
    recall_gated = [max_recall_drop is not None and s >= min_support for s in support]
    precision_gated = [max_precision_drop is not None and min(n) >= min_support for n in answered]
    each = family_confidence(confidence, sum(recall_gated) + sum(precision_gated))
    precision = _precision_intervals(t, a, b, [k for k, g in enumerate(precision_gated) if g], each, resamples, seed)
    findings: list[Finding] = []
    table: list[dict[str, object]] = []
    for k, name in enumerate(classes):
        rows = t == k
        row: dict[str, object] = {"class": name, "support": support[k], "answered": {"candidate": answered[k][0],
                                                                                    "champion": answered[k][1]},
                                  "recall": _share(a[rows] == k, b[rows] == k), "precision": _precision(t, a, b, k)}
        if recall_gated[k]:
            d = Discordance.of(a[rows] == k, b[rows] == k)
            rec = row["recall"]
            finding = accuracy_finding(d, float(max_recall_drop), confidence=each, prove=prove, metric=f"recall of class {name!r}",
                                       name=f"class.recall[{name}]", setting=RECALL_SETTING, limit=f"at most {max_recall_drop:g} lower",
                                       candidate=rec["candidate"], champion=rec["champion"], champion_name=champion_name)
            findings.append(finding)
            row["recall_outcome"] = finding.outcome
        else:
            row["recall_outcome"] = None
            row["recall_not_gated"] = _why_not(max_recall_drop, support[k], min_support, RECALL_SETTING, "golden rows")
        if precision_gated[k]:
            finding = _precision_finding(precision[k], row["precision"], answered[k], name, float(max_precision_drop), prove)
            findings.append(finding)
            row["precision_outcome"] = finding.outcome
        else:
            row["precision_outcome"] = None
            row["precision_not_gated"] = _why_not(max_precision_drop, min(answered[k]), min_support, PRECISION_SETTING,
                                                  "answers by one of the models")
        table.append(row)
    return findings, table


def _why_not(limit: float | None, count: int, min_support: int, setting: str, what: str) -> str:
    if limit is None:
        return f"{setting} is off"
    return f"{count} {what}, fewer than the {min_support} a class needs to be gated ({MIN_SUPPORT_SETTING})"


def _share(mine: np.ndarray, theirs: np.ndarray) -> dict[str, float | None]:
    return {"candidate": float(mine.mean()) if mine.size else None, "champion": float(theirs.mean()) if theirs.size else None}


def _precision(t: np.ndarray, a: np.ndarray, b: np.ndarray, k: int) -> dict[str, float | None]:
    return {"candidate": float((t[a == k] == k).mean()) if (a == k).any() else None,
            "champion": float((t[b == k] == k).mean()) if (b == k).any() else None}


def _precision_intervals(t: np.ndarray, a: np.ndarray, b: np.ndarray, gated: list[int], confidence: float, resamples: int,
                         seed: int) -> dict[int, Interval]:
    """Class -> bounds on its precision drop (champion's minus candidate's): one paired bootstrap of all rows for all classes."""
    if not gated:
        return {}
    columns = np.column_stack([c for k in gated for c in ((a == k) & (t == k), a == k, (b == k) & (t == k), b == k)])

    def drops(m: np.ndarray) -> np.ndarray:
        m = m.reshape(len(m), -1, 4)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.nan_to_num(m[:, :, 2] / m[:, :, 3]) - np.nan_to_num(m[:, :, 0] / m[:, :, 1])

    return dict(zip(gated, bootstrap_intervals(columns.astype(np.float64), drops, confidence, resamples=resamples, seed=seed)))


def _precision_finding(interval: Interval, p: dict[str, float | None], answered: tuple[int, int], name: str, allowed: float,
                       prove: bool) -> Finding:
    """The precision gate of one class from the bounds on its drop."""
    confidence = interval.confidence
    outcome = decide(interval, allowed, prove=prove)
    head = f"precision of class {name!r} {fmt(p['candidate'])} against {fmt(p['champion'])}"
    if outcome == BLOCK:
        message = (f"{head}: lower by at least {fmt(interval.lower)} with {percent(confidence)} confidence, beyond "
                   f"{PRECISION_SETTING} {allowed:g}")
    elif outcome == INCONCLUSIVE:
        message = f"{head}: lower by between {fmt(interval.lower)} and {fmt(interval.upper)}, neither beyond {allowed:g} nor within it shown"
    else:
        message = f"{head}: a drop beyond {allowed:g} cannot be shown (at most {fmt(interval.upper)})"
    return Finding(f"class.precision[{name}]", outcome, PRECISION_SETTING, message, candidate=p["candidate"],
                   champion=p["champion"], limit=f"at most {allowed:g} lower",
                   data={"drop": interval.to_dict(), "allowed_drop": allowed, "confidence": confidence})


#: a slice's gates: (its rows as a mask, the confidence each gate needs, the slice's label) -> findings
SliceGates = Callable[[np.ndarray, float, str], list[Finding]]


def slice_gates(values: np.ndarray, column: str, gates: SliceGates, *, gates_per_slice: int = 1,
                min_support: int = DEFAULT_MIN_CLASS_SUPPORT,
                confidence: float = DEFAULT_CONFIDENCE) -> tuple[list[Finding], list[dict[str, object]]]:
    """The same gates on the rows of each value of the categorical golden column ``column``.

    Args:
        values: [n] the column's value on each golden row.
        column: the column's name (``golden.slices``).
        gates: builds one slice's findings (e.g. :func:`.change.accuracy_change` on its rows).
        gates_per_slice: how many findings ``gates`` makes per slice (for the joint confidence).
        min_support: rows a slice needs to be gated; smaller slices are listed, not gated.
        confidence: of all the slices' gates together.

    Returns:
        (the findings, named ``<gate>[column=value]``; one table row per value with its rows and outcomes).
    """
    text = np.array([v.decode() if isinstance(v, bytes) else str(v) for v in np.asarray(values).reshape(-1)], dtype=object)
    names, counts = np.unique(text, return_counts=True)
    gated = [str(v) for v, c in zip(names, counts) if c >= min_support]
    each = family_confidence(confidence, len(gated) * gates_per_slice)
    findings, table = [], []
    for value, count in zip(names.tolist(), counts.tolist()):
        label = f"{column}={value}"
        row: dict[str, object] = {"slice": label, "rows": int(count)}
        if value in gated:
            found = gates(text == value, each, label)
            for f in found:
                f.name = f"{f.name}[{label}]"
                f.message = f"slice {label}: {f.message}"
            findings += found
            row["outcomes"] = {f.name: f.outcome for f in found}
        else:
            row["not_gated"] = (f"{count} golden rows, fewer than the {min_support} a slice needs to be gated "
                                f"({MIN_SUPPORT_SETTING})")
        table.append(row)
    return findings, table
