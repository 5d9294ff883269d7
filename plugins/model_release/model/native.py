"""The native model: the reference every converted model is compared with.

The one entry point is :func:`load_native`; intake (to read a classifier's classes), export (the
parity reference) and the canary (a champion with no release in the store) all use it.

``load_native(intake)`` returns a callable taking ``{input name: array}`` (Triton names, any dtype
that casts to the signature's) and returning ``{output name: array}`` keyed by the names the
exported ONNX model uses:

- sklearn, xgboost, lightgbm classifiers: ``label`` (predict) and ``probabilities``
  (predict_proba, or decision_function when there is none);
- their regressors: ``variable`` (predict, as ``[N, 1]`` or ``[N, k]``);
- pytorch: the signature's output names, else ``output`` (``output_0``... for several);
- onnx: the graph's outputs, renamed to Triton-valid names.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .dtypes import numpy_from_triton
from ..errors import ExportError
from .mlmodel import read_mlmodel, triton_name
from .roles import LABEL, PROBABILITIES, VARIABLE
from ..types import IntakeResult, TensorSpec


def cast_input(arr: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """Cast an input array to the signature's dtype (strings stay strings)."""
    if spec.datatype == "BYTES":
        return np.asarray(arr).astype(object)
    return np.asarray(arr).astype(numpy_from_triton(spec.datatype), copy=False)


def output_names(count: int, signature: list[TensorSpec], default: str = "output") -> list[str]:
    """Names for ``count`` outputs: the signature's when it has as many, else ``output``/``output_<i>``."""
    if len(signature) == count:
        return [s.name for s in signature]
    return [default] if count == 1 else [f"{default}_{i}" for i in range(count)]


class NativeModel:
    """A loaded model and how to call it; subclasses implement :meth:`predict`."""

    flavor = "native"
    #: class labels for classifiers (JSON-able), None otherwise
    classes: list[Any] | None = None

    def __init__(self, model: Any, intake: IntakeResult) -> None:
        self.model = model
        self.intake = intake

    def __call__(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        missing = [s.name for s in self.intake.inputs if s.name not in inputs]
        if missing:
            raise ExportError(f"native {self.flavor} model: inputs {missing} missing; it takes {[s.name for s in self.intake.inputs]}")
        return self.predict({s.name: cast_input(inputs[s.name], s) for s in self.intake.inputs})

    def predict(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:  # pragma: no cover - abstract
        raise NotImplementedError


class EstimatorNative(NativeModel):
    """scikit-learn API estimators (sklearn, xgboost and lightgbm sklearn wrappers)."""

    def __init__(self, model: Any, intake: IntakeResult, flavor: str, columnar: bool) -> None:
        super().__init__(model, intake)
        self.flavor = flavor
        self.columnar = columnar
        classes = getattr(model, "classes_", None)
        self.is_classifier = classes is not None and hasattr(model, "predict")
        self.classes = [c.item() if hasattr(c, "item") else c for c in np.asarray(classes).tolist()] if self.is_classifier else None
        if not hasattr(model, "predict"):
            raise ExportError(
                f"the {flavor} model {type(model).__name__} has no predict(); only predictors (classifiers, regressors) can be released"
            )

    def features(self, inputs: dict[str, np.ndarray]) -> Any:
        if self.columnar:
            import pandas as pd

            return pd.DataFrame({s.original_name: inputs[s.name].reshape(-1) for s in self.intake.inputs})
        if len(self.intake.inputs) != 1:
            raise ExportError(
                f"the {self.flavor} model takes {len(self.intake.inputs)} tensor inputs; an estimator takes one matrix "
                "or named columns (log it with a pandas DataFrame input example)"
            )
        return inputs[self.intake.inputs[0].name]

    def predict(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = self.features(inputs)
        if self.is_classifier:
            label = np.asarray(self.model.predict(x))
            if hasattr(self.model, "predict_proba"):
                scores = self.model.predict_proba(x)
            else:
                scores = self.model.decision_function(x)
            return {LABEL: label.reshape(-1), PROBABILITIES: np.asarray(scores)}
        y = np.asarray(self.model.predict(x))
        return {VARIABLE: y.reshape(y.shape[0], -1)}


class TorchNative(NativeModel):
    flavor = "pytorch"

    def predict(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import torch

        with torch.no_grad():
            result = self.model(*(torch.from_numpy(np.ascontiguousarray(inputs[s.name])) for s in self.intake.inputs))
        outs = list(result) if isinstance(result, list | tuple) else [result]
        names = output_names(len(outs), self.intake.outputs)
        return {n: o.detach().cpu().numpy() for n, o in zip(names, outs)}


class OnnxNative(NativeModel):
    """A logged ONNX model run by onnxruntime: the reference for its own simplification."""

    flavor = "onnx"

    def __init__(self, path: Path, intake: IntakeResult) -> None:
        import onnxruntime as ort

        super().__init__(str(path), intake)
        self.session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        taken: set[str] = set()
        self.output_map = {o.name: triton_name(o.name, taken) for o in self.session.get_outputs()}
        graph_inputs = [i.name for i in self.session.get_inputs()]
        if sorted(graph_inputs) == sorted(s.original_name for s in intake.inputs):
            self.input_map = {s.name: s.original_name for s in intake.inputs}
        elif len(graph_inputs) == len(intake.inputs):  # an unnamed signature: match by position
            self.input_map = {s.name: g for s, g in zip(intake.inputs, graph_inputs)}
        else:
            raise ExportError(
                f"the ONNX model's inputs {graph_inputs} do not match its MLflow signature's "
                f"{[s.original_name for s in intake.inputs]}; log it with a signature naming the graph's inputs"
            )

    def predict(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        feeds = {self.input_map[s.name]: inputs[s.name] for s in self.intake.inputs}
        names = list(self.output_map)
        return {self.output_map[n]: v for n, v in zip(names, self.session.run(names, feeds))}


def _missing_module(exc: BaseException) -> str | None:
    """The module a failed unpickling needed and could not import (searched along the exception's chain), or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ModuleNotFoundError) and current.name:
            return current.name
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def load_native(intake: IntakeResult) -> NativeModel:
    """Load ``intake.model_dir`` with its flavor's MLflow loader and wrap it as a :class:`NativeModel`.

    Raises:
        ExportError: the model cannot be loaded or is not a predictor.
    """
    with warnings.catch_warnings():
        # skops (the sklearn flavor's format) finds a scipy ufunc's module by getattr on every loaded
        # module; in an Airflow task that includes Airflow's deprecated-attribute shims, each of which
        # warns: some 1,200 warnings per load, seconds of a task's time and its log
        warnings.filterwarnings("ignore", message=r"The `airflow\.")
        return _load_native(intake)


def _load_native(intake: IntakeResult) -> NativeModel:
    model_dir = intake.model_dir
    mlmodel = read_mlmodel(model_dir)
    columnar = mlmodel.signature is not None and not mlmodel.signature.inputs.is_tensor_spec()
    try:
        if intake.flavor == "sklearn":
            import mlflow.sklearn

            from .skops_import import import_skops

            import_skops()  # the flavor's format; without importing torch on the way
            return EstimatorNative(mlflow.sklearn.load_model(model_dir), intake, "sklearn", columnar)
        if intake.flavor == "xgboost":
            import mlflow.xgboost

            return EstimatorNative(mlflow.xgboost.load_model(model_dir), intake, "xgboost", columnar)
        if intake.flavor == "lightgbm":
            import mlflow.lightgbm

            return EstimatorNative(mlflow.lightgbm.load_model(model_dir), intake, "lightgbm", columnar)
        if intake.flavor == "pytorch":
            import mlflow.pytorch

            model = mlflow.pytorch.load_model(model_dir, map_location="cpu")
            try:
                model.eval()
            except (AttributeError, NotImplementedError):  # a torch.export (pt2) module is already in eval form
                pass
            return TorchNative(model, intake)
        if intake.flavor == "onnx":
            data = mlmodel.flavors["onnx"].get("data", "model.onnx")
            return OnnxNative(Path(model_dir) / data, intake)
    except ExportError:
        raise
    except Exception as exc:  # noqa: BLE001 - a loader can fail in many ways; name it at the boundary
        missing = _missing_module(exc)
        if missing is not None:
            raise ExportError(
                f'the {intake.flavor} model "{intake.model_name}" version {intake.version} was saved (pickled) with code from '
                f"module {missing!r}, which is not installed where the pipeline runs; install the package that provides "
                f"{missing!r} in the pipeline's environment, or log the model again with code_paths=[...] naming that module's "
                "files (MLflow ships them with the model and puts them on the path when it loads)"
            ) from exc
        raise ExportError(
            f'the {intake.flavor} model "{intake.model_name}" version {intake.version} could not be loaded natively '
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); check that the installed "
            f"{intake.flavor} version can read it (see its requirements.txt)"
        ) from exc
    raise ExportError(f"flavor {intake.flavor!r} has no native loader; supported: sklearn, pytorch, onnx, xgboost, lightgbm")
