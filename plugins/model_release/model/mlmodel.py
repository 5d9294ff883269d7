"""A downloaded MLflow model's ``MLmodel`` file, and the names its tensors get in Triton.

Below intake, export and the canary: each reads the ``MLmodel`` through :func:`read_mlmodel`
(parsed once per file version) and names tensors through :func:`triton_name`.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

_TRITON_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def triton_name(name: str, taken: set[str] | None = None) -> str:
    """A Triton-valid tensor name for ``name``: letters, digits and ``_``, not starting with a digit.

    ``sepal length (cm)`` becomes ``sepal_length_cm``; a name already in ``taken`` gets a suffix.
    """
    clean = name if _TRITON_NAME_RE.match(name) else re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_")
    if not clean or clean[0].isdigit():
        clean = f"t_{clean}"
    candidate, n = clean, 2
    while taken is not None and candidate in taken:
        candidate, n = f"{clean}_{n}", n + 1
    if taken is not None:
        taken.add(candidate)
    return candidate


def read_mlmodel(model_dir: str | Path) -> Any:
    """The ``MLmodel`` of a downloaded model, parsed once per file version (MLflow parses YAML slowly)."""
    mlmodel = Path(model_dir) / "MLmodel"
    stat = mlmodel.stat()
    return _read_mlmodel(str(mlmodel.parent), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=32)
def _read_mlmodel(model_dir: str, mtime_ns: int, size: int) -> Any:
    from mlflow.models import Model

    return Model.load(model_dir)


def input_example_info(mlmodel: bytes) -> dict[str, Any]:
    """The ``saved_input_example_info`` of an ``MLmodel`` file's bytes, read without MLflow ({} if none).

    Raises:
        ValueError: the file is not YAML.
    """
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(mlmodel, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        raise ValueError(str(exc)) from exc
    info = data.get("saved_input_example_info") if isinstance(data, dict) else None
    return info if isinstance(info, dict) else {}
