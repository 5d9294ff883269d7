"""The release, stage by stage: the one code path behind the DAG, the CLI and the demo.

Each ``run_<stage>`` function takes the spec, the workspace and the earlier stages' results and
returns its own result (saved in the workspace). Airflow tasks call them one per task with results
carried in XCom; :func:`release` calls them in sequence in one process. Services (MLflow, the
store, a remote canary) arrive through :class:`Services`, so the same code runs against the
embedded stack on one machine and the distributed one.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ModelReleaseError
from .spec import ReleaseSpec
from .types import AssembleResult, CanaryResult, ExportResult, IntakeResult, PromoteResult, TensorRTResult
from .workspace import Workspace, atomic_write_json, link_or_copy

log = logging.getLogger(__name__)


@dataclass
class Services:
    """Where the release's services are.

    Attributes:
        tracking_uri: the MLflow tracking (and registry) URI; None uses MLflow's own default/env.
        open_store: builds the model store for a store URI (``s3://...`` or ``file:///...``); the
            Airflow hook passes one that uses the connection's credentials.
        triton_endpoint: a running canary Triton (``host:port``, HTTP); None starts a local one.
    """

    tracking_uri: str | None = None
    open_store: Callable[[str], Any] | None = None
    triton_endpoint: str | None = None

    def store(self, uri: str) -> Any:
        if self.open_store is not None:
            return self.open_store(uri)
        from .store import open_store

        return open_store(uri)


def run_intake(spec: ReleaseSpec, ws: Workspace, services: Services) -> IntakeResult:
    from .intake import resolve

    log.info("intake: resolving %s", spec.model.uri)
    result = resolve(spec, ws, tracking_uri=services.tracking_uri)
    log.info("intake: %s resolved to version %s (run %s, flavor %s)", spec.model.uri, result.version, result.run_id, result.flavor)
    return result


def run_export(spec: ReleaseSpec, ws: Workspace, intake: IntakeResult) -> ExportResult:
    from .export import export

    log.info("export: %s version %s to ONNX (opset %s)", intake.model_name, intake.version, spec.export.opset)
    result = export(spec, intake, ws)
    log.info("export: parity passed on %d golden rows%s", result.golden_rows, " (cached ONNX reused)" if result.cached else "")
    return result


def run_tensorrt(spec: ReleaseSpec, ws: Workspace, export: ExportResult) -> TensorRTResult:
    from .tensorrt import build_plan

    result = build_plan(spec, export, ws)
    ws.save_result("tensorrt", result)
    if result.built:
        log.info("tensorrt: built %s (%s)", result.plan_path, result.precision)
    else:
        log.info("tensorrt: skipped: %s", result.reason)
    return result


def run_assemble(
    spec: ReleaseSpec, ws: Workspace, intake: IntakeResult, export: ExportResult, tensorrt: TensorRTResult | None = None
) -> AssembleResult:
    from .repository.assemble import assemble

    result = assemble(spec, intake, export, ws, tensorrt=tensorrt)
    ws.save_result("repository", result)
    log.info("assemble: %d models, entry %s, load order %s", len(result.models), result.entry_model, result.load_order)
    for warning in result.warnings:
        log.warning("lint: %s", warning)
    return result


def production_baseline(
    spec: ReleaseSpec, ws: Workspace, services: Services, intake: IntakeResult, export: ExportResult
) -> tuple[dict[str, Any] | None, str | None]:
    """The current production model's native outputs on this release's golden inputs, if there is one.

    Returns ``(outputs, name)`` or ``(None, None)`` when the channel's MLflow alias is unset or
    already names the candidate version.
    """
    alias = spec.promote.mlflow_alias
    if not alias:
        return None, None
    from .intake import load_native, resolve

    try:
        prod_spec = spec.model_copy(update={"model": spec.model.model_copy(update={"alias": alias, "version": None})})
        base_ws = Workspace("production", root=ws.path / "canary-baseline")
        prod = resolve(prod_spec, base_ws, tracking_uri=services.tracking_uri)
    except ModelReleaseError as exc:
        log.info("canary: no production baseline (%s)", exc)
        return None, None
    if prod.version == intake.version:
        return None, None
    import numpy as np

    with np.load(export.golden_path, allow_pickle=False) as golden:
        inputs = {k: golden[k] for k in golden.files}
    predict = load_native(prod)
    outputs = predict(inputs)
    return {k: np.asarray(v) for k, v in outputs.items()}, f"production (version {prod.version})"


def run_canary(
    spec: ReleaseSpec,
    ws: Workspace,
    services: Services,
    intake: IntakeResult,
    export: ExportResult,
    assembled: AssembleResult,
) -> CanaryResult:
    from .canary import run_canary as canary

    baseline, baseline_name = production_baseline(spec, ws, services, intake, export)
    result = canary(
        spec, intake, export, assembled, ws,
        endpoint=services.triton_endpoint, baseline=baseline, baseline_name=baseline_name,
    )
    log.info("canary: %s", result.summary)
    return result


def stage_release_dir(ws: Workspace, assembled: AssembleResult, canary: CanaryResult, export: ExportResult) -> Path:
    """Lay out the release exactly as its store prefix: models/, reports/, release.json (final)."""
    from .repository.manifest import finalize_manifest

    release_dir = ws.stage_dir("promote", fresh=True) / "release"
    shutil.copytree(assembled.repository_dir, release_dir / "models", copy_function=link_or_copy)
    reports = release_dir / "reports"
    reports.mkdir(parents=True)
    for path in (canary.report_json, canary.report_html, str(Path(export.onnx_path).parent / "parity.json")):
        if path and Path(path).is_file():
            shutil.copy2(path, reports / Path(path).name)
    shutil.copy2(assembled.manifest_path, release_dir / "release.json")
    finalize_manifest(
        release_dir / "release.json",
        release_dir,
        canary={"passed": canary.passed, "summary": canary.summary, "report": "reports/report.json", "figures": canary.figures, "server": canary.server},
    )
    return release_dir



def run_promote(
    spec: ReleaseSpec,
    ws: Workspace,
    services: Services,
    export: ExportResult,
    assembled: AssembleResult,
    canary: CanaryResult,
) -> PromoteResult:
    from .store import promote
    from .store.registry import MlflowFollower

    if not canary.passed:  # run_canary raises on failure; this guards a hand-edited result
        from .errors import CanaryRejected

        raise CanaryRejected(f"the canary did not pass ({canary.summary}); nothing is promoted", stage="promote")
    release_dir = stage_release_dir(ws, assembled, canary, export)
    store = services.store(spec.promote.store)
    follower = None
    if spec.promote.mlflow_alias and services.tracking_uri:
        follower = MlflowFollower(services.tracking_uri, alias=spec.promote.mlflow_alias)
    result = promote(release_dir, ws.release_id, store, spec.promote.channel, follower=follower)
    ws.save_result("promote", result)
    log.info(
        "promote: %s -> %s (channel %s, was %s; %d objects, %d uploaded, %d already there)",
        ws.release_id, result.release_prefix, result.channel, result.previous_release,
        result.objects, result.uploaded, result.skipped,
    )
    return result


@dataclass
class ReleaseOutcome:
    release_id: str
    workspace: str
    promoted: PromoteResult | None = None
    canary: CanaryResult | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "release_id": self.release_id,
            "workspace": self.workspace,
            "promoted": self.promoted.to_dict() if self.promoted else None,
            "canary": self.canary.to_dict() if self.canary else None,
            "error": self.error,
        }


def release(spec: ReleaseSpec, ws: Workspace, services: Services, *, promote: bool = True) -> ReleaseOutcome:
    """Run every stage in this process. Raises the first stage's error; nothing is promoted then."""
    outcome = ReleaseOutcome(release_id=ws.release_id, workspace=str(ws.path))
    intake = run_intake(spec, ws, services)
    export = run_export(spec, ws, intake)
    tensorrt = run_tensorrt(spec, ws, export)
    assembled = run_assemble(spec, ws, intake, export, tensorrt)
    outcome.canary = run_canary(spec, ws, services, intake, export, assembled)
    if promote:
        outcome.promoted = run_promote(spec, ws, services, export, assembled, outcome.canary)
    atomic_write_json(ws.path / "outcome.json", outcome.to_dict())
    return outcome
