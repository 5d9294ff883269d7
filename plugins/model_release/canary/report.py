"""The canary's verdict and its report: ``report.json`` (every figure) and a self-contained ``report.html``.

The HTML has inline CSS and no scripts or remote assets, so it opens the same offline, from a
workspace, an artifact store or an e-mail attachment.
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..parity import ParityReport
from ..workspace import atomic_write_bytes, atomic_write_json
from .expect import failures as expectation_failures

FORMAT_VERSION = 1
REFERENCE = "the native model"


@dataclass
class CanaryReport:
    """Everything the canary found, section by section: what ``report.json`` holds.

    A section the canary did not reach stays None and is left out of the JSON (the HTML says
    "not measured" there). ``verdict``, ``reasons`` and the times are set by :meth:`close`.
    """

    release_id: str
    release: str
    model: dict[str, Any]
    entry_model: str
    source_repository: str
    started_at: str
    format_version: int = FORMAT_VERSION
    golden: dict[str, Any] = field(default_factory=dict)
    server: dict[str, Any] = field(default_factory=dict)
    load: dict[str, Any] | None = None
    parity: dict[str, Any] | None = None
    not_compared: list[str] | None = None
    timing: dict[str, Any] | None = None
    slo: dict[str, Any] | None = None
    expectations: dict[str, Any] | None = None
    #: the production champion it was judged against (kind served/native/none, release, why)
    champion: dict[str, Any] | None = None
    champion_timing: dict[str, Any] | None = None
    #: quality on ground truth: task, target, the candidate's and the champion's metrics
    quality: dict[str, Any] | None = None
    #: how alike candidate and champion answer: agreement, PSI, JS distance / KS, Wasserstein
    shift: dict[str, Any] | None = None
    #: every gate that judged the model (contract, nonfinite, quality.*, champion.*), see canary.gates
    gates: list[dict[str, Any]] | None = None
    #: the load phase: per target (candidate, champion) its figures, windows and where the time goes per model
    load_phase: dict[str, Any] | None = None
    #: the serving-config search (canary.tune): trials, the chosen configuration, the confirmation
    tuning: dict[str, Any] | None = None
    #: where the verdict was recorded besides this report (the MLflow run), or why it was not
    recorded: dict[str, Any] | None = None
    passed: bool | None = None
    verdict: str | None = None
    reasons: list[str] = field(default_factory=list)
    finished_at: str | None = None
    duration_s: float | None = None

    @property
    def closed(self) -> bool:
        return self.verdict is not None

    def close(self, passed: bool, reasons: list[str], finished_at: str, duration_s: float) -> None:
        self.passed, self.verdict, self.reasons = passed, "passed" if passed else "rejected", list(reasons)
        self.finished_at, self.duration_s = finished_at, round(duration_s, 3)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    def figures(self) -> dict[str, Any]:
        """The figures the manifest and the stage result keep."""
        timing = (self.load_phase or {}).get("candidate") or self.timing or {}
        return {
            "parity": {n: {k: f.get(k) for k in ("kind", "max_abs", "agreement", "failing_rows", "passed")}
                       for n, f in (self.parity or {}).items()},
            "timing": {k: timing.get(k) for k in ("p50_ms", "p95_ms", "p99_ms", "throughput_rows_per_s", "requests")},
            "expectations_passed": (self.expectations or {}).get("passed"),
            "golden_rows": self.golden.get("rows"),
            "quality": {k: (self.quality or {}).get(k) for k in ("task", "candidate", "champion")},
            "champion": (self.champion or {}).get("release_id") or (self.champion or {}).get("name"),
            "gates": {g["name"]: ("skipped" if g["passed"] is None else "passed" if g["passed"] else "failed")
                      for g in self.gates or []},
            "load_champion": {k: ((self.load_phase or {}).get("champion") or {}).get(k) for k in ("p99_ms", "throughput_rows_per_s")},
            "tuning": {k: (self.tuning or {}).get(k) for k in ("chosen_label", "chosen", "kept_default", "confirm", "trials")}
            if self.tuning and "trials" in self.tuning else None,
        }

    def summary(self) -> str:
        """One line: the verdict and the figures that matter."""
        if not self.passed:
            return "canary rejected: " + "; ".join(self.reasons)
        timing = (self.load_phase or {}).get("candidate") or self.timing or {}
        how = "under load" if self.load_phase else "on the replay"
        return (f"canary passed: {self.golden.get('rows')} golden rows, p99 {timing.get('p99_ms', math.nan):.2f} ms "
                f"{how}, {timing.get('throughput_rows_per_s', math.nan):.0f} rows/s on {self.server.get('description')}")


def verdict(
    parity: ParityReport | None,
    timing: Mapping[str, Any] | None,
    p99_limit_ms: float | None,
    expectations: Mapping[str, Any] | None,
    *,
    extra_reasons: list[str] | None = None,
) -> tuple[bool, list[str]]:
    """Whether the canary passed, and one sentence per failed gate (parity, SLO, expectations)."""
    reasons = list(extra_reasons or [])
    if parity is not None:
        for out in parity.failures:
            tol_key = "min_label_agreement" if out.kind == "label" else f"tolerances.{out.name}"
            reasons.append(f"{out.describe(REFERENCE)} [canary.{tol_key}]")
    if timing is not None and p99_limit_ms is not None:
        p99 = float(timing.get("p99_ms") if timing.get("p99_ms") is not None else math.nan)
        if not math.isfinite(p99) or p99 > p99_limit_ms:
            reasons.append(
                f"p99 latency {p99:.3f} ms over {timing.get('requests')} requests of {timing.get('batch_rows')} rows "
                f"at concurrency {timing.get('concurrency')} exceeds canary.p99_ms {p99_limit_ms:g} ms [canary.p99_ms]"
            )
    if expectations is not None:
        reasons.extend(f"{line} [canary.expectations]" for line in expectation_failures(expectations))
    return not reasons, reasons


def write_reports(folder: Path, report: CanaryReport | dict[str, Any]) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.html`` into ``folder``; return both paths."""
    if isinstance(report, CanaryReport):
        report = report.to_dict()
    json_path, html_path = folder / "report.json", folder / "report.html"
    atomic_write_json(json_path, _finite(report))
    atomic_write_bytes(html_path, render_html(report).encode())
    return json_path, html_path


def _finite(value: Any) -> Any:
    """JSON has no NaN/Inf: write them as strings so any JSON reader can open the report."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:70rem;color:#222;padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.2rem} h2{font-size:1.1rem;margin-top:1.8rem;border-bottom:1px solid #ddd}
.badge{display:inline-block;padding:.15rem .6rem;border-radius:.3rem;color:#fff;font-weight:600}
.pass{background:#1a7f37}.fail{background:#cf222e}
table{border-collapse:collapse;margin:.4rem 0;width:100%} td,th{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f6f8fa} td.num{text-align:right;font-variant-numeric:tabular-nums} .bad{color:#cf222e;font-weight:600}
pre{background:#f6f8fa;padding:.6rem;overflow:auto;font-size:12px} .muted{color:#666}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "<span class='bad'>no</span>"
    if isinstance(value, float):
        return _e(f"{value:.4g}")
    if value is None:
        return "<span class='muted'>-</span>"
    return _e(value)


def _table(rows: list[Mapping[str, Any]], columns: list[str]) -> str:
    if not rows:
        return "<p class='muted'>none</p>"
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(
            f"<td class='{'num' if isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool) else ''}'>{_fmt(r.get(c))}</td>"
            for c in columns
        ) + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _pairs(mapping: Mapping[str, Any]) -> str:
    rows = "".join(
        f"<tr><th>{_e(k)}</th><td>{_fmt(v) if not isinstance(v, (dict, list)) else _e(json.dumps(v, default=str))}</td></tr>"
        for k, v in mapping.items()
    )
    return f"<table>{rows}</table>"


def _model_line(model: dict) -> str:
    """``iris-classifier version 2 (alias candidate, run c10b...)`` for the report's header."""
    extras = [f"{k} {model[k]}" for k in ("alias", "run_id") if model.get(k)]
    text = f"{model.get('name', '?')} version {model.get('version', '?')}"
    return f"{text} ({', '.join(extras)})" if extras else text


def render_html(report: Mapping[str, Any]) -> str:
    """The report as one HTML page with inline CSS and no external assets."""
    passed = report.get("passed", False)
    badge = f"<span class='badge {'pass' if passed else 'fail'}'>{'PASSED' if passed else 'REJECTED'}</span>"
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>canary {_e(report.get('release_id', ''))}: {'passed' if passed else 'rejected'}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Canary of {_e(report.get('release', ''))} {badge}</h1>",
        f"<p class='muted'>release {_e(report.get('release_id', ''))} · model {_e(_model_line(report.get('model') or {}))} · "
        f"{_e(report.get('started_at', ''))} · {_fmt(report.get('duration_s'))} s</p>",
        f"<p><b>Served by:</b> Triton {_e((report.get('server') or {}).get('version', '?'))}, "
        f"{_e((report.get('server') or {}).get('mode', '?'))}: {_e((report.get('server') or {}).get('description', ''))}</p>",
    ]
    reasons = report.get("reasons") or []
    if reasons:
        parts.append("<h2>Why it was rejected</h2><ul>" + "".join(f"<li>{_e(r)}</li>" for r in reasons) + "</ul>")
    champion = report.get("champion") or {}
    if champion:
        parts.append(f"<p><b>Judged against:</b> {_e(champion.get('name') or 'no champion')} ({_e(champion.get('kind'))})"
                     + (f" · {_e(champion['reason'])}" if champion.get("reason") else "") + "</p>")
    gates = report.get("gates") or []
    if gates:
        rows = [{**g, "verdict": "skipped" if g.get("passed") is None else "passed" if g.get("passed") else "FAILED",
                 "detail": g.get("skipped") or g.get("message")} for g in gates]
        parts.append("<h2>Gates on the served model</h2>"
                     + _table(rows, ["name", "verdict", "candidate", "champion", "limit", "setting", "detail"]))
    quality = report.get("quality") or {}
    if quality.get("candidate"):
        theirs = quality.get("champion") or {}
        rows = [{"metric": m, "candidate": v, "champion": theirs.get(m)} for m, v in quality["candidate"].items()]
        parts.append(f"<h2>Quality on ground truth ({_e(quality.get('task'))}, target {_e(quality.get('target'))}, "
                     f"{_fmt(quality.get('rows'))} rows)</h2>" + _table(rows, ["metric", "candidate", "champion"]))
    elif quality.get("skipped"):
        parts.append(f"<h2>Quality on ground truth</h2><p class='muted'>{_e(quality['skipped'])}</p>")
    shift = report.get("shift") or {}
    if shift:
        parts.append("<h2>Against the champion</h2>" + _pairs(shift))
    parity = report.get("parity") or {}
    parity_rows = [{"output": name, **fig} for name, fig in parity.items()]
    parts.append(
        "<h2>Parity against the native model</h2>"
        + _table(parity_rows, ["output", "kind", "passed", "total_rows", "failing_rows", "max_abs", "atol",
                               "max_rel", "rtol", "mean_abs", "agreement", "min_agreement", "worst_rows", "shape_error"])
    )
    if report.get("not_compared"):
        parts.append(f"<p class='muted'>not compared (present on one side only): {_e(report['not_compared'])}</p>")
    timing = dict(report.get("timing") or {})
    if report.get("slo"):
        timing.update({f"slo_{k}": v for k, v in report["slo"].items()})
    parts.append("<h2>Timing</h2>" + (_pairs(timing) if timing else "<p class='muted'>not measured</p>"))
    exp = report.get("expectations") or {}
    parts.append(
        "<h2>Expectations</h2>"
        + (f"<p class='muted'>{_e(exp.get('engine', ''))} · {_fmt(exp.get('seconds'))} s</p>" if exp.get("engine") else "")
        + (_table(exp.get("results", []), ["expectation", "column", "kwargs", "success", "rows", "unexpected_count", "unexpected_examples"])
           if exp.get("results") else f"<p class='muted'>{_e(exp.get('skipped', 'not run'))}</p>")
    )
    server = report.get("server") or {}
    parts.append("<h2>Server</h2>" + _pairs(server))
    parts.append("<h2>Golden set</h2>" + _pairs(report.get("golden") or {}))
    parts.append("<h2>Models loaded</h2>" + _pairs(report.get("load") or {}))
    parts.append(
        "<details><summary>report.json</summary><pre>"
        + _e(json.dumps(_finite(dict(report)), indent=2, sort_keys=True, default=str))
        + "</pre></details></body></html>"
    )
    return "\n".join(parts)
