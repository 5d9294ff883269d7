"""model-release in Airflow: the public API for DAG files, and the only part of model-release that imports Airflow.

What a DAG file of your own uses (``from model_release.airflow import ...``):

- :func:`release_task_group` (:mod:`.task_group`): a whole release of a spec as one task group;
- the operators (:mod:`.operators`), one per stage: :class:`ReleaseStartOperator`, :class:`IntakeOperator`,
  :class:`ExportOperator`, :class:`TensorRTOperator`, :class:`AssembleOperator`, :class:`CanaryOperator`,
  :class:`PromoteOperator`, :class:`RolloutOperator`, :class:`ReleaseFinishOperator`, and
  :class:`RollbackOperator`;
- the hooks that own the connections (:mod:`.hooks`): :class:`MlflowHook`, :class:`ModelStoreHook`,
  :class:`TritonCanaryHook`;
- :func:`channel_asset` (:mod:`.dags`): the Asset a channel's promotions emit events on, to schedule on.

Importing this package costs nothing: each name is imported on first use (module ``__getattr__``), so a
DAG file pays only for what it takes, and never for MLflow, ONNX, torch or scikit-learn, which the task
bodies (:mod:`.tasks`) import when they run. ``dags/`` reaches the core only through this package
(:mod:`.dagfiles` holds what the shipped DAG files need beyond the public names).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> the submodule that defines it
_EXPORTS = {
    "release_task_group": ".task_group",
    **{name: ".operators" for name in (
        "ReleaseStartOperator", "IntakeOperator", "ExportOperator", "TensorRTOperator", "AssembleOperator",
        "CanaryOperator", "PromoteOperator", "RolloutOperator", "ReleaseFinishOperator", "RollbackOperator")},
    **{name: ".hooks" for name in ("MlflowHook", "ModelStoreHook", "TritonCanaryHook")},
    "channel_asset": ".dags",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from .dags import channel_asset
    from .hooks import MlflowHook, ModelStoreHook, TritonCanaryHook
    from .operators import (
        AssembleOperator,
        CanaryOperator,
        ExportOperator,
        IntakeOperator,
        PromoteOperator,
        ReleaseFinishOperator,
        ReleaseStartOperator,
        RollbackOperator,
        RolloutOperator,
        TensorRTOperator,
    )
    from .task_group import release_task_group


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}; its public names are {', '.join(__all__)}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
