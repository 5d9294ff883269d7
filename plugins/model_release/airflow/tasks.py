"""Task bodies for the release DAG: each reads the release reference, runs one stage, returns it.

A *release reference* (:class:`~model_release.pipeline.ReleaseRef`) is the small JSON dict that
travels in XCom: the release id, where its workspace and spec are, the trigger's overrides, and
each finished stage's facts under ``stages``. Stage results themselves live in the release
workspace; a retried task finds them there.
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
from ..logs import quiet_wire_loggers
from ..names import check_release_id
from ..pipeline import ReleaseRef, Services, preflight
from ..spec import load_spec
from ..types import AssembleResult, CanaryResult, ExportResult, IntakeResult, TensorRTResult
from ..workspace import Workspace
from .hooks import MlflowHook, ModelStoreHook, TritonCanaryHook

F = TypeVar("F", bound=Callable[..., Any])


def no_retry_on_user_error(fn: F) -> F:
    """A bad spec, an unknown model or a failed gate will fail again: fail the task without retries.

    Infrastructure errors propagate unchanged, so Airflow retries them.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        quiet_wire_loggers()  # botocore's DEBUG records carry the key id and the session token
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            raise AirflowFailException(f"[{exc.kind}] {exc}") from exc

    return wrapper  # type: ignore[return-value]


HOME = Path(os.environ.get("MODEL_RELEASE_HOME", Path(__file__).resolve().parents[3]))


def _services(ref: ReleaseRef, *, store: bool = False, triton: bool = False) -> Services:
    conns = ref.connections
    return Services(
        tracking_uri=MlflowHook(conns.get("mlflow_conn_id", MlflowHook.default_conn_name)).tracking_uri(),
        open_store=ModelStoreHook(conns.get("aws_conn_id", ModelStoreHook.default_conn_name)).open_store if store else None,
        triton_endpoint=TritonCanaryHook(conns.get("triton_conn_id", TritonCanaryHook.default_conn_name)).endpoint() if triton else None,
    )


@no_retry_on_user_error
def start(params: dict[str, Any], run_id: str, run_after: Any) -> dict[str, Any]:
    """Validate the spec and the trigger's parameters, name the release (stable across retries) and
    claim its workspace for this run; everything checkable is checked before anything is written."""
    spec_path = Path(params["spec"])
    if not spec_path.is_absolute():
        spec_path = HOME / spec_path
    overrides: dict[str, Any] = {}
    if params.get("version") is not None:
        overrides["model.version"] = params["version"]
    elif params.get("alias") is not None:
        overrides["model.alias"] = params["alias"]
    spec = load_spec(spec_path, overrides=overrides or None)
    promote = bool(params.get("promote", True))
    if params.get("release_id"):
        release_id = check_release_id(params["release_id"])
    else:
        digest = hashlib.sha256(run_id.encode()).hexdigest()[:4]
        release_id = f"{spec.name}-{run_after:%Y%m%dT%H%M%SZ}-{digest}"
    root = params.get("workspace") or os.environ.get("MODEL_RELEASE_WORKSPACE") or HOME / ".work" / "workspace"
    ws = Workspace(release_id, Path(root).resolve())
    owner = f"airflow run {run_id}"  # the run's own retries (and a cleared run) find the workspace theirs
    services = Services(tracking_uri=MlflowHook().tracking_uri(), open_store=ModelStoreHook().open_store)
    preflight(spec, services, promote=promote, ws=ws, owner=owner)
    ws.claim(owner)
    return ReleaseRef(
        release_id=release_id, workspace_root=str(Path(root).resolve()), spec_path=str(spec_path),
        overrides=overrides, promote=promote, model=spec.model.uri,
    ).to_dict()


@no_retry_on_user_error
def intake(data: dict[str, Any]) -> dict[str, Any]:
    from ..pipeline import run_intake

    ref = ReleaseRef.from_dict(data)
    result = run_intake(ref.spec(), ref.workspace(), _services(ref))
    return ref.after("intake", {"model": result.model_uri, "run_id": result.run_id, "digest": result.content_digest}).to_dict()


@no_retry_on_user_error
def export(data: dict[str, Any]) -> dict[str, Any]:
    from ..pipeline import run_export

    ref = ReleaseRef.from_dict(data)
    ws = ref.workspace()
    result = run_export(ref.spec(), ws, _required(ws, "intake", IntakeResult))
    return ref.after("export", {"onnx_sha256": result.onnx_sha256, "cached": result.cached, "golden_rows": result.golden_rows}).to_dict()


@no_retry_on_user_error
def tensorrt(data: dict[str, Any]) -> dict[str, Any]:
    from ..pipeline import run_tensorrt

    ref = ReleaseRef.from_dict(data)
    ws = ref.workspace()
    result = run_tensorrt(ref.spec(), ws, _required(ws, "export", ExportResult))
    return ref.after("tensorrt", {"built": result.built, "reason": result.reason, "plan_sha256": result.plan_sha256}).to_dict()


@no_retry_on_user_error
def assemble(data: dict[str, Any]) -> dict[str, Any]:
    from ..pipeline import run_assemble

    ref = ReleaseRef.from_dict(data)
    ws = ref.workspace()
    result = run_assemble(
        ref.spec(), ws, _required(ws, "intake", IntakeResult), _required(ws, "export", ExportResult),
        ws.load_result("tensorrt", TensorRTResult),
    )
    return ref.after("repository", {"entry_model": result.entry_model, "models": result.models, "warnings": len(result.warnings)}).to_dict()


@no_retry_on_user_error
def canary(data: dict[str, Any]) -> dict[str, Any]:
    from ..pipeline import run_canary

    ref = ReleaseRef.from_dict(data)
    ws = ref.workspace()
    result = run_canary(
        ref.spec(), ws, _services(ref, store=True, triton=True), _required(ws, "intake", IntakeResult),
        _required(ws, "export", ExportResult), _required(ws, "repository", AssembleResult),
    )
    return ref.after("canary", {"passed": result.passed, "summary": result.summary, "report": result.report_json}).to_dict()


@no_retry_on_user_error
def promote(data: dict[str, Any]) -> dict[str, Any]:
    """Promote the release; returns the reference with ``stages["promote"]`` the PromoteResult (None: not asked to)."""
    from ..pipeline import run_promote

    ref = ReleaseRef.from_dict(data)
    ws = ref.workspace()
    if not ref.promote:
        return ref.after("promote", {}).to_dict()
    result = run_promote(
        ref.spec(), ws, _services(ref, store=True), _required(ws, "export", ExportResult),
        _required(ws, "repository", AssembleResult), _required(ws, "canary", CanaryResult),
    )
    return ref.after("promote", result.to_dict()).to_dict()


def _required(ws: Workspace, stage: str, cls: type) -> Any:
    result = ws.load_result(stage, cls)
    if result is None:
        from ..errors import InfraError

        raise InfraError(
            f"the {stage} result of release {ws.release_id} is not in the workspace {ws.path}; "
            f"every worker must reach the same workspace (set MODEL_RELEASE_WORKSPACE), or clear and rerun the {stage} task"
        )
    return result
