"""What a converter is, and the graph helpers every converter shares.

A converter turns one MLflow flavor's native model into an ONNX ``ModelProto`` whose graph inputs
carry the intake's Triton input names and whose outputs carry the native model's output names
(see :mod:`model_release.model.native`), with a dynamic first (batch) dimension and every other
axis the intake's input dims give as -1 dynamic. It may return a :class:`Conversion` instead, the
model with notes on how it was made (the exporter used; why the asked opset was not reached),
which the export stage records. Converters are
looked up by flavor in :data:`CONVERTERS`; tests and callers may pass their own mapping (for
example a wrapper that alters the graph) through ``export(..., converters=...)``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import import_module
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ExportError

if TYPE_CHECKING:
    import numpy as np
    import onnx

    from ..types import IntakeResult
    from ..model.native import NativeModel


@dataclass
class Conversion:
    """A converted model and notes on how it was made (``exporter``; ``opset``: why the asked opset was not reached)."""

    model: Any
    notes: dict[str, str] = field(default_factory=dict)


def unpack(converted: Any) -> tuple[Any, dict[str, str]]:
    """(the ModelProto, the notes) of what a converter returned: a ModelProto or a :class:`Conversion`."""
    if isinstance(converted, Conversion):
        return converted.model, dict(converted.notes)
    return converted, {}


class Converter(Protocol):
    """Converts one flavor's native model to ONNX."""

    #: the MLflow flavor it converts
    flavor: str

    def versions(self) -> dict[str, str]:
        """The versions of the libraries whose change can change the ONNX file (part of the cache key)."""
        ...

    def convert(self, native: NativeModel, intake: IntakeResult, opset: int,
                sample: Mapping[str, np.ndarray]) -> onnx.ModelProto | Conversion:
        """Return the ONNX model, its inputs and outputs named as described in the module docstring.

        Args:
            native: the loaded model.
            intake: its intake result (tensor specs with every declared variable axis at -1, name map).
            opset: the ONNX opset the spec asks for (a converter that cannot reach it returns the one it
                reaches, saying why in a :class:`Conversion`'s ``opset`` note; the stage decides).
            sample: one golden batch, keyed by input name, for converters that trace the model.
        """
        ...


#: flavor -> "module:attribute" of its converter, imported only when that flavor is exported
CONVERTERS: dict[str, str] = {
    "sklearn": "model_release.export.sklearn2onnx:CONVERTER",
    "pytorch": "model_release.export.torch2onnx:CONVERTER",
    "onnx": "model_release.export.onnx2onnx:CONVERTER",
    "xgboost": "model_release.export.xgboost2onnx:CONVERTER",
    "lightgbm": "model_release.export.lightgbm2onnx:CONVERTER",
}


def converter_for(flavor: str, overrides: Mapping[str, Converter] | None = None) -> Converter:
    """The converter for ``flavor`` (``overrides`` first).

    Raises:
        ExportError: no converter for the flavor, or its optional extra is not installed.
    """
    if overrides and flavor in overrides:
        return overrides[flavor]
    target = CONVERTERS.get(flavor)
    if target is None:
        raise ExportError(f"flavor {flavor!r} has no ONNX converter; supported: {', '.join(CONVERTERS)}")
    module, attr = target.split(":")
    try:
        return getattr(import_module(module), attr)
    except ImportError as exc:
        extra = {"pytorch": "torch", "xgboost": "boost", "lightgbm": "boost"}.get(flavor, "")
        raise ExportError(
            f"the {flavor} converter needs {exc.name!r}, which is not installed; "
            f"install the optional extra: pip install 'model-release[{extra}]'" if extra else f"the {flavor} converter could not be imported: {exc}"
        ) from exc


@functools.lru_cache(maxsize=None)
def package_version(name: str) -> str:
    """The installed distribution's version, or ``absent`` (looked up once per process)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "absent"


def rename_io(model: onnx.ModelProto, mapping: Mapping[str, str]) -> onnx.ModelProto:
    """Rename graph inputs/outputs (and every reference to them, in subgraphs too) in place."""
    mapping = {k: v for k, v in mapping.items() if k != v}
    if mapping:
        _rename_graph(model.graph, mapping)
    return model


def _rename_graph(graph: Any, mapping: Mapping[str, str]) -> None:
    for vi in (*graph.input, *graph.output, *graph.value_info):
        if vi.name in mapping:
            vi.name = mapping[vi.name]
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in mapping:
                node.input[i] = mapping[name]
        for i, name in enumerate(node.output):
            if name in mapping:
                node.output[i] = mapping[name]
        for attr in node.attribute:
            if attr.HasField("g"):
                _rename_graph(attr.g, mapping)
            for sub in attr.graphs:
                _rename_graph(sub, mapping)


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message, with its type."""
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
