"""The canary's verdict in MLflow: what the *served* candidate scored, attached to its model version.

For every canary (passed or rejected) :func:`mlflow_recorder` logs one run, ``canary <release>``,
in the candidate's own experiment: the golden set as its evaluation dataset (inputs and ground
truth, context ``canary``), the candidate's logged model as its input, and the served figures as
metrics attached to that logged model and dataset (MLflow 3's model metrics), so the registry
shows them on the model version. Once written, the report itself (``canary/report.html`` and
``canary/report.json``) is attached to that run as artifacts (:meth:`MlflowRecorder.attach`). The version is tagged with the verdict and the run. A registry that
cannot be reached does not change the verdict: the report records why nothing was logged.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from ...mlflow_env import quiet_mlflow_env
from ...types import ExportResult, IntakeResult
from .document import CanaryReport

log = logging.getLogger(__name__)

TAG_VERDICT = "model_release.canary_verdict"
TAG_RUN = "model_release.canary_run_id"
TAG_RELEASE = "model_release.canary_release_id"
#: the experiment used when the candidate's run (and so its experiment) is gone
FALLBACK_EXPERIMENT = "model-release-canary"


def served_figures(report: CanaryReport) -> dict[str, float]:
    """The figures worth a metric: quality on ground truth, likeness to the champion, latency, parity."""
    out: dict[str, float] = {}
    for name, value in ((report.quality or {}).get("candidate") or {}).items():
        out[f"canary_{name}"] = value
    shift = report.shift or {}
    for key in ("agreement", "psi", "js_distance", "ks", "wasserstein", "cosine_mean", "retrieval", "neighbours", "norm_change"):
        if isinstance(shift.get(key), int | float):
            out[f"canary_champion_{key}"] = shift[key]
    timing = report.timing or {}
    for key in ("p50_ms", "p99_ms", "throughput_rows_per_s"):
        if isinstance(timing.get(key), int | float):
            out[f"canary_{key}"] = timing[key]
    for name, fig in (report.parity or {}).items():
        if fig.get("kind") == "numeric":
            out[f"canary_parity_max_abs_{name}"] = fig.get("max_abs", 0.0)
    out["canary_passed"] = 1.0 if report.passed else 0.0
    return {k: float(v) for k, v in out.items() if np.isfinite(float(v))}


class MlflowRecorder:
    """A recorder (see :func:`~model_release.canary.stage.run_canary`) logging the verdict to MLflow, then attaching the written report."""

    def __init__(self, tracking_uri: str, intake: IntakeResult, export: ExportResult) -> None:
        self.tracking_uri, self.intake, self.export = tracking_uri, intake, export

    def __call__(self, report: CanaryReport) -> dict[str, Any]:
        try:
            return {"mlflow": _log(self.tracking_uri, self.intake, self.export, report)}
        except Exception as exc:  # noqa: BLE001 - the verdict stands; say why nothing was logged
            log.warning("canary: the verdict was not logged to MLflow (%s)", type(exc).__name__)
            return {"mlflow": {"error": f"not logged to MLflow ({type(exc).__name__}); the verdict stands"}}

    def attach(self, report: CanaryReport, files: list[Path]) -> None:
        """The written report (``report.html``, ``report.json``) as artifacts ``canary/...`` of the run logged above."""
        run_id = ((report.recorded or {}).get("mlflow") or {}).get("run_id")
        if not run_id:
            return
        try:
            from mlflow import MlflowClient

            client = MlflowClient(tracking_uri=self.tracking_uri, registry_uri=self.tracking_uri)
            for path in files:
                client.log_artifact(run_id, str(path), REPORT_ARTIFACTS)
        except Exception as exc:  # noqa: BLE001 - the verdict stands; the report stays in the workspace
            log.warning("canary: the report was not attached to MLflow run %s (%s); it is at %s", run_id,
                        type(exc).__name__, files[0] if files else "?")
            return
        log.info("canary: the report is attached to MLflow run %s as %s/", run_id, REPORT_ARTIFACTS)


#: where the report goes among the evaluation run's artifacts
REPORT_ARTIFACTS = "canary"


def mlflow_recorder(tracking_uri: str, intake: IntakeResult, export: ExportResult) -> MlflowRecorder:
    """A recorder (see :func:`~model_release.canary.stage.run_canary`) logging the verdict to MLflow at ``tracking_uri``."""
    return MlflowRecorder(tracking_uri, intake, export)


def _log(tracking_uri: str, intake: IntakeResult, export: ExportResult, report: CanaryReport) -> dict[str, Any]:
    quiet_mlflow_env()
    import mlflow.data
    from mlflow import MlflowClient
    from mlflow.entities import DatasetInput, InputTag, LoggedModelInput, Metric, RunStatus

    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    version = client.get_model_version(intake.model_name, intake.version)
    model_id = logged_model_id(version)
    experiment_id = _experiment(client, intake)
    with np.load(export.golden_path, allow_pickle=False) as golden:
        features = {k: golden[k] for k in golden.files}
    targets = None
    if export.truth_path:
        with np.load(export.truth_path, allow_pickle=False) as truth:
            targets = truth["target"]
    dataset = mlflow.data.from_numpy(features, targets=targets, source=export.golden_path, name=f"{report.release}-golden")
    run = client.create_run(experiment_id, run_name=f"canary {report.release_id}", tags={
        TAG_RELEASE: report.release_id, TAG_VERDICT: report.verdict or "", "model_release.model_version": intake.version,
    })
    run_id = run.info.run_id
    try:
        client.log_inputs(run_id, datasets=[DatasetInput(dataset._to_mlflow_entity(), tags=[InputTag("mlflow.data.context", "canary")])],
                          models=[LoggedModelInput(model_id)] if model_id else None)
        now = int(time.time() * 1000)
        figures = served_figures(report)
        client.log_batch(run_id, metrics=[Metric(k, v, now, 0, model_id=model_id, dataset_name=dataset.name,
                                                 dataset_digest=dataset.digest) for k, v in sorted(figures.items())])
        client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED))
    except BaseException:
        client.set_terminated(run_id, RunStatus.to_string(RunStatus.FAILED))
        raise
    for key, value in ((TAG_VERDICT, report.verdict or ""), (TAG_RUN, run_id), (TAG_RELEASE, report.release_id)):
        client.set_model_version_tag(intake.model_name, intake.version, key, value)
    log.info("canary: logged %d served figures to MLflow run %s (model %s)", len(figures), run_id, model_id)
    return {"run_id": run_id, "experiment_id": experiment_id, "model_id": model_id, "dataset": dataset.name,
            "dataset_digest": dataset.digest, "metrics": sorted(figures)}


def logged_model_id(version: Any) -> str | None:
    """The MLflow 3 logged model behind a model version: its ``model_id``, or the ``models:/m-...`` of its source."""
    model_id = getattr(version, "model_id", None)
    source = str(getattr(version, "source", "") or "")
    if not model_id and source.startswith("models:/m-"):
        model_id = source.removeprefix("models:/").split("/")[0]
    return model_id or None


def _experiment(client: Any, intake: IntakeResult) -> str:
    """The candidate's own experiment, else :data:`FALLBACK_EXPERIMENT` (created when missing)."""
    if intake.run_id:
        try:
            return client.get_run(intake.run_id).info.experiment_id
        except Exception:  # noqa: BLE001 - a deleted run: use the fallback experiment
            pass
    existing = client.get_experiment_by_name(FALLBACK_EXPERIMENT)
    return existing.experiment_id if existing else client.create_experiment(FALLBACK_EXPERIMENT)
