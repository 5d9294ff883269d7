"""The canary stage: serve the candidate beside the production champion and judge the model as served.

It reads as its phases: :mod:`.serve` (the Triton, both models loaded, the golden rows replayed
through each, and while they are served the load phase of :mod:`.measure`), :mod:`.judge` (every
gate on the served outputs, with the figures it was decided on), :mod:`.report` (report.json and
report.html, the plots drawn from what judging kept, the MLflow record). Everything found goes
into one typed :class:`~.report.document.CanaryReport`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import CanaryInconclusive, CanaryRejected, UserError
from ..provenance import trigger
from ..spec import DEFAULT_MIN_GOLDEN_ROWS, ReleaseSpec
from ..stages import CANARY
from ..triton.delivery import RemoteCanary
from ..types import AssembleResult, CanaryResult, ExportResult, IntakeResult
from ..workspace import Workspace
from .champion import NONE, Champion
from .judge.judging import Judgement, blocked_on_replay, judge
from .report.document import CanaryReport, write_reports
from .report.plotdata import plots_of
from .serve import Replays, load_golden, serve_and_replay

log = logging.getLogger(__name__)

#: finds the champion, given a folder to fetch it into
ChampionFinder = Callable[[Path], Champion]
#: records the verdict elsewhere (MLflow); returns what to keep in the report. One with an
#: ``attach(report, [html, json])`` method is also given the written report files.
Recorder = Callable[[CanaryReport], dict[str, Any]]


def run_canary(
    spec: ReleaseSpec,
    intake: IntakeResult,
    export: ExportResult,
    assembled: AssembleResult,
    ws: Workspace,
    *,
    endpoint: str | None = None,
    find_champion: ChampionFinder | None = None,
    record: Recorder | None = None,
    remote: RemoteCanary | None = None,
    open_store: Callable[[str], Any] | None = None,
    later: contextlib.ExitStack | None = None,
) -> CanaryResult:
    """Run the canary gate on an assembled repository and write its report.

    Args:
        spec: the release spec (``spec.canary`` holds the gates).
        intake: the model version (lineage).
        export: where the golden set, its ground truth and the native reference are.
        assembled: the repository, its entry model, load order and how to read its outputs.
        ws: the release workspace; the report goes to ``ws.stage_dir("canary")``.
        endpoint: ``host:port`` of a running Triton to use instead of a local one.
        find_champion: finds the production champion (given a folder to fetch it into); None judges
            the candidate alone (the change gates are skipped, and the report says so).
        record: called with the closed report (pass or reject), e.g. to log the served metrics to MLflow.
        remote: a canary Triton started separately that shares no disk (:mod:`model_release.triton.delivery`); takes the place
            of ``endpoint``. ``open_store`` opens its object-store repository with the task's credentials.
        later: where the local Triton's stop (a thread, started once the load phase is over) is joined:
            the caller's, when it has more to do meanwhile (:func:`model_release.pipeline.release` promotes);
            None joins it before this returns.

    Returns:
        The verdict, the report paths, the figures and the champion it was judged against.

    Raises:
        CanaryRejected: a model failed to load, or a gate failed; the reports are written first, the
            message names each failed gate with the candidate's figure, the champion's and the limit,
            and the error carries the rejected result (``.result``).
        CanaryInconclusive: no gate failed, but one could not decide (an interval that straddles its
            limit); the reports are written first (verdict ``inconclusive``), the message names each
            such gate and what would decide it, and the error carries the result (``.result``).
        ServiceUnavailable: the Triton, or the store holding the champion, could not be reached.
        GpuUnavailable: the repository holds a model the local CPU Triton cannot serve (a TensorRT plan).
    """
    folder = ws.stage_dir(CANARY, fresh=True)
    t0 = time.perf_counter()
    report = CanaryReport(
        release_id=ws.release_id, release=spec.name,
        model={"name": intake.model_name, "version": intake.version, "alias": intake.alias, "run_id": intake.run_id},
        entry_model=assembled.entry_model, source_repository=assembled.repository_dir,
        started_at=datetime.now(timezone.utc).isoformat(), trigger=trigger(),
    )
    golden = load_golden(spec, export, report)
    report.acknowledgements = _acknowledgements(spec)
    champion = find_champion(folder / "champion") if find_champion else Champion(
        NONE, spec.promote.channel, reason="the canary ran without a champion finder (no store or MLflow given)")
    report.champion = champion.describe()
    if intake.members:
        _pipeline_members(report, intake, champion)
    judgement, replays = Judgement(), None
    # the local Triton stops on a thread of its own while judging and reporting go on; joined before returning,
    # or by the caller's ``later``
    with contextlib.ExitStack() as own:
        later = later if later is not None else own
        try:
            replays = serve_and_replay(spec, assembled, export, golden, champion, folder, endpoint, report, remote, open_store,
                                       later=later, blocked=lambda r: blocked_on_replay(spec, assembled, golden, r, champion, into=judgement))
            judge(spec, assembled, golden, replays, champion, into=judgement)
        except UserError as exc:  # the candidate's (or the spec's) fault: the report says why before the error goes up
            if report.closed:
                raise
            _take(report, judgement, replays)
            result = _close(report, folder, False, [exc.message], t0, champion, record)
            if isinstance(exc, CanaryRejected):
                raise CanaryRejected(f"{exc.message} The report is at {result.report_json}.", result=result) from None
            raise exc.restated(f"{exc.message}. The report is at {result.report_json}.") from None
        _take(report, judgement, replays)
        return _verdict(spec, ws.release_id, report, judgement, folder, t0, champion, record)


def _verdict(spec: ReleaseSpec, release_id: str, report: CanaryReport, judgement: Judgement, folder: Path, t0: float,
             champion: Champion, record: Recorder | None) -> CanaryResult:
    """Close the report on the gates' verdict: a failed gate rejects (whatever else could not decide);
    else an inconclusive gate makes the canary inconclusive; else it passed."""
    reasons, undecided = judgement.reasons, judgement.undecided
    inconclusive = bool(undecided) and not reasons
    result = _close(report, folder, not reasons and not inconclusive, undecided if inconclusive else reasons, t0, champion,
                    record, inconclusive=inconclusive)
    where = f"The report is at {result.report_json} ({result.report_html})."
    if inconclusive:
        raise CanaryInconclusive(f"the canary of {spec.name} ({release_id}) is inconclusive: no gate failed, but "
                                 + "; ".join(undecided) + ". Nothing is promoted and nothing rejected: a later canary "
                                 f"decides it. {where}", result=result)
    if reasons:
        raise CanaryRejected(f"the canary of {spec.name} ({release_id}) was rejected: " + "; ".join(reasons) + f". {where}",
                             result=result)
    return result


def _pipeline_members(report: CanaryReport, intake: IntakeResult, champion: Champion) -> None:
    """A cascade's or fan-out's members in the report: each one's version (``model.members``) and
    which of them changed against the champion's manifest (``champion.changed_members``; every
    member when the champion records none: it is not a served pipeline release)."""
    from ..intake.members import changed_members, lineage_of

    lineage = lineage_of(intake.members)
    report.model = {**report.model, "members": {k: (f"{v.name} v{v.version}" if v.kind != "unregistered" else v.source)
                                                for k, v in lineage.items()}}
    theirs = (champion.manifest or {}).get("members")
    changed = changed_members(lineage, theirs)
    report.champion = {**(report.champion or {}), "changed_members": changed}
    log.info("canary: the pipeline's members that changed against the champion %s: %s", champion.name or "(none)",
             ", ".join(changed) or "none")


def _acknowledgements(spec: ReleaseSpec) -> list[dict[str, Any]]:
    """What the spec says it accepts on purpose, for the top of the report."""
    out = []
    if spec.promote.breaking_change:
        out.append({"setting": "promote.breaking_change", "text": spec.promote.breaking_change,
                    "meaning": "an interface break against the champion is acknowledged (recorded in the manifest)"})
    if spec.golden.min_rows < DEFAULT_MIN_GOLDEN_ROWS:
        out.append({"setting": "golden.min_rows", "text": str(spec.golden.min_rows),
                    "meaning": f"golden sets smaller than the default minimum of {DEFAULT_MIN_GOLDEN_ROWS} rows are accepted"})
    return out



def _take(report: CanaryReport, judgement: Judgement, replays: Replays | None) -> None:
    """Copy what judging found into the report, and draw the plots from its evidence."""
    for name, section in judgement.sections().items():
        if section is not None:
            setattr(report, name, section)
    replay_ms = None
    if replays is not None and judgement.timing is not None:
        replay_ms = {"candidate": replays.candidate.latencies_ms,
                     **({"champion": replays.champion.latencies_ms} if replays.champion is not None else {})}
    report.plots.update(plots_of(judgement.evidence, load=replays.load_histograms if replays is not None else None,
                                 replay_ms=replay_ms))


def _close(report: CanaryReport, folder: Path, passed: bool, reasons: list[str], t0: float, champion: Champion,
           record: Recorder | None, *, inconclusive: bool = False) -> CanaryResult:
    """Set the verdict, record it elsewhere, write report.json and report.html, and return the stage's result."""
    report.close(passed, reasons, datetime.now(timezone.utc).isoformat(), time.perf_counter() - t0, inconclusive=inconclusive)
    if record is not None:
        report.recorded = record(report)
    json_path, html_path = write_reports(folder, report)
    attach = getattr(record, "attach", None)  # a recorder that keeps artifacts (MLflow) gets the written report
    if attach is not None:
        attach(report, [html_path, json_path])
    return CanaryResult(passed=passed, report_json=str(json_path), report_html=str(html_path), summary=report.summary(),
                        figures=report.figures(), server=report.server, champion_release=champion.release_id,
                        champion_kind=champion.kind, champion_pinned=champion.pinned,
                        repository_dir=(report.tuning or {}).get("repository"), verdict=report.verdict or "rejected")
