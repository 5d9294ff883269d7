"""Intake: resolve one immutable MLflow model version, download it, and describe it for Triton.

``resolve`` turns ``models:/NAME@ALIAS`` (or ``models:/NAME/VERSION``) into one version number at
resolve time, downloads that version into the release workspace, reads its flavor and signature,
maps the signature to Triton tensor specs (wire dtypes, dims without the batch dimension, names
made valid for Triton with the renaming recorded), and records the lineage (run id, source, the
run's metrics and params) and a content digest of the downloaded files.

MLflow's exceptions are converted here: a model, alias or version that does not exist, or whose
artifacts are gone, is an :class:`~model_release.errors.IntakeError` naming what is valid; a
tracking store that cannot be reached is a :class:`~model_release.errors.ServiceUnavailable`
(within MLflow's request limits, see :mod:`~model_release.mlflow_env`). The result records the
tracking URI and the version's source with any credential redacted.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..model.dtypes import triton_from_mlflow, triton_from_numpy
from ..errors import IntakeError, ModelReleaseError, ServiceUnavailable
from ..mlflow_env import quiet_mlflow_env
from ..model.mlmodel import read_mlmodel, triton_name
from ..safe_text import redact
from ..stages import INTAKE
from ..types import IntakeResult, TensorSpec
from ..workspace import Workspace, sha256_file

if TYPE_CHECKING:
    from ..spec import ReleaseSpec

#: MLflow flavors that export can convert to ONNX, in the order they are looked for
SUPPORTED_FLAVORS = ("sklearn", "pytorch", "onnx", "xgboost", "lightgbm")

def content_digest(folder: Path) -> str:
    """sha256 over every file's relative path and content under ``folder`` (order-independent)."""
    h = hashlib.sha256()
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        h.update(f"{path.relative_to(folder).as_posix()}\0{sha256_file(path)}\n".encode())
    return h.hexdigest()


def schema_to_specs(schema: Any, *, what: str, default_name: str) -> tuple[list[TensorSpec], dict[str, str]]:
    """Turn an MLflow signature schema (tensor- or column-based) into Triton tensor specs.

    A tensor spec keeps its shape without the first (batch) dimension; a column becomes a
    ``[1]`` tensor per row. Unnamed tensors are called ``default_name`` (``input``, ``output``),
    numbered when there are several.

    Returns:
        The specs and the name map ``{source name: Triton name}`` for the names that changed.

    Raises:
        IntakeError: a type has no Triton data type, or a column is not a scalar column.
    """
    from mlflow.types.schema import ColSpec
    from mlflow.types.schema import TensorSpec as MlflowTensorSpec

    specs: list[TensorSpec] = []
    name_map: dict[str, str] = {}
    taken: set[str] = set()
    items = list(schema.inputs)
    for i, item in enumerate(items):
        source = item.name or (default_name if len(items) == 1 else f"{default_name}_{i}")
        name = triton_name(source, taken)
        label = f"{what} {source!r}"
        if isinstance(item, MlflowTensorSpec):
            datatype = triton_from_numpy(item.type, what=label)
            shape = tuple(int(d) for d in item.shape)
            dims = shape[1:] if shape else ()
        elif isinstance(item, ColSpec):
            type_name = getattr(item.type, "name", None)
            if not isinstance(type_name, str) or type_name == "datetime":
                raise IntakeError(
                    f"{label} has type {type_name or item.type!s}, which has no Triton data type; valid column types: "
                    "boolean, integer, long, float, double, string, binary. Convert the column (for a "
                    "datetime, e.g. to epoch seconds as long) before logging the model"
                )
            datatype = triton_from_mlflow(type_name, what=label)
            dims = (1,)
        else:  # pragma: no cover - MLflow has no third kind today
            raise IntakeError(f"{label}: signature entry {item!r} is neither a tensor nor a column")
        specs.append(TensorSpec(name=name, datatype=datatype, dims=dims, source_name=source if source != name else None))
        if source != name:
            name_map[source] = name
    return specs, name_map


def resolve(
    spec: ReleaseSpec,
    ws: Workspace,
    *,
    tracking_uri: str | None = None,
    client: Any = None,
    alias: str | None = None,
) -> IntakeResult:
    """Resolve ``spec.model`` to one model version, download it and describe it.

    Args:
        spec: the release spec; ``spec.model`` names the model and its alias or version.
        ws: the release workspace; the model goes to ``<ws>/intake/model``.
        tracking_uri: the MLflow tracking (and registry) URI; MLflow's default when None.
        client: an ``MlflowClient`` to use instead of building one from ``tracking_uri``.
        alias: the alias that named the version when the run claimed it, recorded in the lineage,
            when ``spec.model`` pins that version (:mod:`.candidate`: the alias is not asked again).

    Returns:
        The intake result (the pipeline's stage runner saves it as ``<ws>/intake/intake.json``).

    Raises:
        IntakeError: no such model, alias or version; no signature; an unsupported flavor; a
            signature type with no Triton data type.
        ServiceUnavailable: the tracking store could not be reached.
    """
    quiet_mlflow_env()
    from mlflow import MlflowClient

    if client is None:
        client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    tracking_uri = tracking_uri or getattr(client, "_registry_uri", None) or getattr(client, "tracking_uri", None)
    ref = spec.model
    version = find_version(client, ref.name, ref.alias, ref.version)
    run = _get_run(client, version.run_id) if version.run_id else None

    stage = ws.stage_dir(INTAKE, fresh=True)
    where = f'model "{ref.name}" version {version.version}'
    model_dir = _download(ref.name, str(version.version), stage / "model", tracking_uri)
    mlmodel = _read_downloaded(model_dir, where, str(version.source))
    flavor = next((f for f in SUPPORTED_FLAVORS if f in mlmodel.flavors), None)
    if flavor is None:
        raise IntakeError(
            f"{where} has flavor(s) {sorted(mlmodel.flavors)}, none of which can be exported to ONNX; "
            f"supported flavors: {', '.join(SUPPORTED_FLAVORS)}. Log the model with one of "
            "mlflow.sklearn / mlflow.pytorch / mlflow.onnx / mlflow.xgboost / mlflow.lightgbm"
        )
    if mlmodel.signature is None or mlmodel.signature.inputs is None:
        raise IntakeError(
            f"{where} has no signature, so its inputs and outputs are unknown. Log it again with "
            "signature=mlflow.models.infer_signature(X, model.predict(X)) or input_example=X[:5], and register that version"
        )
    inputs, in_map = schema_to_specs(mlmodel.signature.inputs, what=f"{where}: input", default_name="input")
    outputs: list[TensorSpec] = []
    out_map: dict[str, str] = {}
    if mlmodel.signature.outputs is not None:
        outputs, out_map = schema_to_specs(mlmodel.signature.outputs, what=f"{where}: output", default_name="output")

    result = IntakeResult(
        model_name=ref.name,
        version=str(version.version),
        alias=alias if alias is not None else ref.alias,
        run_id=version.run_id,
        source=redact(str(version.source)),
        flavor=flavor,
        model_dir=str(model_dir),
        inputs=inputs,
        outputs=outputs,
        content_digest=content_digest(model_dir),
        metrics={k: float(v) for k, v in (run.data.metrics if run else {}).items()},
        params={k: str(v) for k, v in (run.data.params if run else {}).items()},
        name_map={**in_map, **out_map},
        classes=None,
        tracking_uri=redact(tracking_uri) if tracking_uri else tracking_uri,
    )
    from ..model.native import load_native

    try:
        result.classes = load_native(result).classes
    except ModelReleaseError as exc:  # the model cannot be loaded by its own flavor: refuse it here
        raise IntakeError(f"{where}: {exc}") from exc
    return result


def _mlflow_boundary(exc: Exception, what: str) -> Exception:
    """Convert an MLflow exception that is not a "does not exist" into an infrastructure error."""
    from ..mlflow_env import RETRIES_ENV, TIMEOUT_ENV

    limits = (f"each request waited up to {os.environ.get(TIMEOUT_ENV)} s and was retried {os.environ.get(RETRIES_ENV)} "
              "times (--mlflow-timeout / --mlflow-retries, or MLFLOW_HTTP_REQUEST_TIMEOUT / MLFLOW_HTTP_REQUEST_MAX_RETRIES)")
    return ServiceUnavailable(f"MLflow could not {what}: {getattr(exc, 'message', exc)}; {limits}. "
                              "Retry once the tracking server is reachable")


def _not_found(exc: Exception) -> bool:
    code = getattr(exc, "error_code", "")
    # an unknown alias is reported as INVALID_PARAMETER_VALUE "... alias X not found."
    return code == "RESOURCE_DOES_NOT_EXIST" or (code == "INVALID_PARAMETER_VALUE" and "not found" in str(exc))


def find_version(client: Any, name: str, alias: str | None, version: int | None) -> Any:
    """The registry's ModelVersion that ``alias`` (or ``version``) of model ``name`` names.

    Raises:
        IntakeError: no such model (close names suggested), alias (the model's aliases listed) or
            version (its versions listed).
        ServiceUnavailable: MLflow could not be reached (within its request limits).
    """
    from mlflow.exceptions import MlflowException

    try:
        model = client.get_registered_model(name)
    except MlflowException as exc:
        if not _not_found(exc):
            raise _mlflow_boundary(exc, f"read registered model {name!r}") from exc
        names = _registered_names(client)
        close = difflib.get_close_matches(name, names, n=5, cutoff=0.5)
        hint = (
            f"did you mean {', '.join(repr(n) for n in close)}?" if close
            else f"registered models: {', '.join(repr(n) for n in names[:20])}" if names
            else "the registry has no registered models"
        )
        raise IntakeError(f'unknown model "{name}": no registered model has that name; {hint}') from None
    try:
        if alias is not None:
            return client.get_model_version_by_alias(name, alias)
        return client.get_model_version(name, str(version))
    except MlflowException as exc:
        if not _not_found(exc):
            raise _mlflow_boundary(exc, f"read model {name!r}") from exc
    if alias is not None:
        aliases = dict(getattr(model, "aliases", {}) or {})
        valid = (", ".join(f"{a} (version {v})" for a, v in sorted(aliases.items()))
                 or "none: set the alias on the version to release (MlflowClient().set_registered_model_alias), or wait "
                    "for training to set it")
        raise IntakeError(f'model "{name}" has no alias "{alias}"; its aliases: {valid}')
    versions = sorted(int(v.version) for v in client.search_model_versions(f"name='{name}'"))
    raise IntakeError(
        f'model "{name}" has no version {version}; its versions: {", ".join(map(str, versions)) or "none"}'
    )


def _registered_names(client: Any) -> list[str]:
    try:
        return sorted(m.name for m in client.search_registered_models(max_results=1000))
    except Exception:  # noqa: BLE001 - only a hint for a message
        return []


def _get_run(client: Any, run_id: str) -> Any:
    from mlflow.exceptions import MlflowException

    try:
        return client.get_run(run_id)
    except MlflowException as exc:
        if _not_found(exc):
            return None  # the run was deleted; the version is still immutable
        raise _mlflow_boundary(exc, f"read run {run_id}") from exc


def _read_downloaded(model_dir: Path, where: str, source: str) -> Any:
    """The downloaded model's MLmodel.

    Raises:
        IntakeError: there is none (the version's artifacts were deleted or moved), or it is not
            an MLmodel file MLflow can read.
    """
    if not (model_dir / "MLmodel").is_file():
        held = sorted(p.name for p in model_dir.iterdir())[:5] if model_dir.is_dir() else []
        raise IntakeError(
            f"{where}: its artifacts are missing (the download from {redact(source)} found "
            f"{'only ' + ', '.join(held) if held else 'nothing'}, no MLmodel file); they were deleted or moved. "
            "Log and register the model again and release that version, or pick another version"
        )
    try:
        return read_mlmodel(model_dir)
    except Exception as exc:  # noqa: BLE001 - MLflow raises several kinds for a damaged MLmodel
        raise IntakeError(f"{where}: its MLmodel file cannot be read ({type(exc).__name__}: {exc}); "
                          "log and register the model again") from None


def _download(name: str, version: str, dst: Path, tracking_uri: str | None) -> Path:
    import mlflow.artifacts
    from mlflow.exceptions import MlflowException

    dst.mkdir(parents=True, exist_ok=True)
    try:
        path = mlflow.artifacts.download_artifacts(
            artifact_uri=f"models:/{name}/{version}", dst_path=str(dst),
            tracking_uri=tracking_uri, registry_uri=tracking_uri,
        )
    except (MlflowException, OSError) as exc:
        raise _mlflow_boundary(exc, f"download models:/{name}/{version}") from exc
    return Path(path) if os.path.isdir(path) else dst
