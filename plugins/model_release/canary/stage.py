"""The canary stage: load the candidate into a Triton, replay the golden set, compare, time, expect, report.

On the embedded setup (``endpoint=None``) the assembled repository is copied to
``<workspace>/canary/repository`` with every ONNX leaf shimmed (:mod:`.shim`) and served by a
:class:`~model_release.local.triton.LocalTriton` started for this run. With an ``endpoint`` the
canary uses that Triton as it is: it must run in explicit model-control mode with the assembled
repository as (one of) its model repositories; models are loaded by name and unloaded afterwards.

Phases: :func:`_serve_and_replay` (server, load, replay), :func:`_judge` (parity, timing,
expectations, the production baseline, the verdict), :func:`_close` (the reports and the result).
Everything found goes into one typed :class:`~.report.CanaryReport`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CanaryRejected
from ..spec import ReleaseSpec
from ..types import AssembleResult, CanaryResult, ExportResult, IntakeResult
from ..workspace import Workspace
from . import compare as cmp
from .client import ReplayResult, TritonHttpClient, replay
from .report import CanaryReport, verdict, write_reports
from .server import CanaryServer
from .shim import prepare_canary_repository


def _load_npz(path: str, what: str) -> dict[str, np.ndarray]:
    if not path or not Path(path).is_file():
        raise CanaryRejected(f"the {what} {path!r} does not exist; re-run the export stage")
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


@contextlib.contextmanager
def _triton(spec: ReleaseSpec, assembled: AssembleResult, folder: Path, endpoint: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (url, server facts): a LocalTriton on a shimmed copy, or the given endpoint."""
    if endpoint is not None:
        yield endpoint.removeprefix("http://"), {
            "mode": "endpoint", "url": endpoint, "description": "remote Triton, backends as deployed", "shimmed_models": [],
            "repository": "the endpoint's own model repository",
        }
        return
    from ..local.triton import LocalTriton

    copy = prepare_canary_repository(Path(assembled.repository_dir), folder / "repository")
    facts = {
        "mode": "local", "description": copy.description, "shimmed_models": copy.shimmed,
        "repository": str(copy.path), "log": str(folder / "tritonserver.log"),
    }
    # the server's own files go to a temporary folder; only its log stays, beside the report
    with LocalTriton(copy.path, log_path=folder / "tritonserver.log", ready_timeout=spec.canary.ready_timeout_s) as triton:
        facts["url"] = triton.http_url
        yield triton.http_url, facts


def run_canary(
    spec: ReleaseSpec,
    intake: IntakeResult,
    export: ExportResult,
    assembled: AssembleResult,
    ws: Workspace,
    *,
    endpoint: str | None = None,
    baseline: dict[str, np.ndarray] | None = None,
    baseline_name: str | None = None,
) -> CanaryResult:
    """Run the canary gate on an assembled repository and write its report.

    Args:
        spec: the release spec (``spec.canary`` holds the gates).
        intake: the model version (lineage).
        export: where the golden set and the native reference are.
        assembled: the repository, its entry model, load order and how to read its outputs.
        ws: the release workspace; the report goes to ``ws.stage_dir("canary")``.
        endpoint: ``host:port`` of a running Triton to use instead of a local one.
        baseline: the production model's outputs on the same golden rows (reported, not gated).
        baseline_name: what to call the baseline in the report (e.g. its release id).

    Returns:
        The verdict, the report paths and the figures.

    Raises:
        CanaryRejected: a model failed to load, or parity, latency or expectations failed; the reports
            are written first, the message names the output, figures, tolerance and the report path,
            and the error carries the rejected result (``.result``).
        ServiceUnavailable: the Triton could not be started or reached.
        GpuUnavailable: the repository holds a model the local CPU Triton cannot serve (a TensorRT plan).
    """
    folder = ws.stage_dir("canary", fresh=True)
    t0 = time.perf_counter()
    report = CanaryReport(
        release_id=ws.release_id, release=spec.name,
        model={"name": intake.model_name, "version": intake.version, "alias": intake.alias, "run_id": intake.run_id},
        entry_model=assembled.entry_model, source_repository=assembled.repository_dir,
        started_at=datetime.now(timezone.utc).isoformat(),
    )
    golden = _load_npz(export.golden_path, "golden set")
    reference = _load_npz(export.reference_path, "native reference")
    report.golden = {
        "path": export.golden_path, "reference": export.reference_path, "inputs": sorted(golden),
        "rows": int(len(next(iter(golden.values())))) if golden else 0,
    }
    try:
        replayed = _serve_and_replay(spec, assembled, export, golden, folder, endpoint, report)
        passed, reasons = _judge(spec, assembled, reference, replayed, baseline, baseline_name, report)
    except CanaryRejected as exc:  # the candidate's fault: the report says why before the error goes up
        if report.closed:
            raise
        result = _close(report, folder, False, [exc.message], t0)
        raise CanaryRejected(f"{exc.message} The report is at {result.report_json}.", result=result) from None
    result = _close(report, folder, passed, reasons, t0)
    if not passed:
        raise CanaryRejected(
            f"the canary of {spec.name} ({ws.release_id}) was rejected: " + "; ".join(reasons)
            + f". Change the canary setting named in brackets in the release spec only if that is acceptable. "
            f"The report is at {result.report_json} ({result.report_html}).",
            result=result,
        )
    return result


def _serve_and_replay(
    spec: ReleaseSpec, assembled: AssembleResult, export: ExportResult, golden: dict[str, np.ndarray],
    folder: Path, endpoint: str | None, report: CanaryReport,
) -> ReplayResult:
    """Start (or reach) the Triton, load the repository in dependency order, replay the golden set."""
    order = list(assembled.load_order)
    if assembled.entry_model not in order:
        order.append(assembled.entry_model)
    with _triton(spec, assembled, folder, endpoint) as (url, server_facts):
        report.server = server_facts
        server = CanaryServer(url, ready_timeout=spec.canary.ready_timeout_s)
        try:
            meta = server.metadata()
            server_facts.update({"name": meta.get("name"), "version": meta.get("version")})
            report.load = {"order": order}
            loaded = server.load(order)
            report.load = {"order": loaded.order, "versions": loaded.versions, "seconds": loaded.seconds}
            server_facts["models_loaded"] = loaded.versions
            entry = server.entry(assembled.entry_model)
            batch_rows = min(spec.canary.batch_rows, entry.max_batch_size) if entry.max_batch_size > 0 else spec.canary.batch_rows
            report.golden.update({
                "batch_rows": batch_rows, "batch_rows_requested": spec.canary.batch_rows,
                "entry_max_batch_size": entry.max_batch_size,
            })
            missing = sorted(set(entry.inputs) - set(golden))
            if missing:
                raise CanaryRejected(
                    f'entry model "{entry.name}" takes inputs {missing} that the golden set {export.golden_path!r} lacks '
                    f"(it has {sorted(golden)}); the golden set must be keyed by the entry model's input names"
                )
            return replay(
                {k: golden[k] for k in entry.inputs},
                lambda: TritonHttpClient(url, entry.name, entry.inputs, list(entry.outputs)),
                batch_rows=batch_rows,
                concurrency=spec.canary.concurrency,
            )
        finally:
            if endpoint is not None:
                server.unload(order)
            server.close()


def _judge(
    spec: ReleaseSpec, assembled: AssembleResult, reference: dict[str, np.ndarray], result: ReplayResult,
    baseline: dict[str, np.ndarray] | None, baseline_name: str | None, report: CanaryReport,
) -> tuple[bool, list[str]]:
    """Every gate on the served outputs; fills the report's sections and returns the verdict."""
    interface = cmp.Interface.of(assembled)
    parity, unmatched = cmp.compare_with_reference(
        interface, spec.canary.tolerances, spec.canary.min_label_agreement, reference, result.outputs,
    )
    report.parity, report.not_compared = parity.to_dict(), unmatched
    timing = result.timing()
    report.timing = timing
    report.slo = {"p99_ms_limit": spec.canary.p99_ms, "p99_ms": timing["p99_ms"],
                  "passed": spec.canary.p99_ms is None or timing["p99_ms"] <= spec.canary.p99_ms}
    expectations = None
    if spec.canary.expectations:
        from .expect import run_expectations

        expectations = run_expectations(dict(result.outputs), classifier=interface.names_labels,
                                        label_set=interface.label_set() if interface.names_labels else None)
        report.expectations = expectations
    else:
        report.expectations = {"skipped": "canary.expectations is false in the release spec"}
    if baseline is not None:
        report.baseline = {"name": baseline_name, **cmp.compare_with_baseline(interface, baseline, result.outputs)}
    return verdict(parity, timing, spec.canary.p99_ms, expectations)


def _close(report: CanaryReport, folder: Path, passed: bool, reasons: list[str], t0: float) -> CanaryResult:
    """Set the verdict, write report.json and report.html, and return the stage's result."""
    report.close(passed, reasons, datetime.now(timezone.utc).isoformat(), time.perf_counter() - t0)
    json_path, html_path = write_reports(folder, report)
    return CanaryResult(passed=passed, report_json=str(json_path), report_html=str(html_path), summary=report.summary(),
                        figures=report.figures(), server=report.server)
