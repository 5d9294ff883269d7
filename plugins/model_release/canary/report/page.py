"""``report.html``: the canary's decision first, the plots behind it, every detail collapsed below.

The top of the page answers, in one screen, whether the release may ship, what changed against
the production champion, and why: the verdict, each gate as one line (its figure, its limit, the
champion's figure), the acknowledgements the spec made, and the reasons of a rejection. Then the
plots (:mod:`.plots`), each with a caption, section by section: quality on ground truth, the
candidate against the champion, row by row against the champion (flips, per class and per slice,
calibration: :mod:`.paired_page`, each part collapsible), latency, parity with the native model.
An embedding model's page has its vectors against the champion's instead of the first three (the
cosines, the norms and the figures gated: vectors have no residuals, classes or calibration). Then the details, each
collapsed: every gate's full sentence, the expectations, the load phase per model, the tuning
trials, the server, the golden set, the load order and the raw JSON. Wide tables scroll inside
their box. The page is rendered from ``report.json`` alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ...webpage import esc, finite, page
from . import paired_page, plots
from .decision import FAILED, INCONCLUSIVE, PASSED, SKIPPED, Decision, decision, number
from .plotdata import with_paired_plots

NOT_REACHED = "not measured: the canary stopped before this (see why above)"

_CSS = """
header.decision{border:2px solid #d0d7de;border-radius:.5rem;padding:.7rem 1rem .8rem;margin-top:.6rem}
header.decision.passed{border-color:#1a7f37} header.decision.rejected{border-color:#cf222e}
header.decision.inconclusive{border-color:#9a6700} .badge.open{background:#9a6700;color:#fff}
.verdict{font-size:1.05rem;margin:.1rem 0 .4rem}
.changes{display:flex;flex-wrap:wrap;gap:.5rem;margin:.4rem 0 .6rem}
.change{border:1px solid #d0d7de;border-radius:.3rem;padding:.25rem .6rem;min-width:10rem}
.change .t{font-size:12px;color:#59636e} .change .v{font-size:15px;font-weight:600} .change .c{font-size:12px;color:#59636e}
table.gates td{white-space:nowrap} table.gates td.lim{white-space:normal;min-width:9rem;max-width:22rem}
table.gates td.why{white-space:normal;font-size:12px;color:#59636e;min-width:16rem}
.mark{font-weight:700} .mark.failed{color:#cf222e} .mark.passed{color:#1a7f37} .mark.skipped{color:#6e7781}
.mark.inconclusive{color:#9a6700}
ul.reasons{margin:.3rem 0;padding-left:1.2rem;font-size:12.5px} ul.reasons li{margin:.1rem 0}
.acks{margin:.4rem 0;font-size:13px}
"""

_MARK = {FAILED: "✗ failed", INCONCLUSIVE: "? inconclusive", PASSED: "✓ passed", SKIPPED: "– skipped"}


def render_html(report: Mapping[str, Any]) -> str:
    """The report as one self-contained HTML page (see the module docstring)."""
    report = with_paired_plots(report)
    d = decision(report)
    title = f"canary {report.get('release_id', '')}: {d.verdict}"
    body = [_decision_block(report, d)]
    if _task(report) == "embedding":  # vectors: no residuals, no calibration, no classes
        body += _vectors_section(report)
    else:
        body += _quality_section(report) + _champion_section(report) + _paired_section(report)
    body += _latency_section(report) + _parity_section(report)
    body += _details(report, d)
    return page(title, body, css=_CSS + paired_page.CSS)


# --- the decision, one screen -------------------------------------------------------------------------


def _decision_block(report: dict[str, Any], d: Decision) -> str:
    counts = d.counts
    if d.passed:
        badge, sentence = "<span class='badge pass'>PASSED</span>", (
            f"May ship: every gate passed ({counts[PASSED]} passed, {counts[SKIPPED]} skipped).")
    elif d.inconclusive:
        badge, sentence = "<span class='badge open'>INCONCLUSIVE</span>", (
            f"Not decided: {counts[INCONCLUSIVE]} gate(s) could not decide and none failed. Nothing is promoted "
            "or rejected; a later canary decides.")
    else:
        badge = "<span class='badge fail'>REJECTED</span>"
        sentence = (f"Blocked: {counts[FAILED]} gate(s) failed." if counts[FAILED]
                    else "Blocked: the canary stopped before every gate could judge the model.")
    server = report.get("server") or {}
    facts = [f"release {esc(report.get('release_id', ''))}", f"model {esc(d.model)}",
             f"judged against <b>{esc(d.champion)}</b>",
             f"served by Triton {esc(server.get('version', '?'))} ({esc(server.get('mode', '?'))}: {esc(server.get('description', ''))})",
             f"{esc(report.get('finished_at') or report.get('started_at', ''))}", f"{number(report.get('duration_s'), 's')}"]
    parts = [
        f"<header class='decision {d.verdict}'>",
        f"<h1>{badge} Canary of {esc(report.get('release', ''))}</h1>",
        f"<p class='verdict'><b>{esc(sentence)}</b></p>",
        f"<p class='muted small'>{' · '.join(facts)}</p>",
        _changes(d),
        "<div class='box'>" + _gate_table(d) + "</div>",
    ]
    if d.acknowledgements:
        parts.append("<p class='acks'><b>Acknowledged by the spec:</b> " + "; ".join(
            f"<code>{esc(a.get('setting'))}</code>: “{esc(a.get('text'))}” <span class='muted'>({esc(a.get('meaning', ''))})</span>"
            for a in d.acknowledgements) + "</p>")
    if d.reasons and not d.passed:
        why = "What would decide it" if d.inconclusive else "Why it was rejected"
        parts.append(f"<b>{why}</b><ul class='reasons'>" + "".join(f"<li>{esc(r)}</li>" for r in d.reasons) + "</ul>")
    parts.append("</header>")
    return "\n".join(parts)


def _changes(d: Decision) -> str:
    if not d.changes:
        return ""
    cards = []
    for c in d.changes:
        tone = "" if c.better is None else (" class='good'" if c.better else " class='bad'")
        versus = f"champion {esc(c.champion)}" + (f" · <span{tone}>{esc(c.delta)}</span>" if c.delta else "")
        cards.append(f"<div class='change'><div class='t'>{esc(c.title)}</div><div class='v'>{esc(c.candidate)}</div>"
                     f"<div class='c'>{versus}</div></div>")
    return "<div class='changes' title='candidate, then the production champion'>" + "".join(cards) + "</div>"


def _gate_table(d: Decision) -> str:
    if not d.lines:
        return "<p class='muted'>No gate judged the model.</p>"
    rows = []
    for line in d.lines:
        mark = f"<span class='mark {line.status}'>{_MARK[line.status]}</span>"
        if line.status == SKIPPED:
            cells = f"<td colspan='3' class='why'>{esc(line.detail)}</td>"
        else:
            cells = (f"<td class='num'>{esc(line.candidate)}</td><td class='lim'>{esc(line.limit)}</td>"
                     f"<td class='num'>{esc(line.champion)}</td>")
        rows.append(f"<tr class='{line.status}' title='{esc(line.detail)}'><td>{mark}</td><td><b>{esc(line.name)}</b></td>"
                    f"{cells}<td class='muted small'>{esc(line.setting)}</td></tr>")
    return ("<table class='gates'><tr><th></th><th>gate</th><th>candidate</th><th>limit</th><th>champion</th><th>setting</th></tr>"
            + "".join(rows) + "</table>")


# --- the plots, section by section --------------------------------------------------------------------


def _task(report: dict[str, Any]) -> str | None:
    quality = report.get("quality") or {}
    kind = ((report.get("plots") or {}).get("predicted") or {}).get("kind")
    return quality.get("task") or {"numeric": "regression", "classes": "classification"}.get(kind)


def _no_champion(report: dict[str, Any]) -> str:
    champion = report.get("champion") or {}
    shift = report.get("shift") or {}
    if champion.get("kind") in (None, "none"):
        return "No champion: " + (champion.get("reason") or "the channel has no release yet")
    return "No champion figures: " + (shift.get("skipped") or "the champion was not replayed")


def _no_truth(report: dict[str, Any]) -> str:
    quality = report.get("quality") or {}
    if quality.get("skipped"):
        why = str(quality["skipped"])
        return why[0].upper() + why[1:] if why.lower().startswith("no ground truth") else "No ground truth: " + why
    return NOT_REACHED if not report.get("gates") else "No ground truth for this model"


def _quality_section(report: dict[str, Any]) -> list[str]:
    p = report.get("plots") or {}
    classes = p.get("classes") or {}
    quality = report.get("quality") or {}
    no_truth, no_champion = _no_truth(report), _no_champion(report)
    out = ["<h2>Quality on ground truth</h2>"]
    if _task(report) == "regression":
        figs = [plots.residuals(p.get("residuals"), "residuals", "Residual (prediction minus target) against the target: a "
                                "good model's points hug zero everywhere; a slope or a fan shows where it errs.", missing=no_truth)]
    else:
        missing_champion = no_truth if not quality.get("candidate") else no_champion
        figs = [
            plots.confusion(classes.get("candidate_vs_truth"), "confusion-candidate", "candidate against ground truth",
                            "Rows: the true class; columns: what the served candidate answered. The diagonal is right.",
                            missing=no_truth),
            plots.confusion(classes.get("champion_vs_truth"), "confusion-champion", "champion against ground truth",
                            "The production champion on the same golden rows, served beside the candidate.",
                            missing=missing_champion),
            plots.per_class(classes.get("per_class"), "per-class", "Precision, recall and F1 per class on the golden set: "
                            "candidate (blue) beside champion (orange).", missing=no_truth),
        ]
    out.append("<div class='plots'>" + "".join(figs) + "</div>")
    if quality.get("candidate"):
        theirs = quality.get("champion") or {}
        rows = "".join(f"<tr><td>{esc(m)}</td><td class='num'>{number(v)}</td><td class='num'>{number(theirs.get(m))}</td></tr>"
                       for m, v in quality["candidate"].items())
        out.append(f"<p class='muted small'>{esc(quality.get('task'))} on target {esc(quality.get('target'))}, "
                   f"{number(quality.get('rows'))} golden rows</p><div class='box'><table><tr><th>metric</th><th>candidate</th>"
                   f"<th>champion</th></tr>{rows}</table></div>")
    return out


def _champion_section(report: dict[str, Any]) -> list[str]:
    p = report.get("plots") or {}
    shift = report.get("shift") or {}
    no_champion = _no_champion(report)
    out = ["<h2>Against the production champion</h2>"]
    figs = []
    if _task(report) != "regression":
        figs.append(plots.confusion(p.get("candidate_vs_champion"), "confusion-agreement", "candidate against champion",
                                    "Rows: the champion's answer; columns: the candidate's, row by row on the same golden "
                                    "rows (no ground truth needed). Off the diagonal, they disagree.", missing=no_champion))
    figs.append(plots.predicted(p.get("predicted"), "predicted", "The shift in predicted distribution: how often each answer "
                                "is given (or, for a regressor, how the predictions spread), candidate beside champion.",
                                missing=NOT_REACHED if not report.get("gates") else "no output plays the role of a label or a prediction",
                                champion_missing=no_champion + "."))
    out.append("<div class='plots'>" + "".join(figs) + "</div>")
    figures = {k: v for k, v in shift.items() if not isinstance(v, dict | list)}
    if figures and "skipped" not in shift:
        out.append("<div class='box'><table><tr>" + "".join(f"<th>{esc(k)}</th>" for k in figures) + "</tr><tr>"
                   + "".join(f"<td class='num'>{number(v)}</td>" for v in figures.values()) + "</tr></table></div>")
    return out


def _vectors_section(report: dict[str, Any]) -> list[str]:
    """An embedding model: its vectors against the champion's, row by row (cosines, norms, the figures gated)."""
    vectors = (report.get("plots") or {}).get("vectors") or {}
    shift = report.get("shift") or {}
    no_champion = _no_champion(report)
    out = ["<h2>Vectors against the production champion</h2>",
           "<p class='muted small'>Both models embedded the same golden rows. An index built from the champion's vectors "
           "answers the candidate's queries only where each row's two vectors point the same way; "
           + ("canary.embedding.reindex acknowledges that the index is rebuilt, so only the neighbourhoods are gated."
              if shift.get("reindex") else "a retrain into a new space needs canary.embedding.reindex.") + "</p>"]
    figs = [plots.cosines(vectors.get("cosine"), "cosine", "Each golden row's cosine between the candidate's and the "
                          "champion's vector: near 1 the old index still answers; near 0 the space has changed.", missing=no_champion),
            plots.predicted(vectors.get("norms"), "norms", "The vector norms of both models over the golden rows "
                            "(dot-product scores move with them).", missing=no_champion, champion_missing=no_champion + ".",
                            xlabel="vector norm")]
    out.append("<div class='plots'>" + "".join(figs) + "</div>")
    keys = ("rows", "dims", "cosine_mean", "cosine_p05", "cosine_min", "retrieval", "neighbours", "norm_candidate",
            "norm_champion", "norm_change")
    if "skipped" not in shift and any(k in shift for k in keys):
        out.append("<div class='box'><table><tr>" + "".join(f"<th>{esc(k)}</th>" for k in keys) + "</tr><tr>"
                   + "".join(f"<td class='num'>{number(shift.get(k))}</td>" for k in keys) + "</tr></table></div>")
    return out


def _paired_section(report: dict[str, Any]) -> list[str]:
    quality = report.get("quality") if isinstance(report.get("quality"), dict) else {}
    no_truth = _no_truth(report) if quality.get("skipped") or not quality.get("candidate") else None
    why = paired_page.Why(truth=no_truth, champion=_no_champion(report), regressor=_task(report) == "regression",
                          reached=bool(report.get("gates")))
    return paired_page.section(report, why)


def _latency_section(report: dict[str, Any]) -> list[str]:
    p = report.get("plots") or {}
    latency = p.get("latency")
    load = report.get("load_phase") or {}
    source = (latency or {}).get("source", "load phase")
    no_champion = _no_champion(report)
    out = ["<h2>Latency</h2>"]
    if load.get("skipped"):
        out.append(f"<p class='muted small'>Load phase {esc(load['skipped'])}</p>")
    if load.get("note"):
        out.append(f"<p class='muted small'>{esc(load['note'])}</p>")
    tuning_missing = ("tuning was off (canary.tune.enabled is false in the spec)" if report.get("gates") else NOT_REACHED)
    figs = [
        plots.latency_cdf(latency, "latency-cdf", f"Latency distribution under the {esc(source)}: the share of requests answered "
                          f"within each time, candidate and champion measured in alternating windows on the same server "
                          f"({number(load.get('concurrency'))} in flight, {number(load.get('batch_rows'))} rows each).",
                          missing=NOT_REACHED if not report.get("gates") else "no latency was measured",
                          champion_missing=no_champion + "."),
        plots.tuning(report.get("tuning"), "tuning", "Tuning trials: each serving configuration's throughput against its "
                     "p99 (numbered as in the details below); the one kept is circled, the p99 limit dashed.",
                     missing=tuning_missing),
    ]
    out.append("<div class='plots'>" + "".join(figs) + "</div>")
    rows = []
    for target in ("candidate", "champion"):
        f = load.get(target)
        if f:
            rows.append(f"<tr><td>{target}</td>" + "".join(f"<td class='num'>{number(f.get(k))}</td>" for k in
                        ("p50_ms", "p95_ms", "p99_ms", "throughput_rows_per_s", "requests", "errors", "windows_used")) +
                        f"<td>{'yes' if f.get('stable') else 'no'}</td></tr>")
    if rows:
        out.append("<div class='box'><table><tr><th></th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th><th>rows/s</th>"
                   "<th>requests</th><th>errors</th><th>windows used</th><th>settled</th></tr>" + "".join(rows) + "</table></div>")
    return out


def _parity_section(report: dict[str, Any]) -> list[str]:
    errors = (report.get("plots") or {}).get("parity_errors")
    parity = report.get("parity") or {}
    out = ["<h2>Parity with the native model</h2>"]
    if errors:
        figs = [plots.parity_errors(name, data, f"parity-{name}", f"Output <b>{esc(name)}</b>: how far each served element is "
                                    "from the native model's answer, log scale; the dashed line is the tolerance atol.")
                for name, data in errors.items()]
    else:
        why = (NOT_REACHED if not parity else "every output is a label, compared by agreement with the native model (table below)")
        figs = [plots.placeholder_html("parity", why, "The parity error histogram per numeric output.")]
    out.append("<div class='plots'>" + "".join(figs) + "</div>")
    if parity:
        columns = ["kind", "passed", "total_rows", "failing_rows", "max_abs", "atol", "max_rel", "rtol", "mean_abs",
                   "agreement", "min_agreement", "worst_rows", "shape_error"]
        out.append(_table([{"output": n, **f} for n, f in parity.items()], ["output", *columns]))
    if report.get("not_compared"):
        out.append(f"<p class='muted small'>not compared (present on one side only): {esc(report['not_compared'])}</p>")
    return out


# --- the details, collapsed ---------------------------------------------------------------------------


def _reuse(tuning: dict[str, Any]) -> str:
    """Why the setting was searched or carried, and the fingerprint a later release compares (canary.tune.reuse_days)."""
    fp = tuning.get("fingerprint") or {}
    if not tuning.get("reuse"):
        return ""
    parts = ", ".join(f"{k} {str(v)[:12]}" for k, v in (fp.get("parts") or {}).items())
    kept = (f"tuning fingerprint {esc(str(fp['digest'])[:12])} ({esc(parts)})" if fp.get("digest")
            else "no tuning fingerprint kept, so no later release can carry this setting")
    return (f"<p class='small'>{esc(tuning['reuse'])}. Measured in {esc(tuning.get('measured_in'))} at "
            f"{esc(tuning.get('measured_at'))}; {kept}</p>")


def _table(rows: list[Mapping[str, Any]], columns: list[str]) -> str:
    if not rows:
        return "<p class='muted'>none</p>"
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(
            f"<td class='{'num' if isinstance(r.get(c), int | float) and not isinstance(r.get(c), bool) else ''}'>"
            f"{_cell(r.get(c))}</td>" for c in columns) + "</tr>"
        for r in rows)
    return f"<div class='box'><table><tr>{head}</tr>{body}</table></div>"


def _cell(value: Any) -> str:
    if isinstance(value, dict | list):
        return esc(json.dumps(value, default=str))
    if value is False:
        return "<span class='bad'>no</span>"
    return esc(number(value))


def _pairs(mapping: Mapping[str, Any]) -> str:
    if not mapping:
        return "<p class='muted'>none</p>"
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{_cell(v)}</td></tr>" for k, v in mapping.items())
    return f"<div class='box'><table>{rows}</table></div>"


def _details(report: dict[str, Any], d: Decision) -> list[str]:
    out = ["<h2>Details</h2>"]

    def section(title: str, content: str) -> None:
        out.append(f"<details><summary>{esc(title)}</summary>{content}</details>")

    section("Every gate, in full", _table([vars(line) for line in d.lines], ["name", "status", "candidate", "limit", "champion",
                                                                             "setting", "detail"]))
    exp = report.get("expectations") or {}
    section("Expectations on the served outputs",
            (f"<p class='muted'>{esc(exp.get('engine', ''))} · {number(exp.get('seconds'), 's')}</p>" if exp.get("engine") else "")
            + (_table(exp.get("results", []), ["expectation", "column", "kwargs", "success", "rows", "unexpected_count",
                                               "unexpected_examples"])
               if exp.get("results") else f"<p class='muted'>{esc(exp.get('skipped', 'not run'))}</p>"))
    load = report.get("load_phase") or {}
    if load:
        parts = []
        for target in ("candidate", "champion"):
            f = load.get(target)
            if f:
                parts.append(f"<h3>{target}: where the time goes, per model</h3>"
                             + _table([{"model": m, **v} for m, v in (f.get("models") or {}).items()],
                                      ["model", "requests", "rows", "batches", "request_ms", "queue_ms", "compute_ms", "own_ms", "calls"])
                             + f"<h3>{target}: windows</h3>"
                             + _table(f.get("windows") or [], ["seconds", "requests", "errors", "throughput_rows_per_s", "p50_ms",
                                                               "p90_ms", "p99_ms", "max_ms", "mean_ms"]))
        if load.get("paired"):
            parts.append("<h3>alternating window pairs</h3>" + _pairs(load["paired"]))
        if load.get("skipped"):
            parts.append(f"<p class='muted'>{esc(load['skipped'])}</p>")
        section("Load phase", "".join(parts))
    tuning = report.get("tuning") or {}
    if tuning.get("trials"):
        trials = [{"#": i, "label": t.get("label"), **{k: t.get(k) for k in ("throughput_rows_per_s", "p50_ms", "p99_ms", "errors", "requests")}}
                  for i, t in enumerate(tuning["trials"], 1)]
        section("Tuning trials", f"<p>kept: <b>{esc(tuning.get('chosen_label'))}</b>"
                f"{' (the template default: the pick was not faster when confirmed)' if tuning.get('kept_default') else ''}; "
                f"p99 limit {number(tuning.get('p99_limit_ms'), 'ms')} ({esc(tuning.get('p99_limit', ''))})</p>"
                + _table(trials, ["#", "label", "throughput_rows_per_s", "p50_ms", "p99_ms", "errors", "requests"])
                + _reuse(tuning))
    elif tuning.get("carried_from"):
        section("Tuning (carried)", f"<p>served and shipped: <b>{esc(tuning.get('chosen_label'))}</b>, no trials</p>"
                + _reuse(tuning))
    timing = dict(report.get("timing") or {})
    if report.get("slo"):
        timing.update({f"slo_{k}": v for k, v in report["slo"].items()})
    section("Timing of the correctness replay", _pairs(timing))
    section("Champion", _pairs(report.get("champion") or {}))
    section("Server", _pairs(report.get("server") or {}))
    section("Golden set", _pairs(report.get("golden") or {}))
    section("Models loaded and load order", _pairs(report.get("load") or {}))
    section("Who ran it, and where the verdict was recorded", _pairs({**(report.get("trigger") or {}),
                                                                      **{f"recorded.{k}": v for k, v in (report.get("recorded") or {}).items()}}))
    section("report.json", "<pre>" + esc(json.dumps(finite(report), indent=2, sort_keys=True, default=str)) + "</pre>")
    return out
