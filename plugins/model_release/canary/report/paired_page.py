"""The page's section on the paired statistics: candidate and champion, row by row, on the same golden rows.

Drawn from ``plots.paired`` (:func:`.plotdata.paired_section`, built from ``quality.paired`` after
judging), each part collapsible below the decision:

- **flips**: the rows the champion got right and the candidate gets wrong (negative flips) beside
  the reverse (positive flips), on all rows, per gated class and per gated slice, with the
  sentences the flip and accuracy gates state (their bounds and McNemar's p-value);
- **per class** (and **per slice** when the golden set has slices): support, recall and precision of
  both models, the change, and whether each class is gated or only reported (below min support);
- **calibration**: the reliability diagram of both models with ECE and log loss, and those gates' sentences.

Where a part cannot be drawn (no ground truth, no champion, a regressor, no class scores) its place
says why, as the plots do.
"""

from __future__ import annotations

from dataclasses import dataclass
import re
from typing import Any

from ...webpage import esc
from . import plots
from .decision import number

CSS = """
table.paired td.why{white-space:normal;font-size:12px;color:#59636e;min-width:14rem;max-width:30rem}
table.paired th.neg,table.paired td.neg{border-left:2px solid #cf222e} table.paired th.pos,table.paired td.pos{border-left:2px solid #1a7f37}
table.paired th .sub{display:block;font-weight:400;font-size:11.5px;color:#59636e}
tr.inconclusive td{background:#fff8c5}
p.none{border:1px dashed #d0d7de;border-radius:.3rem;padding:.5rem .7rem;color:#59636e;margin:.4rem 0}
ul.sentences{margin:.3rem 0;padding-left:1.2rem;font-size:12.5px} ul.sentences li{margin:.15rem 0}
details.paired > summary .muted{font-weight:400}
"""

_MARK = {"pass": "<span class='mark passed'>✓ pass</span>", "block": "<span class='mark failed'>✗ block</span>",
         "inconclusive": "<span class='mark skipped'>? inconclusive</span>"}
_ROW = {"block": " class='failed'", "inconclusive": " class='inconclusive'"}
_OWN_PARTS = ("flips.negative", "quality.accuracy", "quality.log_loss", "calibration.ece", "calibration.ece_change")


@dataclass(frozen=True)
class Why:
    """Why a part is missing, each already a sentence: no ground truth, no champion, not a classifier, not reached."""

    truth: str | None
    champion: str
    regressor: bool
    reached: bool


def _share(value: Any) -> str:
    return f"{value:.1%}" if isinstance(value, int | float) and not isinstance(value, bool) else "-"


def _confidence(value: Any) -> str:
    return f"{value * 100:.4g}%" if isinstance(value, int | float) and not isinstance(value, bool) else "-"


def _pts(value: Any, *, better_up: bool = True) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "-"
    tone = "" if value == 0 else (" class='good'" if (value > 0) == better_up else " class='bad'")
    return f"<span{tone}>{value * 100:+.1f} pts</span>"


def _count(value: Any, rows: Any) -> str:
    if not isinstance(value, int) or not isinstance(rows, int) or not rows:
        return esc(number(value))
    return f"{value} <span class='muted'>({value / rows:.2%})</span>"


def _details(key: str, summary: str, content: str, *, open_: bool) -> str:
    return (f"<details class='paired' data-section='{esc(key)}'{' open' if open_ else ''}><summary>{summary}</summary>"
            f"{content}</details>")


def _none(key: str, why: str) -> str:
    return f"<p class='none' data-section='{esc(key)}'>{esc(why)}</p>"


def _sentences(gates: list[dict[str, Any] | None]) -> str:
    items = [f"<li>{_MARK.get(g.get('outcome'), '')} <b>{esc(g.get('name'))}</b> "
             f"<span class='muted'>({esc(g.get('setting'))})</span>: {esc(g.get('message'))}</li>" for g in gates if g]
    return f"<ul class='sentences'>{''.join(items)}</ul>" if items else ""


def section(report: dict[str, Any], why: Why) -> list[str]:
    """The section's HTML parts: a heading, then flips, per class, per slice and calibration (see the module docstring)."""
    data = ((report.get("plots") or {}).get("paired")) if isinstance(report.get("plots"), dict) else None
    data = data if isinstance(data, dict) else {}
    out = ["<h2>Row by row against the champion</h2>",
           "<p class='muted small'>Both models answered the same golden rows, so only the rows where one is right and "
           "the other wrong tell which is better; every bound below is read from those paired rows.</p>"]
    out += _others(data)
    out.append(_flips(data.get("flips"), why, data))
    out.append(_classes(data.get("classes"), why, data))
    if data.get("slices"):
        out.append(_slices(data["slices"]))
    out.append(_calibration(data.get("reliability"), why, data))
    return out


def _missing(why: Why, data: dict[str, Any], *, regressor: str, stopped_early: str) -> str:
    """Why a part of judging against the champion on ground truth is missing."""
    if not why.reached:
        return stopped_early
    if why.truth:
        return why.truth
    if why.regressor:
        return regressor
    if not data:
        return "Not judged row by row: this report has no paired statistics (quality.paired)"
    return why.champion


def _above(data: dict[str, Any]) -> str:
    """Where a regressor's paired changes are, when it has some (none without a champion)."""
    return " (its paired changes are above)" if _others(data) else ""


def _others(data: dict[str, Any]) -> list[str]:
    """The paired change gates no other part shows (a regressor's RMSE and MAE), as a table."""
    gates = [g for g in data.get("gates") or [] if isinstance(g, dict) and g.get("name") not in _OWN_PARTS]
    if not gates:
        return []
    rows = "".join(
        f"<tr{_ROW.get(g.get('outcome'), '')}><td>{_MARK.get(g.get('outcome'), '')}</td><td><b>{esc(g.get('name'))}</b></td>"
        f"<td class='num'>{esc(number(g.get('candidate')))}</td><td class='num'>{esc(number(g.get('champion')))}</td>"
        f"<td class='num'>{_bound(g.get('drop'))}</td><td class='num'>{esc(number(g.get('rows_needed')))}</td>"
        f"<td class='why'>{esc(g.get('message'))}</td></tr>" for g in gates)
    table = ("<div class='box'><table class='paired'><tr><th></th><th>gate</th><th>candidate</th><th>champion</th>"
             "<th>worse by (bounds)</th><th>rows needed</th><th>what the gate states</th></tr>" + rows + "</table></div>")
    return [_details("changes", f"Paired changes: {len(gates)} gate(s) on per-row errors", table, open_=True)]


def _bound(drop: Any) -> str:
    if not isinstance(drop, dict) or drop.get("lower") is None or drop.get("upper") is None:
        return "-"
    return f"{number(drop['lower'])} … {number(drop['upper'])} <span class='muted'>({_confidence(drop.get('confidence'))} each)</span>"


# --- flips ------------------------------------------------------------------------------------------------


def _flip_row(head: str, rows: Any, negative: Any, positive: Any, gate: str) -> str:
    net = (positive - negative) if isinstance(negative, int) and isinstance(positive, int) else None
    net_text = "-" if net is None else ("no change" if net == 0 else f"{abs(net)} row(s) {'better' if net > 0 else 'worse'}")
    tone = "" if not net else (" class='good'" if net > 0 else " class='bad'")
    return (f"<tr><td>{head}</td><td class='num'>{esc(number(rows))}</td><td class='num neg'>{_count(negative, rows)}</td>"
            f"<td class='num pos'>{_count(positive, rows)}</td><td class='num'><span{tone}>{esc(net_text)}</span></td>"
            f"<td>{gate}</td></tr>")


def _flips(flips: Any, why: Why, data: dict[str, Any]) -> str:
    if not isinstance(flips, dict):
        reason = _missing(why, data, stopped_early="not measured: the canary stopped before this (see why above)",
                          regressor="No flips for a regressor: its rows are not right or wrong" + _above(data))
        return _details("flips", "Flips <span class='muted'>(rows one model got right and the other wrong)</span>",
                        _none("flips", reason), open_=True)
    gate = flips.get("gate") or {}
    bound = flips.get("negative_share") or {}
    limit = (f" <span class='muted'>(at most {_share(bound.get('upper'))} with {_confidence(bound.get('confidence'))} confidence; "
             f"limit {_share(flips.get('allowed_share'))})</span>" if bound.get("upper") is not None else "")
    rows = [_flip_row("<b>all golden rows</b>", flips.get("rows"), flips.get("negative"), flips.get("positive"),
                      _MARK.get(gate.get("outcome"), "<span class='muted'>not gated</span>") + limit)]
    rows += [_flip_row(f"true class <b>{esc(r.get('class'))}</b>", r.get("rows"), r.get("negative"),
                       r.get("positive"), f"recall {_MARK.get(r.get('outcome'), '-')}") for r in flips.get("by_class") or []]
    rows += [_flip_row(f"slice <b>{esc(r.get('slice'))}</b>", r.get("rows"), r.get("negative"), r.get("positive"),
                       _MARK.get(r.get("outcome"), "-")) for r in flips.get("by_slice") or []]
    left = [f"{n} more {what}" for n, what in ((flips.get("classes_left_out"), "gated classes"),
                                               (flips.get("slices_left_out"), "gated slices")) if n]
    table = ("<div class='box'><table class='paired flips'><tr><th>which rows</th><th>golden rows</th>"
             "<th class='neg'>negative flips<span class='sub'>the champion right, the candidate wrong</span></th>"
             "<th class='pos'>positive flips<span class='sub'>the candidate right, the champion wrong</span></th>"
             "<th>net</th><th>gate</th></tr>" + "".join(rows) + "</table></div>")
    if left:
        table += f"<p class='muted small'>{esc(', '.join(left))} (fewer flips) are in report.json (quality.paired).</p>"
    summary = (f"Flips: <span class='muted'>{esc(number(flips.get('negative')))} of {esc(number(flips.get('rows')))} rows the "
               f"champion got right are now wrong, {esc(number(flips.get('positive')))} now right</span>")
    return _details("flips", summary, table + _sentences([flips.get("gate"), flips.get("accuracy")]), open_=True)


# --- per class, per slice --------------------------------------------------------------------------------------


_NOT_GATED = re.compile(r"^(\d+) (golden rows|answers by one of the models), fewer than the (\d+) a class needs to be gated")


def _gated(row: dict[str, Any]) -> str:
    """Which of the class's gates judged it (outcome, the bound that decided), and why the others only report."""
    parts, reasons, least = [], [], None
    for metric in ("recall", "precision"):
        outcome = row.get(f"{metric}_outcome")
        if outcome is not None:
            drop = row.get(f"{metric}_drop") or {}
            side, value = ("≥", drop.get("lower")) if outcome == "block" else ("≤", drop.get("upper"))
            bound = f" <span class='muted'>(drop {side} {esc(number(value))})</span>" if value is not None else ""
            parts.append(f"{metric} {_MARK.get(outcome, esc(outcome))}{bound}")
            continue
        text = str(row.get(f"{metric}_not_gated") or "not gated")
        found = _NOT_GATED.match(text)  # the judge's sentence, said shorter: the count, and the least once
        if found:
            least = found.group(3)
            reasons.append(f"{metric}: {found.group(1)} {'rows' if found.group(2) == 'golden rows' else 'answers'}")
        else:
            reasons.append(f"{metric}: {text}")
    if reasons:
        needs = f"; a class needs {least} (canary.classes.min_support)" if least else ""
        parts.append("<span class='muted'>reported only (" + esc(", ".join(reasons) + needs) + ")</span>")
    return "; ".join(parts)


def _classes(classes: Any, why: Why, data: dict[str, Any]) -> str:
    title = "Per class <span class='muted'>(recall and precision against the champion)</span>"
    if not isinstance(classes, dict):
        reason = _missing(why, data, stopped_early="not measured: the canary stopped before this (see why above)",
                          regressor="No classes for a regressor: its per-row errors are judged as a whole" + _above(data))
        return _details("classes", title, _none("classes", reason), open_=True)  # open: the reason is the content
    rows = []
    for r in classes.get("rows") or []:
        worst = min((r.get(f"{m}_outcome") for m in ("recall", "precision") if r.get(f"{m}_outcome")),
                    key=lambda o: {"block": 0, "inconclusive": 1}.get(o, 2), default=None)
        rec, pre = r.get("recall") or {}, r.get("precision") or {}
        rows.append(f"<tr{_ROW.get(worst, '')}><td><b>{esc(r.get('class'))}</b></td><td class='num'>{esc(number(r.get('support')))}</td>"
                    f"<td class='num'>{_share(rec.get('candidate'))}</td><td class='num'>{_share(rec.get('champion'))}</td>"
                    f"<td class='num'>{_pts(r.get('recall_change'))}</td><td class='num'>{_share(pre.get('candidate'))}</td>"
                    f"<td class='num'>{_share(pre.get('champion'))}</td><td class='num'>{_pts(r.get('precision_change'))}</td>"
                    f"<td class='why'>{_gated(r)}</td></tr>")
    table = ("<div class='box'><table class='paired classes'><tr><th rowspan='2'>class</th><th rowspan='2'>support</th>"
             "<th colspan='3'>recall</th><th colspan='3'>precision</th><th rowspan='2'>gated, or only reported</th></tr><tr>"
             + "<th>candidate</th><th>champion</th><th>change</th>" * 2 + "</tr>" + "".join(rows) + "</table></div>")
    left = classes.get("left_out") or {}
    if left.get("classes"):
        table += (f"<p class='muted small'>{len(rows)} of {classes.get('classes')} classes shown: the blocked and inconclusive "
                  f"first, then the gated with the largest drops, then the most frequent. The other {left['classes']} "
                  f"({left.get('gated', 0)} gated, {number(left.get('support'))} golden rows) are in report.json "
                  "(quality.paired.classes).</p>")
    blocked = sum(1 for r in classes.get("rows") or [] if "block" in (r.get("recall_outcome"), r.get("precision_outcome")))
    open_ = any(r.get(f"{m}_outcome") in ("block", "inconclusive") for r in classes.get("rows") or [] for m in ("recall", "precision"))
    summary = (f"{title} <span class='muted'>· {esc(number(classes.get('classes')))} classes, {esc(number(classes.get('gated')))} "
               f"gated, {blocked} blocked</span>")
    return _details("classes", summary, table, open_=open_)


def _slices(slices: dict[str, Any]) -> str:
    parts, open_ = [], False
    for column, table in (slices.get("columns") or {}).items():
        rows = []
        for s in table.get("rows") or []:
            open_ = open_ or s.get("outcome") in ("block", "inconclusive")
            acc = s.get("accuracy") or {}
            gate = _MARK.get(s.get("outcome")) or f"<span class='muted'>reported only ({esc(s.get('not_gated') or 'not gated')})</span>"
            p = f" <span class='muted'>(McNemar p = {s['accuracy_p']:.2g})</span>" if isinstance(s.get("accuracy_p"), float) else ""
            rows.append(f"<tr{_ROW.get(s.get('outcome'), '')}><td><b>{esc(s.get('slice'))}</b></td>"
                        f"<td class='num'>{esc(number(s.get('rows')))}</td><td class='num'>{_share(acc.get('candidate'))}</td>"
                        f"<td class='num'>{_share(acc.get('champion'))}</td><td class='num'>{_pts(s.get('accuracy_change'))}</td>"
                        f"<td class='num neg'>{esc(number(s.get('negative')))}</td><td class='num pos'>{esc(number(s.get('positive')))}</td>"
                        f"<td class='why'>{gate}{p}</td></tr>")
        note = (f"<p class='muted small'>{table['left_out']} more slices of {esc(column)} are in report.json (quality.paired.slices).</p>"
                if table.get("left_out") else "")
        parts.append(f"<h3>golden column {esc(column)}</h3><div class='box'><table class='paired slices'><tr><th>slice</th>"
                     "<th>rows</th><th>accuracy candidate</th><th>accuracy champion</th><th>change</th><th class='neg'>negative flips</th>"
                     "<th class='pos'>positive flips</th><th>gated, or only reported</th></tr>" + "".join(rows) + "</table></div>" + note)
    if slices.get("columns_left_out"):
        parts.append(f"<p class='muted small'>{slices['columns_left_out']} more sliced columns are in report.json.</p>")
    summary = f"Per slice <span class='muted'>({esc(', '.join(slices.get('columns') or {}))})</span>"
    return _details("slices", summary, "".join(parts), open_=open_)


# --- calibration -----------------------------------------------------------------------------------------------


def _calibration(reliability: Any, why: Why, data: dict[str, Any]) -> str:
    title = "Calibration <span class='muted'>(do the class scores mean what they say?)</span>"
    caption = ("Reliability diagram: the golden rows binned by the top-1 class score; in each bin, the share answered "
               "right against the mean score (on the dashed line, a score of 0.8 is right 8 times in 10). Below: the "
               "share of rows in each bin.")
    if not isinstance(reliability, dict):
        if why.reached and not why.truth and not why.regressor and data:
            reason = "No class scores: the candidate serves labels only, so there is nothing to calibrate"
        else:
            reason = _missing(why, data, stopped_early="not measured: the canary stopped before this (see why above)",
                              regressor="No class scores: a regressor's predictions carry no confidence to calibrate")
        figure = plots.reliability(None, "reliability", caption, missing=reason, champion_missing="")
        return _details("calibration", title, f"<div class='plots'>{figure}</div>", open_=True)
    champion_missing = (why.champion + "." if not reliability.get("champion") and why.champion
                        else "The champion serves no class scores: only the candidate is shown.")
    figure = plots.reliability(reliability, "reliability", caption, missing="no rows with finite class scores",
                               champion_missing=champion_missing)
    rows = []
    for target in ("candidate", "champion"):
        f = reliability.get(target)
        if isinstance(f, dict):
            merged = (f" <span class='muted'>({f.get('bins_judged')} judged, merged)</span>"
                      if f.get("bins_judged") and f.get("bins_judged") != len(f.get("bins") or []) else "")
            rows.append(f"<tr><td>{target}</td><td class='num'>{esc(number(f.get('ece')))}</td>"
                        f"<td class='num'>{esc(number(f.get('log_loss')))}</td><td class='num'>{esc(number(f.get('rows')))}</td>"
                        f"<td class='num'>{esc(number(f.get('rows_left_out')))}</td><td class='num'>{len(f.get('bins') or [])}{merged}</td></tr>")
    table = ("<div class='box'><table class='paired'><tr><th></th><th>ECE</th><th>log loss</th><th>rows</th>"
             "<th>left out (no finite scores)</th><th>bins</th></tr>" + "".join(rows) + "</table></div>")
    mine, theirs = reliability.get("candidate") or {}, reliability.get("champion") or {}
    versus = lambda key: f" (champion {number(theirs.get(key))})" if theirs else ""  # noqa: E731
    figures = f"ECE {number(mine.get('ece'))}{versus('ece')} · log loss {number(mine.get('log_loss'))}{versus('log_loss')}"
    summary = f"{title} <span class='muted'>· {esc(figures)}</span>"
    return _details("calibration", summary, f"<div class='plots'>{figure}<div>{table}</div></div>{_sentences(reliability.get('gates') or [])}",
                    open_=True)
