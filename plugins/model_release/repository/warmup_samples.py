"""``model_warmup`` for the ONNX and TensorRT leaves, from the release's golden rows.

Triton runs each warm-up sample on every instance before a version is READY (a failing sample
fails the load), so the first real request after a roll-out does not pay for lazy initialisation
(ONNX Runtime and TensorRT are the slow ones, #3473). For each leaf and each batch size the release
serves (1 and ``max_batch_size``), one sample per input: the first golden row, written raw
(row-major) to ``<model>/warmup/<input>-<sha12>`` (Triton replicates one sample to the batch size;
the file sits beside the version folders, so its name carries its digest and releases never
overwrite one another's). Without a golden row for an input, zeros (``zero_data``). A leaf that
does not batch (``max_batch_size: 0``) gets one sample with ``batch_size: 0``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

WARMUP_FOLDER = "warmup"
_LEAF_KINDS = ("onnxruntime", "onnxruntime_onnx", "tensorrt_plan", "tensorrt")


def is_warmable_leaf(config: Any) -> bool:
    """True for the leaves whose first request is slow without warm-up (ONNX Runtime, TensorRT)."""
    return (config.backend or config.platform) in _LEAF_KINDS


def _golden(path: str | None) -> dict[str, np.ndarray]:
    """The first golden row of every array (read alone: the golden set of images or token ids stays on disk)."""
    from ..model.golden import iter_npz

    if not path or not Path(path).is_file():
        return {}
    return next(iter(iter_npz(path, 1, limit=1)), {})


def _fits(dims: Any, row: np.ndarray) -> bool:
    """Whether a golden row fits an input's dims (-1 takes any size)."""
    return len(dims) == row.ndim - 1 and all(d in (-1, g) for d, g in zip(dims, row.shape[1:]))


def add_warmup(config: Any, model_dir: Path, golden_path: str | None) -> None:
    """Give ``config`` (a leaf's ModelConfig) warm-up samples and write their data files under ``model_dir``."""
    from ..model.dtypes import numpy_from_triton
    from .config import wire_name

    golden = _golden(golden_path)
    sizes = sorted({1, config.max_batch_size}) if config.max_batch_size > 0 else [0]
    files: dict[str, str] = {}
    shapes: dict[str, list[int]] = {}  # a golden row's own dims, for an input with variable ones
    for t in config.input:
        row = golden.get(t.name)
        datatype = wire_name(t.data_type)
        if row is None or datatype == "BYTES" or not _fits(t.dims, row):
            continue  # zeros below
        data = np.ascontiguousarray(row[0].astype(numpy_from_triton(datatype))).tobytes()
        name = f"{t.name}-{hashlib.sha256(data).hexdigest()[:12]}"
        (model_dir / WARMUP_FOLDER).mkdir(parents=True, exist_ok=True)
        (model_dir / WARMUP_FOLDER / name).write_bytes(data)
        files[t.name] = name
        shapes[t.name] = list(row.shape[1:])
    for size in sizes:
        sample = config.model_warmup.add(name=f"golden_batch_{size}", batch_size=size, count=1)
        for t in config.input:
            spec = sample.inputs[t.name]
            spec.data_type = t.data_type
            spec.dims.extend(shapes.get(t.name) or [d if d > 0 else 1 for d in t.dims])
            if t.name in files:
                spec.input_data_file = files[t.name]
            else:
                spec.zero_data = True
