"""A stand-in for ``triton_python_backend_utils``: unit tests of generated BLS logic without a server.

Tensors made from torch tensors report ``is_cpu() == False``, so the generated code takes its GPU
path (DLPack and torch) even on a CPU-only machine. :func:`on_device` makes such a tensor on the
GPU where one is visible, so that there a step that mixes host and device tensors fails as it would
in Triton; on a CPU-only machine torch's CPU tensors stand in. BLS calls go to the python functions
in :data:`MODELS` and are recorded in :data:`CALLS`.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

#: model name -> function(inputs: {name: array}) -> {output name: array}
MODELS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}
#: (model name, {input name: array}) for every BLS call
CALLS: list[tuple[str, dict[str, Any]]] = []


def device() -> str:
    """Where :func:`on_device` puts tensors: ``cuda`` where torch sees a GPU, else ``cpu``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def on_device(array: Any) -> Any:
    """``array`` as a torch tensor on :func:`device`: what the python backend hands over for GPU memory."""
    import torch

    return torch.as_tensor(array, device=device())


def host(array: Any) -> np.ndarray:
    """``array`` (numpy, or torch on any device) as numpy, for comparing with expected values."""
    return array if isinstance(array, np.ndarray) else array.cpu().numpy()


class TritonModelException(Exception):
    pass


class TritonError:
    def __init__(self, message: str) -> None:
        self._message = message

    def message(self) -> str:
        return self._message


class Tensor:
    def __init__(self, name: str, data: Any) -> None:
        self._name, self.data = name, data

    def name(self) -> str:
        return self._name

    def is_cpu(self) -> bool:
        return isinstance(self.data, np.ndarray)

    def as_numpy(self) -> np.ndarray:
        if not self.is_cpu():
            raise TritonModelException("as_numpy() on a tensor that is not in CPU memory")
        return self.data

    def to_dlpack(self) -> Any:
        return self.data.__dlpack__()

    @classmethod
    def from_dlpack(cls, name: str, capsule: Any) -> "Tensor":
        from torch.utils import dlpack

        return cls(name, dlpack.from_dlpack(capsule))


class InferenceResponse:
    def __init__(self, output_tensors: list[Tensor] | None = None, error: TritonError | None = None) -> None:
        self._outputs, self._error = output_tensors or [], error

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error

    def output_tensors(self) -> list[Tensor]:
        return self._outputs


class Request:
    """An incoming request to the model under test."""

    def __init__(self, **inputs: Any) -> None:
        self.inputs = {name: Tensor(name, value) for name, value in inputs.items()}


class InferenceRequest:
    def __init__(self, model_name: str, requested_output_names: list[str], inputs: list[Tensor], model_version: int = -1) -> None:
        self.model_name, self.outputs, self.inputs = model_name, requested_output_names, inputs
        self.model_version = model_version  # the real one's default: the highest READY version

    def exec(self) -> InferenceResponse:
        feeds = {t.name(): t.data for t in self.inputs}
        CALLS.append((self.model_name, feeds))
        if self.model_name not in MODELS:
            return InferenceResponse(error=TritonError(f"model {self.model_name!r} is not loaded"))
        values = MODELS[self.model_name](feeds)
        return InferenceResponse([Tensor(name, values[name]) for name in self.outputs])

    async def async_exec(self) -> InferenceResponse:
        return self.exec()


def get_input_tensor_by_name(request: Request, name: str) -> Tensor | None:
    return request.inputs.get(name)


def get_output_tensor_by_name(response: InferenceResponse, name: str) -> Tensor | None:
    return next((t for t in response.output_tensors() if t.name() == name), None)
