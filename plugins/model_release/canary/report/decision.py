"""The decision a canary report carries, as the lines a reader sees first (HTML page and terminal alike).

:func:`decision` reads a ``report.json`` (as a dict) and returns the verdict, one :class:`Line`
per gate of ``report["gates"]`` (its figure, its limit and the champion's figure: every gate the
canary judged, parity and the expectation suite among them, all read the same way), the
acknowledgements the spec made, and the headline changes against the production champion.

A report is read as found (``model-release report`` reads any file): a section of the wrong type
counts as absent, so a hand-edited or foreign report prints what it holds instead of failing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ...model.metrics import METRICS
from ...safe_text import escape_controls, redact
from ..judge.outcome import FAILED, INCONCLUSIVE, PASSED, SKIPPED, gate_status

__all__ = ["FAILED", "INCONCLUSIVE", "PASSED", "SKIPPED", "Change", "Decision", "Line", "decision", "number",
           "passed_of", "terminal", "verdict_of"]


@dataclass
class Line:
    """One gate, as one line."""

    name: str
    status: str
    candidate: str = ""
    limit: str = ""
    champion: str = ""
    setting: str = ""
    detail: str = ""


@dataclass
class Change:
    """One headline figure, candidate beside champion (``better`` None: no direction, or no champion)."""

    title: str
    candidate: str
    champion: str
    delta: str = ""
    better: bool | None = None


@dataclass
class Decision:
    """The verdict (``passed``, ``rejected`` or ``inconclusive``) and its lines; ``passed`` only when it passed."""

    passed: bool
    verdict: str
    lines: list[Line] = field(default_factory=list)
    acknowledgements: list[dict[str, Any]] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    champion: str = ""
    model: str = ""

    @property
    def counts(self) -> dict[str, int]:
        return {s: sum(1 for line in self.lines if line.status == s) for s in (FAILED, INCONCLUSIVE, PASSED, SKIPPED)}

    @property
    def inconclusive(self) -> bool:
        return self.verdict == INCONCLUSIVE


def _map(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (a section of the wrong type is absent)."""
    return value if isinstance(value, dict) else {}


def _maps(value: Any) -> list[dict[str, Any]]:
    """The JSON objects of ``value`` when it is a list (anything else in it is skipped)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def passed_of(report: dict[str, Any]) -> bool:
    """Whether a canary report says the release passed: its ``passed`` flag, else its verdict."""
    if isinstance(report.get("passed"), bool):
        return report["passed"]
    return report.get("verdict") == "passed"


def verdict_of(report: dict[str, Any]) -> str:
    """``passed``, ``rejected`` or ``inconclusive``: what a canary report concluded (a report that did
    not pass and does not say inconclusive was rejected)."""
    if passed_of(report):
        return "passed"
    return INCONCLUSIVE if report.get("verdict") == INCONCLUSIVE else "rejected"


def number(value: Any, unit: str = "", *, percent: bool = False) -> str:
    """A figure for a reader: 4 significant digits (whole numbers with separators from 10,000), a unit, ``-`` when absent."""
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        try:
            value = float(value)  # "nan"/"inf" as report.json writes them
        except ValueError:
            return value
    if isinstance(value, int | float):
        if not math.isfinite(value):
            return str(value)
        if percent:
            return f"{value:.2%}"
        if isinstance(value, float) and 1e4 <= abs(value) < 1e15:
            text = f"{value:,.0f}"  # 13,997 rows/s, not 1.4e+04
        else:
            text = f"{value:.4g}" if isinstance(value, float) else str(value)
        return f"{text} {unit}".strip()
    return str(value)


_UNITS = {"load.slo_p99": "ms", "replay.slo_p99": "ms", "load.p99_ratio": "ms", "load.throughput_ratio": "rows/s", "load.errors": "errors",
          "nonfinite": "rows"}


_AGAINST_CHAMPION = {"contract": "its interface", "champion.agreement": "its labels", "champion.psi": "its class mix",
                     "champion.ks": "its predictions", "flips.negative": "its right rows", "calibration.ece_change": "its ECE"}
#: gates whose figures are shares of rows, shown as percentages
_PERCENT_SETTINGS = ("canary.min_label_agreement", "canary.champion.max_negative_flips")


def _gate_line(gate: dict[str, Any]) -> Line:
    name = str(gate.get("name", "?"))
    status = gate_status(gate)
    unit = _UNITS.get(name, "")
    setting = str(gate.get("setting") or "")
    percent = name == "champion.agreement" or setting in _PERCENT_SETTINGS
    prefix = "max abs " if setting.startswith("canary.tolerances.") else ""  # a numeric output's parity
    champion = gate.get("champion")
    if name in _AGAINST_CHAMPION and champion is not None:
        # the gate compares the candidate with the champion, whose own figure (its interface, 100% agreement
        # with itself, no shift from itself) says nothing: name what it is compared with instead
        champion = _AGAINST_CHAMPION[name]
    return Line(
        name=name, status=status,
        candidate="" if status == SKIPPED else prefix + number(gate.get("candidate"), unit, percent=percent),
        limit=str(gate.get("limit") or ""),
        champion="" if status == SKIPPED else (number(champion, unit, percent=percent) if champion is not None else "-"),
        setting=setting,
        detail=str(gate.get("skipped") or gate.get("message") or ""),
    )


_ORDER = {FAILED: 0, INCONCLUSIVE: 1, PASSED: 2, SKIPPED: 3}


def _delta(title: str, mine: Any, theirs: Any, *, greater_is_better: bool | None, unit: str = "",
           percent: bool = False, ratio: bool = False) -> Change:
    if not isinstance(mine, int | float) or not isinstance(theirs, int | float) or not all(map(math.isfinite, (mine, theirs))):
        return Change(title, number(mine, unit, percent=percent), number(theirs, unit, percent=percent))
    diff = mine - theirs
    if ratio and theirs:
        delta = f"{mine / theirs:.2f} x"
    elif percent:
        delta = f"{diff * 100:+.2f} pts"
    else:
        delta = f"{diff:+.4g}{(' ' + unit) if unit else ''}"
    better = None if greater_is_better is None or diff == 0 else (diff > 0) == greater_is_better
    return Change(title, number(mine, unit, percent=percent), number(theirs, unit, percent=percent), delta, better)


def _changes(report: dict[str, Any]) -> list[Change]:
    """The figures that say what changed against production, candidate beside champion."""
    quality = _map(report.get("quality"))
    mine, theirs = _map(quality.get("candidate")), _map(quality.get("champion"))
    out = []
    primary = ["accuracy", "f1_macro"] if quality.get("task") == "classification" else ["rmse", "r2"]
    for metric in primary:
        if metric in mine and metric in METRICS:
            out.append(_delta(metric, mine[metric], theirs.get(metric), greater_is_better=METRICS[metric].greater_is_better))
    shift = _map(report.get("shift"))
    if "agreement" in shift:
        out.append(Change("agreement with the champion", number(shift["agreement"], percent=True), "-"))
    elif "ks" in shift:
        out.append(Change("prediction shift (KS)", number(shift["ks"]), "-"))
    elif "cosine_mean" in shift:
        out.append(Change("mean cosine with the champion's vectors", number(shift["cosine_mean"]), "-"))
        out.append(Change("rows finding their old vector", number(shift.get("retrieval"), percent=True), "-"))
    load = _map(report.get("load_phase"))
    cand, champ = _map(load.get("candidate")), _map(load.get("champion"))
    if cand:
        out.append(_delta("p99 under load", cand.get("p99_ms"), champ.get("p99_ms"), greater_is_better=False, unit="ms", ratio=True))
        out.append(_delta("throughput", cand.get("throughput_rows_per_s"), champ.get("throughput_rows_per_s"),
                          greater_is_better=True, unit="rows/s", ratio=True))
    return out


def _model_line(model: dict[str, Any]) -> str:
    extras = [f"{k} {model[k]}" for k in ("alias", "run_id") if model.get(k)]
    text = f"{model.get('name', '?')} version {model.get('version', '?')}"
    return f"{text} ({', '.join(extras)})" if extras else text


def decision(report: dict[str, Any]) -> Decision:
    """The decision block of ``report`` (a ``report.json`` as a dict)."""
    passed = passed_of(report)
    lines = [_gate_line(g) for g in _maps(report.get("gates"))]
    champion = _map(report.get("champion"))
    if champion.get("kind") in (None, "none") and champion.get("reason"):
        for line in lines:  # every change gate skips for the same reason: say it once, in the header
            if line.status == SKIPPED and line.detail == champion["reason"]:
                line.detail = "no champion: the channel's first release"
    lines.sort(key=lambda line: _ORDER[line.status])
    if champion.get("kind") in (None, "none"):
        judged = "no champion" + (f" ({champion['reason']})" if champion.get("reason") else "")
    else:
        judged = f"{champion.get('name') or champion.get('release_id')} ({champion.get('kind')})"
    return Decision(
        passed=passed, verdict=verdict_of(report), lines=lines,
        acknowledgements=_maps(report.get("acknowledgements")), changes=_changes(report),
        reasons=[str(r) for r in report.get("reasons") or []] if isinstance(report.get("reasons"), list) else [],
        champion=judged, model=_model_line(_map(report.get("model"))),
    )


# --- the terminal -------------------------------------------------------------------------------------

_ANSI = {FAILED: "\033[31m", INCONCLUSIVE: "\033[33m", PASSED: "\033[32m", SKIPPED: "\033[90m", "bold": "\033[1m",
         "reset": "\033[0m"}
_SYMBOL = {FAILED: "✗", INCONCLUSIVE: "?", PASSED: "✓", SKIPPED: "-"}
_WIDTHS = {"name": 24, "candidate": 18, "limit": 44, "champion": 16}


def _fit(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return (text if len(text) <= width else text[: width - 1] + "…").ljust(width)


def _printable(data: Any) -> Any:
    """``data`` with every string redacted and its control characters escaped (a report is any file)."""
    if isinstance(data, str):
        return escape_controls(redact(data))
    if isinstance(data, dict):
        return {_printable(k) if isinstance(k, str) else k: _printable(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_printable(v) for v in data]
    return data


def _paired_line(report: dict[str, Any]) -> str:
    """One line of the paired statistics (the page's flips and calibration), or "" when the report has none."""
    paired = _map(_map(report.get("quality")).get("paired"))
    flips, reliability = _map(paired.get("flips")), _map(paired.get("reliability"))
    parts = []
    if isinstance(flips.get("rows"), int):
        parts.append(f"{number(flips.get('negative'))} of {flips['rows']} rows the champion got right are now wrong, "
                     f"{number(flips.get('positive'))} now right")
    mine, theirs = _map(reliability.get("candidate")), _map(reliability.get("champion"))
    if "ece" in mine:
        parts.append(f"ECE {number(mine['ece'])}" + (f" (champion {number(theirs.get('ece'))})" if theirs else ""))
    return "row by row: " + " · ".join(parts) if parts else ""


def terminal(report: dict[str, Any], *, colour: bool = False, width: int = 120) -> str:
    """The decision block as a compact table for a terminal (ANSI colour only when ``colour``, and
    never from the report: its strings are printed redacted, control characters escaped)."""
    import textwrap

    report = _printable(report)
    d = decision(report)

    def paint(text: str, key: str) -> str:
        return f"{_ANSI[key]}{text}{_ANSI['reset']}" if colour else text

    counts = d.counts
    verdict = (paint("PASSED", PASSED) if d.passed else paint("INCONCLUSIVE", INCONCLUSIVE) if d.inconclusive
               else paint("REJECTED", FAILED))
    summary = (f"may ship: every gate passed ({counts[PASSED]} passed, {counts[SKIPPED]} skipped)" if d.passed
               else f"not decided: {counts[INCONCLUSIVE]} gate(s) inconclusive, none failed; nothing promoted or "
                    "rejected, a later canary decides" if d.inconclusive
               else f"blocked: {counts[FAILED]} gate(s) failed" if counts[FAILED] else "blocked: the canary stopped early")
    out = [f"{paint(verdict, 'bold')}  {report.get('release', '')} ({report.get('release_id', '')}): {summary}",
           f"model {d.model} · judged against {d.champion}", ""]
    head = "  " + "".join(_fit(h, _WIDTHS[k]) + " " for k, h in
                          (("name", "gate"), ("candidate", "candidate"), ("limit", "limit"), ("champion", "champion")))
    out.append(paint(head.rstrip(), "bold"))
    rest = sum(_WIDTHS.values()) + 3 - _WIDTHS["name"]
    for line in d.lines:
        mark = paint(_SYMBOL[line.status], line.status)
        if line.status == SKIPPED:
            row = _fit(line.name, _WIDTHS["name"]) + " " + paint(_fit(f"skipped: {line.detail}", rest).rstrip(), SKIPPED)
        else:
            row = " ".join(_fit(getattr(line, k), w) for k, w in _WIDTHS.items())
        out.append(f"{mark} {row.rstrip()}")
    if d.changes:
        out += ["", "against the champion: " + " · ".join(
            f"{c.title} {c.candidate} (champion {c.champion}{', ' + c.delta if c.delta else ''})" for c in d.changes)]
    paired = _paired_line(report)
    if paired:
        out.append(paired)
    for ack in d.acknowledgements:
        out.append(f"acknowledged: {ack.get('setting')}: {ack.get('text')!r}")
    if d.reasons and not d.passed:
        out += ["", paint("what would decide it:" if d.inconclusive else "why it was rejected:", "bold")]
        for reason in d.reasons:
            out += textwrap.wrap(reason, width=width, initial_indent="  - ", subsequent_indent="    ")
    return "\n".join(out)
