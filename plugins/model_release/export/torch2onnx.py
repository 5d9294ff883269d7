"""PyTorch → ONNX with torch.onnx, at the spec's opset, with every declared variable axis dynamic.

The model is traced on a golden batch (at least two rows, so the batch size is not specialised).
Dimension 0 of every input and output is the symbolic ``batch``; every other axis the intake
declares variable (-1 in its dims: the MLflow signature or ``export.dynamic_axes``, see
:mod:`.lengths`) is exported ``Dim.DYNAMIC``, so torch.export refuses a model that fixes it instead
of tracing it fixed, and the refusal names the axis.

The opset: torch.onnx's torch.export ("dynamo") exporter implements opset 18 and above. At 18 or
above it exports at the asked opset directly. Below 18 it exports at 18 and converts down with
``onnx.version_converter`` here (quietly: torch's own conversion logs a traceback when it fails),
checking the result with ``onnx.checker`` (the converter can leave an attribute the lower opset
lacks); where that fails (``ReduceMean`` and other ops whose axes became inputs in 18), the
TorchScript exporter, which implements the lower opsets, exports at the asked opset directly; its
file is checked at other lengths like any other (it traces shapes, and a traced length that became
a constant is refused there). Where both fail, the opset-18 file is returned with the reason, and
the export stage refuses it or, with ``export.allow_other_opset``, ships it and says so.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import os
import re
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import ExportError
from ..model.native import NativeModel, cast_input, output_names
from ..types import IntakeResult
from .base import Conversion, first_line, package_version
from .checks import opset_of
from .lengths import axis_name

#: the lowest opset torch.onnx's torch.export exporter implements
DYNAMO_MIN_OPSET = 18
#: the loggers torch.onnx and onnxscript write progress, warnings and tracebacks to
_LOGGERS = ("torch.onnx", "torch.export", "torch._dynamo", "torch.fx", "torch._export", "onnxscript", "onnx_ir")


class TorchConverter:
    flavor = "pytorch"

    def versions(self) -> dict[str, str]:
        return {"torch": package_version("torch"), "onnxscript": package_version("onnxscript"), "onnx": package_version("onnx")}

    def convert(self, native: NativeModel, intake: IntakeResult, opset: int, sample: Mapping[str, np.ndarray]) -> Conversion:
        import torch

        tensors = [torch.from_numpy(np.ascontiguousarray(_traceable(cast_input(sample[s.name], s), s.dims))) for s in intake.inputs]
        outs = native.predict({s.name: t.numpy() for s, t in zip(intake.inputs, tensors)})
        names = output_names(len(outs), intake.outputs)
        axes = {s.name: [i + 1 for i, d in enumerate(s.dims) if d == -1] for s in intake.inputs}
        model = _dynamo(native.model, intake, tensors, names, axes, max(opset, DYNAMO_MIN_OPSET))
        if opset >= DYNAMO_MIN_OPSET:
            return Conversion(model, {"exporter": "torch.export"})
        lowered, why = _convert_version(model, opset)
        if lowered is not None:
            return Conversion(lowered, {"exporter": f"torch.export at opset {DYNAMO_MIN_OPSET}, converted to {opset} by onnx.version_converter"})
        legacy, why_not = _torchscript(native.model, intake, tensors, names, axes, opset)
        if legacy is not None:
            return Conversion(legacy, {"exporter": f"TorchScript exporter at opset {opset} (torch.export starts at opset "
                                                   f"{DYNAMO_MIN_OPSET} and the conversion down failed: {why})"})
        return Conversion(model, {"opset": f"torch.onnx's torch.export exporter starts at opset {DYNAMO_MIN_OPSET}; converting "
                                           f"down to {opset} failed ({why}) and the TorchScript exporter failed too ({why_not})"})


def _traceable(arr: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    """The sample with at least two entries on the batch axis and on every variable axis (1 would be specialised)."""
    if arr.shape[0] < 2:
        arr = np.concatenate([arr, arr])
    for i, d in enumerate(dims):
        if d == -1 and arr.shape[i + 1] < 2:
            arr = np.concatenate([arr, arr], axis=i + 1)
    return arr


def _dynamo(model: Any, intake: IntakeResult, tensors: list[Any], names: list[str], axes: Mapping[str, list[int]],
            opset: int) -> Any:
    """The torch.export exporter at ``opset`` (18 or above), every declared axis ``Dim.DYNAMIC``."""
    import torch

    batch = torch.export.Dim("batch", min=1)
    shapes = tuple({0: batch, **{a: torch.export.Dim.DYNAMIC for a in axes[s.name]}} for s in intake.inputs)
    try:
        with quiet():
            program = torch.onnx.export(model, tuple(tensors), input_names=[s.name for s in intake.inputs], output_names=names,
                                        dynamic_shapes=shapes, opset_version=opset, dynamo=True, verbose=False, optimize=True)
    except Exception as exc:  # noqa: BLE001 - torch.export raises many kinds
        fixed = _fixed_axes(exc, model, intake)
        if fixed:
            raise ExportError(
                f"the pytorch model {type(model).__name__} fixes {', '.join(fixed)}, which the model declares variable (the "
                "MLflow signature's -1, or export.dynamic_axes): torch.export traced it as a constant, so the ONNX file would "
                "refuse every other length and is not made. Make forward() work for any length along it (no reshape to a "
                "fixed size), or log the signature with that axis fixed"
            ) from None
        raise ExportError(
            f"torch.onnx {package_version('torch')} could not export the pytorch model {type(model).__name__} "
            f"({first_line(exc)}). Make forward() traceable by torch.export (no data-dependent Python control flow), "
            "or log an ONNX model instead"
        ) from None
    return program.model_proto


#: torch.export's words for a dynamic axis it found fixed: "... static shape of 64 for dimension inputs['ids'].shape[1]"
_FIXED = re.compile(r"static shape of (\d+) for dimension inputs\['(\w+)'\]\.shape\[(\d+)\]")


def _fixed_axes(exc: BaseException, model: Any, intake: IntakeResult) -> list[str]:
    """The declared axes torch.export says it found fixed, as ``input[axis] (fixed at N)``."""
    try:
        params = [p for p in inspect.signature(model.forward).parameters]
    except (TypeError, ValueError):
        params = []
    by_param = {p: s.name for p, s in zip(params, intake.inputs)}
    found = []
    for size, param, axis in _FIXED.findall(str(exc)):
        name = by_param.get(param, param)
        found.append(f"{axis_name(name, int(axis))} (fixed at {size})")
    return sorted(set(found))


def _convert_version(model: Any, opset: int) -> tuple[Any | None, str]:
    """``model`` converted to ``opset`` by onnx's version converter, or None and why not."""
    import onnx

    try:
        lowered = onnx.version_converter.convert_version(model, opset)
        onnx.checker.check_model(lowered, full_check=True)  # it can leave an attribute the lower opset lacks
    except Exception as exc:  # noqa: BLE001 - the converter raises RuntimeError with a C++ assertion
        return None, first_line(exc)
    if opset_of(lowered) != opset:
        return None, f"it produced opset {opset_of(lowered)}"
    return lowered, ""


def _torchscript(model: Any, intake: IntakeResult, tensors: list[Any], names: list[str], axes: Mapping[str, list[int]],
                 opset: int) -> tuple[Any | None, str]:
    """The TorchScript exporter at ``opset``, or None and why not."""
    import onnx
    import torch

    dynamic = {s.name: {0: "batch", **{a: f"{s.name}_{a}" for a in axes[s.name]}} for s in intake.inputs}
    dynamic.update({n: {0: "batch"} for n in names})
    buffer = io.BytesIO()
    try:
        with quiet():
            torch.onnx.export(model, tuple(tensors), buffer, input_names=[s.name for s in intake.inputs], output_names=names,
                              dynamic_axes=dynamic, opset_version=opset, dynamo=False)
        exported = onnx.load_from_string(buffer.getvalue())
    except Exception as exc:  # noqa: BLE001 - the TorchScript exporter raises many kinds
        return None, first_line(exc)
    return exported, ""


@contextlib.contextmanager
def quiet() -> Any:
    """torch.onnx prints progress, warnings and (for a failed conversion) tracebacks; keep them out of the pipeline's output.

    The TorchScript exporter prints its graph from C++ to file descriptor 1 when it fails, which would
    land in the JSON a piped release writes to stdout: descriptor 1 goes to /dev/null meanwhile too.
    """
    loggers = [logging.getLogger(n) for n in _LOGGERS]
    levels = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.CRITICAL)
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                _stdout_descriptor_closed():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


@contextlib.contextmanager
def _stdout_descriptor_closed() -> Any:
    """File descriptor 1 points at /dev/null inside (what C++ code prints there is dropped), and back after."""
    try:
        saved = os.dup(1)
    except OSError:  # no descriptor 1 (a daemon): nothing to guard
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


CONVERTER = TorchConverter()
