"""The data the report's plots are drawn from: small and bounded whatever the golden set's size.

The canary computes these where it computes its figures (:mod:`.stage`) and keeps them in
``report.json`` under ``plots``, so a page can be rebuilt from the JSON alone:

- ``classes``: confusion matrices (candidate and champion against the ground truth, candidate
  against champion) and per-class precision, recall and F1 of both; at most
  :data:`MAX_CLASSES` classes per axis (the rest summed into ``(other)``);
- ``predicted``: the predicted distribution of both models: class frequencies, or for a regressor
  histograms over shared bin edges (:data:`HISTOGRAM_BINS`);
- ``residuals``: a regressor's predictions against the target on at most
  :data:`RESIDUAL_SAMPLE` evenly spaced golden rows (the same rows for both models);
- ``latency``: each model's latency distribution as (bucket upper edge, count) pairs of the load
  phase's log-linear :class:`~.load.Histogram` (never raw latencies), at most
  :data:`MAX_LATENCY_BUCKETS` buckets;
- ``parity_errors``: per numeric output, a histogram of ``|served - native|`` in log10 bins from
  1e-12 to 1e3 (:data:`PARITY_BINS_PER_DECADE` per decade), exact zeros and non-finite counted apart.

The tuning trials the throughput-vs-p99 plot reads are in ``report.tuning`` already.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..measure.load import OCTAVES, SUB_BUCKETS, Histogram
from ..judge.quality import Classified

#: classes per confusion-matrix axis and per-class plot; the least frequent others are summed
MAX_CLASSES = 20
#: the name of the row/column that sums the classes left out
OTHER = "(other)"
#: a ground-truth value that is none of the model's classes
NOT_A_CLASS = "(not a class of the model)"
HISTOGRAM_BINS = 30
RESIDUAL_SAMPLE = 400
MAX_LATENCY_BUCKETS = 200
PARITY_LOG10_RANGE = (-12, 3)
PARITY_BINS_PER_DECADE = 2


def _order(counts: dict[str, int], preferred: Sequence[str]) -> tuple[list[str], set[str]]:
    """(the labels to show, in ``preferred`` order then the rest; those summed into (other))."""
    seen = [c for c in preferred if c in counts] + sorted(c for c in counts if c not in preferred)
    if len(seen) <= MAX_CLASSES:
        return seen, set()
    kept = set(sorted(seen, key=lambda c: (-counts[c], seen.index(c)))[: MAX_CLASSES - 1])
    return [c for c in seen if c in kept] + [OTHER], set(seen) - kept


def confusion(rows: np.ndarray, columns: np.ndarray, order: Sequence[str], *, row_title: str, column_title: str) -> dict[str, Any]:
    """A confusion matrix of two label vectors (text, one per golden row).

    Args:
        rows: the reference of each row (the ground truth, or the champion's answer).
        columns: what the model answered for each row.
        order: the class order to show first (the model's own class order).
    """
    rows, columns = np.asarray(rows, dtype=object), np.asarray(columns, dtype=object)
    counts: dict[str, int] = {}
    for value in (*rows, *columns):
        counts[value] = counts.get(value, 0) + 1
    labels, other = _order(counts, order)
    index = {c: i for i, c in enumerate(labels)}
    if other:
        index.update({c: len(labels) - 1 for c in other})
    matrix = np.zeros((len(labels), len(labels)), dtype=np.int64)
    np.add.at(matrix, (np.array([index[r] for r in rows], dtype=np.int64), np.array([index[c] for c in columns], dtype=np.int64)), 1)
    return {"labels": labels, "matrix": matrix.tolist(), "rows_are": row_title, "columns_are": column_title,
            "rows": int(len(rows)), "classes_summed": len(other)}


def per_class(truth: np.ndarray, predicted: np.ndarray, order: Sequence[str]) -> dict[str, Any]:
    """Precision, recall, F1 and support of each class (text labels), the most frequent :data:`MAX_CLASSES`."""
    truth, predicted = np.asarray(truth, dtype=object), np.asarray(predicted, dtype=object)
    classes = [c for c in order if c != NOT_A_CLASS]
    support = {c: int((truth == c).sum()) for c in classes}
    if len(classes) > MAX_CLASSES:
        classes = sorted(classes, key=lambda c: -support[c])[:MAX_CLASSES]
        classes = [c for c in order if c in classes]
    out: dict[str, list[float]] = {"precision": [], "recall": [], "f1": []}
    for c in classes:
        tp = int(((truth == c) & (predicted == c)).sum())
        answered = int((predicted == c).sum())
        precision = tp / answered if answered else 0.0
        recall = tp / support[c] if support[c] else 0.0
        out["precision"].append(round(precision, 6))
        out["recall"].append(round(recall, 6))
        out["f1"].append(round(2 * precision * recall / (precision + recall), 6) if precision + recall else 0.0)
    return {"classes": classes, "support": [support[c] for c in classes], **out}


def class_frequencies(candidate: np.ndarray, champion: np.ndarray | None, order: Sequence[str]) -> dict[str, Any]:
    """The share of rows answered with each class, for both models (classes capped as in :func:`confusion`)."""
    answers = [np.asarray(candidate, dtype=object)] + ([np.asarray(champion, dtype=object)] if champion is not None else [])
    counts: dict[str, int] = {}
    for t in answers:
        for value in t:
            counts[value] = counts.get(value, 0) + 1
    labels, other = _order(counts, order)

    def shares(t: np.ndarray) -> list[float]:
        n = max(len(t), 1)
        values = [float((t == c).sum()) / n for c in labels if c != OTHER]
        if other:
            values.append(float(np.isin(t, list(other)).sum()) / n)
        return [round(v, 6) for v in values]

    return {"kind": "classes", "classes": labels, "candidate": shares(answers[0]),
            "champion": shares(answers[1]) if champion is not None else None}


def numeric_histograms(candidate: np.ndarray, champion: np.ndarray | None, bins: int = HISTOGRAM_BINS) -> dict[str, Any]:
    """Histograms of two models' numeric predictions over the same bin edges (finite values only)."""
    a = np.asarray(candidate, dtype=np.float64).reshape(-1)
    b = np.asarray(champion, dtype=np.float64).reshape(-1) if champion is not None else None
    finite = [x[np.isfinite(x)] for x in (a, b) if x is not None]
    values = np.concatenate(finite) if finite else np.zeros(0)
    low, high = (float(values.min()), float(values.max())) if values.size else (0.0, 1.0)
    if high <= low:
        low, high = low - 0.5, high + 0.5
    edges = np.linspace(low, high, bins + 1)
    count = lambda x: np.histogram(x[np.isfinite(x)], bins=edges)[0].tolist()  # noqa: E731
    return {"kind": "numeric", "edges": [_round(e) for e in edges], "candidate": count(a),
            "champion": count(b) if b is not None else None,
            "nonfinite": {"candidate": int((~np.isfinite(a)).sum()), "champion": int((~np.isfinite(b)).sum()) if b is not None else None}}


def residual_sample(target: np.ndarray, candidate: np.ndarray, champion: np.ndarray | None,
                    size: int = RESIDUAL_SAMPLE) -> dict[str, Any]:
    """Target and predictions on at most ``size`` evenly spaced golden values (the same ones for both)."""
    t = np.asarray(target, dtype=np.float64).reshape(-1)
    c = np.asarray(candidate, dtype=np.float64).reshape(-1)
    p = np.asarray(champion, dtype=np.float64).reshape(-1) if champion is not None else None
    n = min(len(t), len(c), len(p) if p is not None else len(c))
    pick = np.unique(np.linspace(0, n - 1, min(size, n)).round().astype(np.int64)) if n else np.zeros(0, dtype=np.int64)
    return {"values": int(n), "sampled": int(len(pick)), "target": [_round(v) for v in t[pick]],
            "candidate": [_round(v) for v in c[pick]], "champion": [_round(v) for v in p[pick]] if p is not None else None}


def parity_errors(expected: np.ndarray, served: np.ndarray, *, atol: float | None, rtol: float | None) -> dict[str, Any]:
    """A histogram of ``|served - expected|`` over every element, in log10 bins (see the module docstring)."""
    lo, hi = PARITY_LOG10_RANGE
    edges = np.linspace(lo, hi, (hi - lo) * PARITY_BINS_PER_DECADE + 1)
    e = np.asarray(expected, dtype=np.float64).reshape(-1)
    s = np.asarray(served, dtype=np.float64).reshape(-1)
    if e.shape != s.shape:
        return {"skipped": f"shape {np.shape(served)} where the native model answers {np.shape(expected)}"}
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(s - e)
    same_nonfinite = ~np.isfinite(e) & ((np.isnan(e) & np.isnan(s)) | (e == s))
    diff = np.where(same_nonfinite, 0.0, diff)
    finite = np.isfinite(diff)
    zero = finite & (diff == 0)
    positive = diff[finite & ~zero]
    logs = np.log10(positive) if positive.size else np.zeros(0)
    counts = np.histogram(np.clip(logs, lo, hi - 1e-9), bins=edges)[0]
    return {"log10_edges": [float(x) for x in edges], "counts": counts.tolist(), "zero": int(zero.sum()),
            "nonfinite": int((~finite).sum()), "elements": int(diff.size),
            "below_range": int((logs < lo).sum()), "above_range": int((logs >= hi).sum()),
            "max_abs": float(positive.max()) if positive.size else 0.0, "atol": atol, "rtol": rtol}


def latency_buckets(histogram: Histogram) -> dict[str, Any]:
    """A latency distribution as (upper edge ms, count) pairs of its non-empty buckets.

    Neighbouring buckets are merged, a power of two at a time, until at most
    :data:`MAX_LATENCY_BUCKETS` are left (each merge halves the resolution, 1/64 of an octave at first).
    """
    regular_len = OCTAVES * SUB_BUCKETS
    regular, overflow = histogram.counts[:regular_len], histogram.counts[regular_len:]
    width = 1
    while np.count_nonzero(regular) + np.count_nonzero(overflow) > MAX_LATENCY_BUCKETS and width < SUB_BUCKETS:
        width *= 2
        regular = regular.reshape(-1, 2).sum(axis=1)
    counts = np.concatenate([regular, overflow])
    regular_len = len(regular)
    uppers, kept = [], []
    for i in np.flatnonzero(counts):
        if i >= regular_len:  # the overflow bucket: its edge is the largest latency seen
            upper = histogram.max_s * 1e3
        else:
            upper = min(Histogram._upper_ms(int((i + 1) * width - 1)), histogram.max_s * 1e3)
        uppers.append(_round(upper))
        kept.append(int(counts[i]))
    return {"upper_ms": uppers, "counts": kept, "requests": histogram.count, "bucket_octave_fraction": width / SUB_BUCKETS,
            **{k: _round(v) for k, v in histogram.figures().items()}}


def histogram_of(latencies_ms: Sequence[float]) -> Histogram:
    """A :class:`~.load.Histogram` of latencies in ms (the replay's, when there was no load phase)."""
    h = Histogram()
    for ms in latencies_ms:
        h.record(ms / 1e3)
    return h


def _round(value: float, digits: int = 6) -> float | None:
    """``value`` to ``digits`` significant digits (JSON stays short); None for NaN/Inf."""
    v = float(value)
    if not math.isfinite(v):
        return None
    return float(f"{v:.{digits}g}")


# --- the sections, from what the canary read (called by :mod:`.stage`) ----------------------------------


def texts(read: Classified) -> tuple[np.ndarray, np.ndarray]:
    """(truth, answer) of each row as the model's own class text; a class it lacks as :data:`NOT_A_CLASS`."""
    names = np.array([*read.served, NOT_A_CLASS, OTHER], dtype=object)
    truth = np.where(read.truth >= 0, read.truth, len(read.served))
    predicted = np.where(read.predicted >= 0, read.predicted, len(read.served) + 1)
    return names[truth], names[predicted]


def classes_section(candidate: Classified, champion: Classified | None, *,
                    champion_names: dict[str, str] | None = None) -> dict[str, Any]:
    """Confusion matrices against the ground truth and per-class figures of both models.

    ``champion_names`` renames the champion's class text to the candidate's (a native champion
    answers class values where the candidate answers label names).
    """
    truth, answer = texts(candidate)
    out: dict[str, Any] = {
        "candidate_vs_truth": confusion(truth, answer, candidate.served, row_title="ground truth", column_title="candidate"),
        "per_class": {"candidate": per_class(truth, answer, candidate.served)},
    }
    if champion is not None:
        truth, answer = texts(champion)
        order = list(champion.served)
        if champion_names:
            rename = np.vectorize(lambda t: champion_names.get(t, t), otypes=[object])
            truth, answer, order = rename(truth), rename(answer), [champion_names.get(c, c) for c in order]
        out["champion_vs_truth"] = confusion(truth, answer, order, row_title="ground truth", column_title="champion")
        out["per_class"]["champion"] = per_class(truth, answer, order)
    return out


def agreement_section(candidate: np.ndarray, champion: np.ndarray | None, order: Sequence[str]) -> dict[str, Any]:
    """Candidate against champion, row by row (classifiers): the matrix and both predicted distributions."""
    from ..judge.compare import top1

    mine = top1(candidate)
    theirs = top1(champion) if champion is not None else None
    out: dict[str, Any] = {"predicted": class_frequencies(mine, theirs, order)}
    if theirs is not None:
        out["candidate_vs_champion"] = confusion(theirs, mine, order, row_title="champion", column_title="candidate")
    return out
