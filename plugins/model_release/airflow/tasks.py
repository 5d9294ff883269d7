"""Task bodies for the release DAG: each reads the release reference, runs one stage, returns it.

A *release reference* is the small JSON dict that travels in XCom::

    {"release_id": ..., "workspace_root": ..., "spec_path": ..., "overrides": {...}, <stage>: {summary}}

Stage results themselves live in the release workspace; a retried task finds them there.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from airflow.sdk.exceptions import AirflowFailException

from ..errors import UserError

from ..pipeline import Services
from ..spec import ReleaseSpec, load_spec
from ..types import AssembleResult, CanaryResult, ExportResult, IntakeResult, TensorRTResult
from ..workspace import Workspace, check_release_id
from .hooks import MlflowHook, ModelStoreHook, TritonCanaryHook

F = TypeVar("F", bound=Callable[..., Any])


def no_retry_on_user_error(fn: F) -> F:
    """A bad spec, an unknown model or a failed gate will fail again: fail the task without retries.

    Infrastructure errors propagate unchanged, so Airflow retries them.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            raise AirflowFailException(f"[{exc.kind}] {exc}") from exc

    return wrapper  # type: ignore[return-value]


HOME = Path(os.environ.get("MODEL_RELEASE_HOME", Path(__file__).resolve().parents[3]))


def _spec(ref: dict[str, Any]) -> ReleaseSpec:
    return load_spec(ref["spec_path"], overrides=ref.get("overrides") or None)


def _ws(ref: dict[str, Any]) -> Workspace:
    return Workspace(ref["release_id"], ref["workspace_root"])


def _services(ref: dict[str, Any], *, store: bool = False, triton: bool = False) -> Services:
    conns = ref.get("connections", {})
    return Services(
        tracking_uri=MlflowHook(conns.get("mlflow_conn_id", MlflowHook.default_conn_name)).tracking_uri(),
        open_store=ModelStoreHook(conns.get("aws_conn_id", ModelStoreHook.default_conn_name)).open_store if store else None,
        triton_endpoint=TritonCanaryHook(conns.get("triton_conn_id", TritonCanaryHook.default_conn_name)).endpoint() if triton else None,
    )


@no_retry_on_user_error
def start(params: dict[str, Any], run_id: str, run_after: Any) -> dict[str, Any]:
    """Validate the spec and the trigger's parameters; name the release (stable across retries)."""
    spec_path = Path(params["spec"])
    if not spec_path.is_absolute():
        spec_path = HOME / spec_path
    overrides: dict[str, Any] = {}
    if params.get("version"):
        overrides["model.version"] = int(params["version"])
    elif params.get("alias"):
        overrides["model.alias"] = params["alias"]
    spec = load_spec(spec_path, overrides=overrides or None)
    if params.get("release_id"):
        release_id = check_release_id(params["release_id"])
    else:
        digest = hashlib.sha256(run_id.encode()).hexdigest()[:4]
        release_id = f"{spec.name}-{run_after:%Y%m%dT%H%M%SZ}-{digest}"
    return {
        "release_id": release_id,
        "workspace_root": str(Path(params.get("workspace") or os.environ.get("MODEL_RELEASE_WORKSPACE") or HOME / ".work" / "workspace").resolve()),
        "spec_path": str(spec_path),
        "overrides": overrides,
        "promote": bool(params.get("promote", True)),
        "model": spec.model.uri,
    }


@no_retry_on_user_error
def intake(ref: dict[str, Any]) -> dict[str, Any]:
    from ..pipeline import run_intake

    result = run_intake(_spec(ref), _ws(ref), _services(ref))
    return {**ref, "intake": {"model": result.model_uri, "run_id": result.run_id, "digest": result.content_digest}}


@no_retry_on_user_error
def export(ref: dict[str, Any]) -> dict[str, Any]:
    from ..pipeline import run_export

    ws = _ws(ref)
    result = run_export(_spec(ref), ws, _required(ws, "intake", IntakeResult))
    return {**ref, "export": {"onnx_sha256": result.onnx_sha256, "cached": result.cached, "golden_rows": result.golden_rows}}


@no_retry_on_user_error
def tensorrt(ref: dict[str, Any]) -> dict[str, Any]:
    from ..pipeline import run_tensorrt

    ws = _ws(ref)
    result = run_tensorrt(_spec(ref), ws, _required(ws, "export", ExportResult))
    return {**ref, "tensorrt": {"built": result.built, "reason": result.reason, "plan_sha256": result.plan_sha256}}


@no_retry_on_user_error
def assemble(ref: dict[str, Any]) -> dict[str, Any]:
    from ..pipeline import run_assemble

    ws = _ws(ref)
    result = run_assemble(
        _spec(ref), ws, _required(ws, "intake", IntakeResult), _required(ws, "export", ExportResult),
        ws.load_result("tensorrt", TensorRTResult),
    )
    return {**ref, "repository": {"entry_model": result.entry_model, "models": result.models, "warnings": len(result.warnings)}}


@no_retry_on_user_error
def canary(ref: dict[str, Any]) -> dict[str, Any]:
    from ..pipeline import run_canary

    ws = _ws(ref)
    result = run_canary(
        _spec(ref), ws, _services(ref, triton=True), _required(ws, "intake", IntakeResult),
        _required(ws, "export", ExportResult), _required(ws, "repository", AssembleResult),
    )
    return {**ref, "canary": {"passed": result.passed, "summary": result.summary, "report": result.report_json}}


@no_retry_on_user_error
def promote(ref: dict[str, Any]) -> dict[str, Any]:
    from ..pipeline import run_promote

    ws = _ws(ref)
    if not ref.get("promote", True):
        return {**ref, "promoted": None}
    result = run_promote(
        _spec(ref), ws, _services(ref, store=True), _required(ws, "export", ExportResult),
        _required(ws, "repository", AssembleResult), _required(ws, "canary", CanaryResult),
    )
    return {**ref, "promoted": result.to_dict()}


def _required(ws: Workspace, stage: str, cls: type) -> Any:
    result = ws.load_result(stage, cls)
    if result is None:
        from ..errors import InfraError

        raise InfraError(
            f"the {stage} result of release {ws.release_id} is not in the workspace {ws.path}; "
            f"every worker must reach the same workspace (set MODEL_RELEASE_WORKSPACE), or clear and rerun the {stage} task"
        )
    return result
