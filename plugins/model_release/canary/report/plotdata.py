"""The data the report's plots are drawn from: small and bounded whatever the golden set's size.

The canary builds them after judging (:func:`plots_of`, from the evidence the figures were
judged on) and keeps them in ``report.json`` under ``plots``, so a page can be rebuilt from the
JSON alone:

- ``classes``: confusion matrices (candidate and champion against the ground truth, candidate
  against champion) and per-class precision, recall and F1 of both; at most
  :data:`MAX_CLASSES` classes per axis (the rest summed into ``(other)``);
- ``predicted``: the predicted distribution of both models: class frequencies, or for a regressor
  histograms over shared bin edges (:data:`HISTOGRAM_BINS`);
- ``vectors``: an embedding model against the champion: a histogram of each row's cosine between
  the two models' vectors (:data:`COSINE_BINS` bins over [-1, 1]) and histograms of both models'
  vector norms over shared edges;
- ``residuals``: a regressor's predictions against the target on at most
  :data:`RESIDUAL_SAMPLE` evenly spaced golden rows (the same rows for both models);
- ``latency``: each model's latency distribution as (bucket upper edge, count) pairs of the load
  phase's log-linear :class:`~..measure.load.Histogram` (never raw latencies), at most
  :data:`MAX_LATENCY_BUCKETS` buckets;
- ``parity_errors``: per numeric output, a histogram of ``|served - native|`` in log10 bins from
  1e-12 to 1e3 (:data:`PARITY_BINS_PER_DECADE` per decade), exact zeros and non-finite counted apart.

- ``paired``: the paired statistics against the champion (:func:`paired_section`, from
  ``quality.paired`` once judging wrote it, never while judging): flips, the per-class and
  per-slice tables and the reliability diagrams with ECE and log loss, at most
  :data:`MAX_CLASSES` classes, :data:`MAX_SLICES` slices per column and
  :data:`MAX_RELIABILITY_BINS` bins per model.

The tuning trials the throughput-vs-p99 plot reads are in ``report.tuning`` already.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..judge.judging import Evidence
from ..judge.quality import Classified
from ..measure.load import OCTAVES, SUB_BUCKETS, Histogram

#: classes per confusion-matrix axis and per-class plot; the least frequent others are summed
MAX_CLASSES = 20
#: the name of the row/column that sums the classes left out
OTHER = "(other)"
#: a ground-truth value that is none of the model's classes
NOT_A_CLASS = "(not a class of the model)"
HISTOGRAM_BINS = 30
#: bins of the cosine histogram, over [-1, 1]
COSINE_BINS = 40
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


def vectors_section(cosine: np.ndarray, norms: tuple[np.ndarray, np.ndarray]) -> dict[str, Any]:
    """An embedding model against the champion: each row's cosine, and both models' norms (bounded histograms)."""
    edges = np.linspace(-1.0, 1.0, COSINE_BINS + 1)
    counts = np.histogram(np.clip(np.asarray(cosine, dtype=np.float64), -1.0, 1.0), bins=edges)[0].tolist()
    return {"cosine": {"edges": [_round(e) for e in edges], "counts": counts}, "norms": numeric_histograms(*norms)}


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
    """A :class:`~..measure.load.Histogram` of latencies in ms (the replay's, when there was no load phase)."""
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


# --- the sections, from what the canary read (called by :func:`plots_of`) -----------------------------------


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


def plots_of(evidence: Evidence, *, load: Mapping[str, Histogram] | None,
             replay_ms: Mapping[str, Sequence[float]] | None) -> dict[str, Any]:
    """The report's ``plots`` section, drawn from what judging kept (:class:`~..judge.judging.Evidence`).

    ``load``: the load phase's histogram per target (the latency plot's source when there was one);
    else ``replay_ms``, each target's request latencies on the correctness replay (None: not replayed).
    """
    plots: dict[str, Any] = {}
    if load is not None:
        plots["latency"] = {"source": "load phase", **{t: latency_buckets(h) for t, h in load.items()}}
    if evidence.parity is not None:
        plots["parity_errors"] = {name: parity_errors(expected, served, atol=atol, rtol=rtol)
                                  for name, (expected, served, atol, rtol) in evidence.parity.items()}
    if load is None and replay_ms is not None:
        plots["latency"] = {"source": "replay", **{t: latency_buckets(histogram_of(ms)) for t, ms in replay_ms.items()}}
    if evidence.residuals is not None:
        plots["residuals"] = residual_sample(*evidence.residuals)
    if evidence.classes is not None:
        mine, theirs, names = evidence.classes
        plots["classes"] = classes_section(mine, theirs, champion_names=names)
    if evidence.agreement is not None:
        plots.update(agreement_section(*evidence.agreement))
    if evidence.predicted is not None:
        plots["predicted"] = numeric_histograms(*evidence.predicted)
    if evidence.vectors is not None:
        plots["vectors"] = vectors_section(*evidence.vectors)
    return plots


# --- the paired statistics, from report.json's quality.paired (after judging) -------------------------------

#: slice values per golden column kept in the per-slice table, and the sliced columns kept
MAX_SLICES = MAX_CLASSES
MAX_SLICE_COLUMNS = 8
#: reliability bins kept per model; more equal-width bins are merged, neighbours together
MAX_RELIABILITY_BINS = 20
#: gate outcomes, the worst first (how the bounded tables choose the rows they keep)
_RANK = {"block": 0, "inconclusive": 1, "pass": 2}


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _maps(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _num(value: Any) -> float | None:
    """A finite number, or None (report.json writes NaN as null or as a string)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _change(pair: Any) -> float | None:
    """Candidate minus champion of a ``{"candidate", "champion"}`` pair; None when either is missing."""
    mine, theirs = _num(_map(pair).get("candidate")), _num(_map(pair).get("champion"))
    return None if mine is None or theirs is None else _round(mine - theirs)


def _bounds(interval: Any) -> dict[str, float | None] | None:
    """An interval of report.json (estimate, lower, upper, confidence), numbers rounded; None when absent."""
    i = _map(interval)
    return {k: _round(v) if _num(v) is not None else None for k, v in i.items()
            if k in ("estimate", "lower", "upper", "confidence")} or None


def _gate(finding: dict[str, Any] | None) -> dict[str, Any] | None:
    """A paired finding as the page shows it: outcome, figures, limit, setting, its sentence and the bound behind it."""
    if not finding:
        return None
    data = _map(finding.get("data"))
    out = {k: finding.get(k) for k in ("name", "outcome", "setting", "limit", "message")}
    out.update({k: _num(finding.get(k)) for k in ("candidate", "champion")})
    out["drop"] = _bounds(data.get("drop") or data.get("negative_share") or data.get("ece") or data.get("ece_increase"))
    out.update({k: data[k] for k in ("mcnemar_p", "rows", "rows_needed", "underpowered", "allowed_drop", "relative")
                if k in data})
    return out


def _split(name: str) -> tuple[str, str | None]:
    """``class.recall[setosa]`` -> (``class.recall``, ``setosa``); a name without brackets -> (name, None)."""
    if name.endswith("]") and "[" in name:
        head, _, inner = name.partition("[")
        return head, inner[:-1]
    return name, None


def with_paired_plots(report: Mapping[str, Any]) -> dict[str, Any]:
    """``report`` with ``plots.paired`` drawn from its judged ``quality.paired`` (:func:`paired_section`).

    Built when the report is written, after judging, from the figures report.json holds; a report that
    has it keeps its own.
    """
    report = dict(report)
    plots = _map(report.get("plots"))
    if "paired" not in plots:
        section = paired_section(report.get("quality"))
        if section is not None:
            report["plots"] = {**plots, "paired": section}
    return report


def paired_section(quality: Any) -> dict[str, Any] | None:
    """The page's data of the paired statistics, from ``quality.paired`` as judging wrote it; None when absent.

    Bounded whatever the golden set or the class count: at most :data:`MAX_CLASSES` classes (the
    blocked and inconclusive first, then the gated with the largest drops, then the most frequent),
    :data:`MAX_SLICES` slices per column and :data:`MAX_SLICE_COLUMNS` columns, and
    :data:`MAX_RELIABILITY_BINS` reliability bins per model; what was left out is counted.

    Returns:
        ``{"gates": the overall paired gates, "flips", "classes", "slices", "reliability"}``, each
        section None where judging made none (no champion, a regressor, no class scores).
    """
    quality = _map(quality)
    paired = _map(quality.get("paired"))
    if not paired:
        return None
    findings = _maps(paired.get("findings"))
    overall = {f["name"]: f for f in findings if isinstance(f.get("name"), str) and _split(f["name"])[1] is None}
    nested: dict[str, dict[str, dict[str, Any]]] = {}  # "class.recall" -> "setosa" -> finding
    for f in findings:
        head, key = _split(str(f.get("name", "")))
        if key is not None:
            nested.setdefault(head, {})[key] = f
    return {
        "gates": [_gate(f) for f in findings if _split(str(f.get("name", "")))[1] is None],
        "flips": flips_section(paired.get("flips"), overall, nested),
        "classes": classes_table(paired.get("classes"), nested),
        "slices": slices_tables(paired.get("slices"), nested),
        "reliability": reliability_section(paired.get("reliability"), quality, overall),
    }


def flips_section(flips: Any, overall: dict[str, dict[str, Any]],
                  nested: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any] | None:
    """Negative and positive flips on all rows, per gated class (its recall's discordant rows) and per gated slice.

    From the flip gate's figures, else from the accuracy gate's discordant pairs (the same rows).
    """
    flips, accuracy = _map(flips), _map(_map(overall.get("quality.accuracy")).get("data"))
    if flips.get("rows") is not None:
        rows, negative, positive = flips.get("rows"), flips.get("negative"), flips.get("positive")
    elif accuracy.get("rows") is not None:
        rows, negative, positive = accuracy.get("rows"), accuracy.get("worse"), accuracy.get("better")
    else:
        return None
    by_class = [{"class": name, "rows": _map(f.get("data")).get("rows"), "negative": _map(f.get("data")).get("worse"),
                 "positive": _map(f.get("data")).get("better"), "outcome": f.get("outcome")}
                for name, f in nested.get("class.recall", {}).items()]
    by_slice = []
    for label, f in nested.get("flips.negative", {}).items():
        data = _map(f.get("data"))
        by_slice.append({"slice": label, "rows": data.get("rows"), "negative": data.get("negative"),
                         "positive": data.get("positive"), "outcome": f.get("outcome")})
    worst = lambda r: (_RANK.get(r["outcome"], 3), -(_num(r["negative"]) or 0), -(_num(r["rows"]) or 0))  # noqa: E731
    return {"rows": rows, "negative": negative, "positive": positive,
            "negative_share": _bounds(flips.get("negative_share")), "allowed_share": flips.get("allowed_share"),
            "gate": _gate(overall.get("flips.negative")), "accuracy": _gate(overall.get("quality.accuracy")),
            "by_class": sorted(by_class, key=worst)[:MAX_CLASSES], "classes_left_out": max(len(by_class) - MAX_CLASSES, 0),
            "by_slice": sorted(by_slice, key=worst)[:MAX_SLICES], "slices_left_out": max(len(by_slice) - MAX_SLICES, 0)}


def _class_row(row: dict[str, Any], nested: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    name = str(row.get("class"))
    recall, precision = _map(nested.get("class.recall")).get(name), _map(nested.get("class.precision")).get(name)
    out = {"class": name, "support": row.get("support"), "answered": _map(row.get("answered")),
           "recall": {k: _num(_map(row.get("recall")).get(k)) for k in ("candidate", "champion")},
           "precision": {k: _num(_map(row.get("precision")).get(k)) for k in ("candidate", "champion")},
           "recall_change": _change(row.get("recall")), "precision_change": _change(row.get("precision"))}
    for metric, finding in (("recall", recall), ("precision", precision)):
        out[f"{metric}_outcome"] = row.get(f"{metric}_outcome")
        out[f"{metric}_not_gated"] = row.get(f"{metric}_not_gated")
        gate = _gate(finding)
        out[f"{metric}_drop"] = gate["drop"] if gate else None
        out[f"{metric}_p"] = gate.get("mcnemar_p") if gate else None
    return out


def classes_table(table: Any, nested: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any] | None:
    """The per-class table (support, recall and precision of both models, their change, gated or reported only), bounded."""
    rows = _maps(table)
    if not rows:
        return None

    def priority(i: int) -> tuple:
        r = rows[i]
        outcomes = [r.get("recall_outcome"), r.get("precision_outcome")]
        gated = any(o is not None for o in outcomes)
        drop = max((-(_change(r.get(m)) or 0.0) for m in ("recall", "precision")), default=0.0)
        return (min(_RANK.get(o, 3) for o in outcomes), not gated, -drop, -(_num(r.get("support")) or 0), i)

    kept = sorted(sorted(range(len(rows)), key=priority)[:MAX_CLASSES])  # the model's class order
    left = [rows[i] for i in range(len(rows)) if i not in set(kept)]
    gated = lambda r: r.get("recall_outcome") is not None or r.get("precision_outcome") is not None  # noqa: E731
    return {"rows": [_class_row(rows[i], nested) for i in kept], "classes": len(rows),
            "gated": sum(1 for r in rows if gated(r)),
            "left_out": {"classes": len(left), "gated": sum(1 for r in left if gated(r)),
                         "support": int(sum(_num(r.get("support")) or 0 for r in left))}}


def slices_tables(slices: Any, nested: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any] | None:
    """Per sliced golden column: each slice's rows, both models' accuracy, its flips and its gates' outcomes, bounded."""
    columns = {str(k): _maps(v) for k, v in _map(slices).items()}
    if not columns:
        return None
    out: dict[str, Any] = {}
    for column, rows in list(columns.items())[:MAX_SLICE_COLUMNS]:
        made = []
        for r in rows:
            label = str(r.get("slice"))
            accuracy, flips = _map(nested.get("quality.accuracy")).get(label), _map(nested.get("flips.negative")).get(label)
            outcomes = _map(r.get("outcomes"))
            made.append({"slice": label, "rows": r.get("rows"), "not_gated": r.get("not_gated"),
                         "outcome": min(outcomes.values(), key=lambda o: _RANK.get(o, 3)) if outcomes else None,
                         "accuracy": {"candidate": _num(_map(accuracy).get("candidate")), "champion": _num(_map(accuracy).get("champion"))},
                         "accuracy_change": _change(accuracy), "accuracy_drop": (_gate(accuracy) or {}).get("drop"),
                         "accuracy_p": _map(_map(accuracy).get("data")).get("mcnemar_p"),
                         "negative": _map(_map(flips).get("data")).get("negative"),
                         "positive": _map(_map(flips).get("data")).get("positive")})
        made.sort(key=lambda s: (_RANK.get(s["outcome"], 3), -(_num(s["rows"]) or 0)))
        out[column] = {"rows": made[:MAX_SLICES], "slices": len(made), "left_out": max(len(made) - MAX_SLICES, 0)}
    return {"columns": out, "columns_left_out": max(len(columns) - MAX_SLICE_COLUMNS, 0)}


def merge_bins(bins: Any, most: int = MAX_RELIABILITY_BINS) -> list[dict[str, Any]]:
    """Reliability bins (equal-width, in order), neighbours merged until at most ``most`` are left.

    A merged bin's mean score and accuracy are its rows' (the bins' means weighted by their rows).
    """
    bins = _maps(bins)
    width = max(1, math.ceil(len(bins) / most))
    out = []
    for start in range(0, len(bins), width):
        group = bins[start: start + width]
        rows = int(sum(_num(b.get("rows")) or 0 for b in group))

        def mean(key: str) -> float | None:
            weighted = [(_num(b.get(key)), _num(b.get("rows")) or 0) for b in group]
            weighted = [(v, w) for v, w in weighted if v is not None and w > 0]
            total = sum(w for _, w in weighted)
            return _round(sum(v * w for v, w in weighted) / total) if total else None

        out.append({"lower": _num(group[0].get("lower")), "upper": _num(group[-1].get("upper")), "rows": rows,
                    "confidence": mean("confidence"), "accuracy": mean("accuracy")})
    return out


def reliability_section(reliability: Any, quality: dict[str, Any], overall: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """Each model's reliability diagram (bins merged to at most :data:`MAX_RELIABILITY_BINS`), its ECE and its log loss."""
    reliability = _map(reliability)
    if not _map(reliability.get("candidate")):
        return None
    out: dict[str, Any] = {}
    for target in ("candidate", "champion"):
        r = _map(reliability.get(target))
        out[target] = {"bins": merge_bins(r.get("bins")), "bins_judged": len(_maps(r.get("bins"))), "ece": _num(r.get("ece")),
                       "rows": r.get("rows"), "rows_left_out": r.get("rows_left_out"),
                       "log_loss": _num(_map(quality.get(target)).get("log_loss"))} if r else None
    out["gates"] = [g for g in (_gate(overall.get(n)) for n in ("quality.log_loss", "calibration.ece", "calibration.ece_change")) if g]
    return out
