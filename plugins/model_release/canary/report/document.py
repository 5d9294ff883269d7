"""The canary's verdict and its report: ``report.json`` (every figure) and a self-contained ``report.html``.

The HTML (:mod:`.page`) is rendered from the JSON alone: inline CSS, plots as inline SVG, no
scripts or remote assets, so it opens the same offline, from a workspace, an artifact store or an
e-mail attachment.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...webpage import finite
from ...workspace import atomic_write_bytes, atomic_write_json
from ..judge.outcome import INCONCLUSIVE, gate_status

FORMAT_VERSION = 1


@dataclass
class CanaryReport:
    """Everything the canary found, section by section: what ``report.json`` holds.

    A section the canary did not reach stays None and is left out of the JSON (the HTML says
    "not measured" there). ``verdict``, ``reasons`` and the times are set by :meth:`close`.

    ``verdict`` is ``passed``, ``rejected`` (a gate failed, or the canary stopped) or
    ``inconclusive`` (no gate failed and one could not decide: ``passed`` is False, so nothing that
    reads only the flag ships it; ``reasons`` then say what would decide each).
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
    #: every gate that judged the model (contract, nonfinite, quality.*, champion.*, parity.*, load.*, expectations), see canary.judge.gates
    gates: list[dict[str, Any]] | None = None
    #: the load phase: per target (candidate, champion) its figures, windows and where the time goes per model
    load_phase: dict[str, Any] | None = None
    #: the serving-config search (canary.tune): trials, the chosen configuration, the confirmation
    tuning: dict[str, Any] | None = None
    #: the bounded data the page's plots are drawn from (see canary.report.plotdata)
    plots: dict[str, Any] = field(default_factory=dict)
    #: what the spec acknowledged for this release (promote.breaking_change, a lowered golden.min_rows)
    acknowledgements: list[dict[str, Any]] | None = None
    #: who or what ran the canary: the actor, and the Airflow DAG run when there is one
    trigger: dict[str, Any] | None = None
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

    def close(self, passed: bool, reasons: list[str], finished_at: str, duration_s: float, *,
              inconclusive: bool = False) -> None:
        """Set the verdict: passed, rejected, or (``inconclusive``, not passed) inconclusive."""
        verdict = INCONCLUSIVE if inconclusive and not passed else "passed" if passed else "rejected"
        self.passed, self.verdict, self.reasons = passed, verdict, list(reasons)
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
            "memory": (self.load or {}).get("memory"),  # the candidate's footprint, for a side-by-side roll-out
            "expectations_passed": (self.expectations or {}).get("passed"),
            "golden_rows": self.golden.get("rows"),
            "quality": {k: (self.quality or {}).get(k) for k in ("task", "candidate", "champion")},
            "champion": (self.champion or {}).get("release_id") or (self.champion or {}).get("name"),
            "gates": {g["name"]: gate_status(g) for g in self.gates or []},
            "load_champion": {k: ((self.load_phase or {}).get("champion") or {}).get(k) for k in ("p99_ms", "throughput_rows_per_s")},
            "tuning": {k: (self.tuning or {}).get(k) for k in ("chosen_label", "chosen", "kept_default", "confirm", "trials",
                                                                "fingerprint", "measured_in", "measured_at", "carried_from", "complete")}
            if self.tuning and "trials" in self.tuning else None,
        }

    def summary(self) -> str:
        """One line: the verdict and the figures that matter."""
        if self.verdict == INCONCLUSIVE:
            return "canary inconclusive: " + "; ".join(self.reasons)
        if not self.passed:
            return "canary rejected: " + "; ".join(self.reasons)
        timing = (self.load_phase or {}).get("candidate") or self.timing or {}
        how = "under load" if self.load_phase else "on the replay"
        return (f"canary passed: {self.golden.get('rows')} golden rows, p99 {timing.get('p99_ms', math.nan):.2f} ms "
                f"{how}, {timing.get('throughput_rows_per_s', math.nan):.0f} rows/s on {self.server.get('description')}")


def write_reports(folder: Path, report: CanaryReport | dict[str, Any]) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.html`` into ``folder``; return both paths."""
    if isinstance(report, CanaryReport):
        report = report.to_dict()
    from .plotdata import with_paired_plots  # the page's data of the paired statistics, drawn after judging

    report = with_paired_plots(report)
    json_path, html_path = folder / "report.json", folder / "report.html"
    atomic_write_json(json_path, _finite(report))
    atomic_write_bytes(html_path, render_html(report).encode())
    return json_path, html_path


def _finite(value: Any) -> Any:
    """JSON has no NaN/Inf: write them as strings so any JSON reader can open the report."""
    return finite(value)


def render_html(report: Mapping[str, Any]) -> str:
    """The report as one self-contained HTML page: the decision first, plots, details collapsed (see :mod:`.page`)."""
    from .page import render_html as render

    return render(report)
