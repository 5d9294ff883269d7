"""The report's plots, drawn from ``report.json`` alone (its ``plots`` and ``tuning`` sections).

Each function returns one ``<figure class="plot">`` (inline SVG and a caption), or, where the
plot cannot be drawn (no ground truth, no champion, no load phase), a placeholder of the same
kind saying why, so a plot never silently vanishes. See :mod:`.plotdata` for what each plot's
data is and how it stays bounded.

Each figure places its axes at fixed margins (:func:`fixed_margins`), sized from what the plot writes
(its tick labels measured on the font's glyphs, axis labels, title, a legend above): matplotlib then
draws it once, when it is saved, where constrained layout drew it several times to measure its text
(benchmarks/bench_report_plots.py prints the two side by side).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...webpage import (
    CANDIDATE_COLOUR, CHAMPION_COLOUR, FAILED_COLOUR, LABEL_LINE, LEGEND_ROW, TICK_PAD, TITLE_LINE, decade_axis, esc,
    X_NUMBERS, fixed_margins, legend_above, log_axis, new_figure, number_inches, placeholder_html, plot_html, style_axes,
    text_inches,
)


def _figure(width: float, height: float) -> Any:
    return new_figure(width, height)


def _legend_inches(labels: list[str], size: float = 8.0) -> float:
    """The width of a one-row legend of ``labels`` (:func:`~model_release.webpage.legend_above`: a handle of
    2 em, 0.8 em to the text, 2 em between entries)."""
    em = size / 72
    return sum(text_inches([t], size) + 2.8 * em for t in labels) + 2 * em * max(len(labels) - 1, 0) + 0.3


def _rotated_inches(labels: list[str], rotated: bool) -> float:
    """The height of x tick labels: their width times sin 45° when rotated, a line when not."""
    return text_inches(labels) * 0.72 + 0.1 if rotated else 0.18


def _short(label: str, width: int = 18) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def confusion(cm: dict[str, Any] | None, label: str, title: str, caption: str, *, missing: str) -> str:
    """A confusion matrix: counts in each cell, shaded by the share of its row."""
    if not cm:
        return placeholder_html(label, missing, caption)
    labels = [_short(str(c)) for c in cm["labels"]]
    m = np.asarray(cm["matrix"], dtype=np.float64)
    n = len(labels)
    side = min(max(3.0, 0.42 * n + 1.7), 7.0)
    rotated = n > 3 or text_inches(labels) > 0.9 * (side - 0.9) / n  # labels wider than their column
    under = _rotated_inches(labels, rotated)
    left = max(TICK_PAD + text_inches(labels) + LABEL_LINE + 0.1, under if rotated else 0.0)
    width = left + max(side - 0.9, text_inches([title], 12.0) + 0.15) + 0.15  # the title fits over the matrix
    fig = fixed_margins(_figure(width, side + (under if rotated else 0.0) * 0.5), left=left,
                        bottom=TICK_PAD + under + LABEL_LINE + 0.08, top=TITLE_LINE + 0.06, right=0.15)
    ax = fig.add_subplot()
    rows = m.sum(axis=1, keepdims=True)
    share = np.divide(m, rows, out=np.zeros_like(m), where=rows > 0)
    ax.pcolormesh(share, cmap="Blues", vmin=0, vmax=1, edgecolors="#ffffff", linewidth=0.5)
    ax.set_xlim(0, n)
    ax.set_ylim(n, 0)
    if n <= 14:
        for i in range(n):
            for j in range(n):
                if m[i, j]:
                    ax.text(j + 0.5, i + 0.5, f"{int(m[i, j])}", ha="center", va="center", fontsize=8,
                            color="#ffffff" if share[i, j] > 0.6 else "#1f2328")
    ticks = np.arange(n) + 0.5
    ax.set_xticks(ticks, labels, rotation=45 if rotated else 0, ha="right" if rotated else "center")
    ax.set_yticks(ticks, labels)
    ax.set_xlabel(f"{cm['columns_are']} answered")
    ax.set_ylabel(cm["rows_are"])
    ax.set_title(title)
    if cm.get("classes_summed"):
        caption += f" {cm['classes_summed']} less frequent classes are summed into (other)."
    return plot_html(fig, label, caption)


def per_class(data: dict[str, Any] | None, label: str, caption: str, *, missing: str) -> str:
    """Precision, recall and F1 per class: candidate and champion side by side."""
    if not data or not data.get("candidate"):
        return placeholder_html(label, missing, caption)
    mine, theirs = data["candidate"], data.get("champion")
    classes = list(mine["classes"])
    n = len(classes)
    fig = _figure(7.6, max(1.9, 0.34 * n * (2 if theirs else 1) + 1.0))
    fixed_margins(fig, left=TICK_PAD + text_inches([_short(str(c)) for c in classes]) + 0.1, bottom=0.18 + TICK_PAD + 0.1,
                  top=TITLE_LINE + (LEGEND_ROW if theirs else 0.0) + 0.06, right=0.2, wspace=0.15)
    axes = fig.subplots(1, 3, sharey=True)
    y = np.arange(n)
    height = 0.38 if theirs else 0.6
    for ax, metric in zip(axes, ("precision", "recall", "f1")):
        style_axes(ax)
        ax.barh(y - (height / 2 if theirs else 0), mine[metric], height=height, color=CANDIDATE_COLOUR, label="candidate")
        if theirs:
            theirs_by = dict(zip(theirs["classes"], theirs[metric]))
            values = [theirs_by.get(c, np.nan) for c in classes]
            ax.barh(y + height / 2, values, height=height, color=CHAMPION_COLOUR, label="champion")
        ax.set_xlim(0, 1.0)
        ax.set_xticks([0, 0.5, 1], ["0", "0.5", "1"])  # three ticks: neighbouring panels' labels never touch
        ax.set_title(metric)
    axes[0].set_yticks(y, [_short(str(c)) for c in classes])
    axes[0].invert_yaxis()
    if theirs:  # one legend for the three panels, above their titles (over the first panel it hid "precision")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=8, frameon=False)
    else:
        caption += " No champion figures: only the candidate is shown."
    return plot_html(fig, label, caption)


def latency_cdf(latency: dict[str, Any] | None, label: str, caption: str, *, missing: str, champion_missing: str) -> str:
    """The share of requests answered within each latency, candidate and champion (log scale)."""
    if not latency or not latency.get("candidate"):
        return placeholder_html(label, missing, caption)
    lines = {target: f"{target}: p50 {data.get('p50_ms') or math.nan:.3g} ms, p99 {data.get('p99_ms') or math.nan:.3g} ms"
             for target in ("candidate", "champion") if (data := latency.get(target)) and data.get("counts")}
    left = TICK_PAD + text_inches(["0.0"]) + LABEL_LINE + 0.1
    fig = fixed_margins(_figure(max(5.6, left + _legend_inches(list(lines.values())) + 0.1), 3.2), left=left,
                        bottom=X_NUMBERS, top=LEGEND_ROW + 0.06)  # wide enough for the legend's one row
    ax = fig.add_subplot()
    style_axes(ax)
    for target, colour in (("candidate", CANDIDATE_COLOUR), ("champion", CHAMPION_COLOUR)):
        data = latency.get(target)
        if target not in lines:
            continue
        upper = np.asarray(data["upper_ms"], dtype=np.float64)
        cdf = np.cumsum(data["counts"]) / max(sum(data["counts"]), 1)
        ax.step(np.concatenate([[upper[0] * 0.98], upper]), np.concatenate([[0.0], cdf]), where="post", color=colour,
                linewidth=1.6, label=lines[target])
    for q in (0.5, 0.99):
        ax.axhline(q, color="#8c959f", linewidth=0.7, linestyle=":")
    ax.set_xscale("log")
    log_axis(ax.xaxis)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("latency per request (ms, log scale)")
    ax.set_ylabel("share of requests")
    legend_above(ax)
    if not latency.get("champion"):
        caption += f" {esc(champion_missing)}"
    return plot_html(fig, label, caption)


def tuning(tuning_: dict[str, Any] | None, label: str, caption: str, *, missing: str) -> str:
    """Each tuning trial's throughput against its p99; the configuration kept is circled."""
    trials = (tuning_ or {}).get("trials") or []
    if not trials:
        carried_from = (tuning_ or {}).get("carried_from")
        why = (tuning_ or {}).get("skipped") or (
            f"No trials: {tuning_.get('chosen_label')} was carried from the champion {carried_from} "
            f"(measured in {tuning_.get('measured_in')}, same tuning fingerprint)" if carried_from else missing)
        return placeholder_html(label, why, caption)
    throughputs = [t.get("throughput_rows_per_s") for t in trials if isinstance(t.get("throughput_rows_per_s"), int | float)]
    fig = fixed_margins(_figure(5.6, 3.2), left=TICK_PAD + number_inches(throughputs) + LABEL_LINE + 0.1,
                        bottom=X_NUMBERS, top=LEGEND_ROW + 0.06, right=0.3)
    ax = fig.add_subplot()
    style_axes(ax)
    chosen = tuning_.get("chosen")
    for i, t in enumerate(trials, 1):
        bad = bool(t.get("errors"))
        ax.scatter(t.get("p99_ms"), t.get("throughput_rows_per_s"), s=36, color=FAILED_COLOUR if bad else CANDIDATE_COLOUR,
                   marker="x" if bad else "o", zorder=3)
        ax.annotate(f"#{i}", (t.get("p99_ms"), t.get("throughput_rows_per_s")), textcoords="offset points", xytext=(5, 4), fontsize=8)
        if chosen is not None and t.get("setting") == chosen:
            ax.scatter(t.get("p99_ms"), t.get("throughput_rows_per_s"), s=190, facecolors="none", edgecolors="#1a7f37",
                       linewidths=1.6, zorder=4, label="kept")
    if tuning_.get("p99_limit_ms"):
        ax.axvline(tuning_["p99_limit_ms"], color=FAILED_COLOUR, linestyle="--", linewidth=0.9, label="p99 limit")
    ax.set_xlabel("p99 latency (ms)")
    ax.set_ylabel("throughput (rows/s)")
    legend_above(ax)
    return plot_html(fig, label, caption)


def predicted(data: dict[str, Any] | None, label: str, caption: str, *, missing: str, champion_missing: str,
              xlabel: str = "predicted value") -> str:
    """The predicted distribution of both models: class shares, or histograms of a numeric prediction."""
    if not data or data.get("candidate") is None:
        return placeholder_html(label, missing, caption)
    theirs = data.get("champion")
    if data.get("kind") == "classes":
        classes = [_short(str(c)) for c in data["classes"]]
        n = len(classes)
        fig = _figure(max(4.2, min(0.5 * n + 2.5, 9.0)), 3.0)
        rotated = n > 4
        under = _rotated_inches(classes, rotated)
        fixed_margins(fig, left=max(TICK_PAD + text_inches(["0.00"]) + LABEL_LINE + 0.1, under if rotated else 0.0),
                      bottom=TICK_PAD + under + 0.08, top=LEGEND_ROW + 0.06)
        ax = fig.add_subplot()
        style_axes(ax)
        x = np.arange(n)
        width = 0.4 if theirs else 0.6
        ax.bar(x - (width / 2 if theirs else 0), data["candidate"], width=width, color=CANDIDATE_COLOUR, label="candidate")
        if theirs:
            ax.bar(x + width / 2, theirs, width=width, color=CHAMPION_COLOUR, label="champion")
        ax.set_xticks(x, classes, rotation=45 if rotated else 0, ha="right" if rotated else "center")
        ax.set_ylabel("share of golden rows")
    else:
        edges = np.asarray(data["edges"], dtype=np.float64)
        counts = list(data["candidate"]) + list(theirs or [])
        fig = fixed_margins(_figure(5.6, 3.0), left=TICK_PAD + number_inches(counts) + LABEL_LINE + 0.1, bottom=X_NUMBERS,
                            top=LEGEND_ROW + 0.06, right=0.3)
        ax = fig.add_subplot()
        style_axes(ax)
        ax.stairs(data["candidate"], edges, color=CANDIDATE_COLOUR, linewidth=1.6, label="candidate")
        if theirs:
            ax.stairs(theirs, edges, color=CHAMPION_COLOUR, linewidth=1.6, label="champion")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("rows")
    legend_above(ax)
    if theirs is None:
        caption += f" {esc(champion_missing)}"
    return plot_html(fig, label, caption)


def cosines(data: dict[str, Any] | None, label: str, caption: str, *, missing: str) -> str:
    """An embedding model: how many golden rows have each cosine between the candidate's and the champion's vector."""
    if not data or not data.get("counts"):
        return placeholder_html(label, missing, caption)
    edges = np.asarray(data["edges"], dtype=np.float64)
    fig = fixed_margins(_figure(5.6, 3.0), left=TICK_PAD + number_inches(data["counts"]) + LABEL_LINE + 0.1, bottom=X_NUMBERS,
                        top=0.2, right=0.3)
    ax = fig.add_subplot()
    style_axes(ax)
    ax.stairs(data["counts"], edges, color=CANDIDATE_COLOUR, linewidth=1.6, fill=True, alpha=0.5)
    ax.set_xlim(-1.0, 1.0)
    ax.set_xlabel("cosine of the row's candidate and champion vectors")
    ax.set_ylabel("rows")
    return plot_html(fig, label, caption)


def residuals(data: dict[str, Any] | None, label: str, caption: str, *, missing: str) -> str:
    """A regressor's residual (prediction minus target) against the target, on a sample of golden rows."""
    if not data or not data.get("target"):
        return placeholder_html(label, missing, caption)
    t = np.asarray(data["target"], dtype=np.float64)
    spread = [np.asarray(data[k], dtype=np.float64) - t for k in ("candidate", "champion") if data.get(k) is not None]
    fig = fixed_margins(_figure(5.6, 3.2), left=TICK_PAD + number_inches(np.concatenate(spread) if spread else [1.0])
                        + LABEL_LINE + 0.1, bottom=X_NUMBERS, top=LEGEND_ROW + 0.06, right=0.3)
    ax = fig.add_subplot()
    style_axes(ax)
    ax.axhline(0, color="#57606a", linewidth=0.8)
    for target, colour, marker in (("candidate", CANDIDATE_COLOUR, "o"), ("champion", CHAMPION_COLOUR, "x")):
        if data.get(target) is None:
            continue
        p = np.asarray(data[target], dtype=np.float64)
        ax.scatter(t, p - t, s=12 if marker == "o" else 16, color=colour, marker=marker, alpha=0.7, linewidths=0.9,
                   label=target)
    ax.set_xlabel("target")
    ax.set_ylabel("prediction - target")
    legend_above(ax)
    caption += f" {data.get('sampled')} of {data.get('values')} golden values, evenly spaced."
    if data.get("champion") is None:
        caption += " No champion: only the candidate is shown."
    return plot_html(fig, label, caption)


def parity_errors(name: str, data: dict[str, Any], label: str, caption: str) -> str:
    """How far each served element is from the native model's: a histogram over log10 bins, atol marked."""
    if data.get("skipped"):
        return placeholder_html(label, data["skipped"], caption)
    edges = 10.0 ** np.asarray(data["log10_edges"], dtype=np.float64)
    fig = fixed_margins(_figure(5.0, 2.8), left=TICK_PAD + number_inches(data["counts"]) + LABEL_LINE + 0.1,
                        bottom=X_NUMBERS, top=(LEGEND_ROW if data.get("atol") else 0.0) + 0.12, right=0.3)
    ax = fig.add_subplot()
    style_axes(ax)
    ax.stairs(data["counts"], edges, fill=True, color=CANDIDATE_COLOUR, alpha=0.85)
    if data.get("atol"):
        ax.axvline(data["atol"], color=FAILED_COLOUR, linestyle="--", linewidth=1.0, label=f"atol {data['atol']:g}")
        legend_above(ax)
    ax.set_xscale("log")
    decade_axis(ax.xaxis)
    ax.set_xlabel(f"|served - native| of output {_short(name, 30)}")
    ax.set_ylabel("elements")
    extra = [f"{data.get('zero', 0)} of {data.get('elements', 0)} elements are exactly equal (not drawn)"]
    if data.get("nonfinite"):
        extra.append(f"{data['nonfinite']} are NaN or infinite where the native model is not")
    if data.get("below_range") or data.get("above_range"):
        extra.append(f"{data.get('below_range', 0)} below 1e-12 and {data.get('above_range', 0)} above 1e3 are drawn at the ends")
    return plot_html(fig, label, caption + " " + esc("; ".join(extra)) + ".")


def reliability(data: dict[str, Any] | None, label: str, caption: str, *, missing: str, champion_missing: str) -> str:
    """The reliability diagram: each score bin's accuracy against its mean top-1 score, both models; rows per bin below."""
    mine = (data or {}).get("candidate")
    if not mine or not any(b.get("rows") for b in mine.get("bins") or []):
        return placeholder_html(label, missing, caption)
    # the candidate drawn over the champion, the champion dashed with open markers: an equal model's lines stay both visible
    models = [("candidate", CANDIDATE_COLOUR, {"marker": "o", "zorder": 4}),
              ("champion", CHAMPION_COLOUR, {"marker": "s", "linestyle": "--", "markerfacecolor": "none", "zorder": 3})]
    drawn = [(t, c, m, data[t]) for t, c, m in models if (data or {}).get(t)]
    eces = {t: f"ECE {f['ece']:.2g}" if f.get("ece") is not None else "ECE -" for t, _, _, f in drawn}
    legend = ["calibrated", *(f"{t} ({ece})" for t, ece in eces.items())]
    left = TICK_PAD + text_inches(["0.0"]) + LABEL_LINE + 0.1
    fig = fixed_margins(_figure(max(5.0, left + _legend_inches(legend) + 0.1), 4.6), left=left, bottom=X_NUMBERS,
                        top=LEGEND_ROW + 0.06)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, 1], gridspec_kw={"hspace": 0.12})
    for ax in (top, bottom):
        style_axes(ax)
    top.plot([0, 1], [0, 1], color="#8c959f", linewidth=0.9, linestyle="--", label=legend[0])
    width = min(((b.get("upper") or 0) - (b.get("lower") or 0) for b in mine["bins"]), default=0.1) / (len(drawn) + 0.5)
    for i, (target, colour, style, figures) in enumerate(drawn):
        bins = [b for b in figures.get("bins") or [] if b.get("rows") and b.get("confidence") is not None]
        top.plot([b["confidence"] for b in bins], [b["accuracy"] for b in bins], color=colour, markersize=4.5, linewidth=1.4,
                 label=f"{target} ({eces[target]})", **style)
        every = [b for b in figures.get("bins") or [] if b.get("lower") is not None]
        total = max(sum(b.get("rows") or 0 for b in every), 1)
        bottom.bar([b["lower"] + width * (i + 0.75) for b in every], [(b.get("rows") or 0) / total for b in every],
                   width=width, color=colour, align="center")
    top.set_xlim(0, 1)
    top.set_ylim(0, 1.02)
    top.set_ylabel("accuracy in the bin")
    bottom.set_ylabel("share of rows")
    bottom.set_xlabel("top-1 class score (mean in each bin)")
    legend_above(top)  # one row above the panels; the figure is wide enough for it
    if not (data or {}).get("champion"):
        caption += f" {esc(champion_missing)}"
    return plot_html(fig, label, caption)
