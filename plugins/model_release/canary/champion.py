"""The production champion the canary judges a candidate against.

:func:`native_champion` resolves the channel's MLflow alias (``promote.mlflow_alias``) to a model
version and runs its native model on this release's golden inputs, for when no served champion is
available.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ..errors import ModelReleaseError
from ..spec import ReleaseSpec
from ..types import ExportResult, IntakeResult
from ..workspace import Workspace

log = logging.getLogger(__name__)


def native_champion(
    spec: ReleaseSpec, ws: Workspace, tracking_uri: str | None, intake: IntakeResult, export: ExportResult
) -> tuple[dict[str, Any] | None, str | None]:
    """The production model's native outputs on this release's golden inputs, if there is one.

    Returns ``(outputs, name)`` or ``(None, None)`` when the channel's MLflow alias is unset or
    already names the candidate version.
    """
    alias = spec.promote.mlflow_alias
    if not alias:
        return None, None
    from ..intake import resolve
    from ..native import load_native

    try:
        prod_spec = spec.model_copy(update={"model": spec.model.model_copy(update={"alias": alias, "version": None})})
        prod = resolve(prod_spec, Workspace("production", root=ws.path / "canary-baseline"), tracking_uri=tracking_uri)
    except ModelReleaseError as exc:
        log.info("canary: no production baseline (%s)", exc)
        return None, None
    if prod.version == intake.version:
        return None, None
    with np.load(export.golden_path, allow_pickle=False) as golden:
        inputs = {k: golden[k] for k in golden.files}
    outputs = load_native(prod)(inputs)
    return {k: np.asarray(v) for k, v in outputs.items()}, f"production (version {prod.version})"
