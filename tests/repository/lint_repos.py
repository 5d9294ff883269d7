"""A valid repository in the style of Triton's own examples, written by hand (not generated).

- ``add_sub``: a python model adding and subtracting two vectors;
- ``bls_sync``: a python BLS model calling ``add_sub`` with blocking ``exec()``;
- ``bls_async``: a python BLS model calling ``add_sub`` twice at once with ``async_exec()``;
- ``pipeline``: an ensemble ``preprocess`` (python) -> ``classifier_onnx`` (onnxruntime) ->
  ``postprocess`` (python).
"""

from __future__ import annotations

from pathlib import Path

CONFIGS = {
    "add_sub": """
name: "add_sub"
backend: "python"
max_batch_size: 8
input [
  { name: "INPUT0", data_type: TYPE_FP32, dims: [ 4 ] },
  { name: "INPUT1", data_type: TYPE_FP32, dims: [ 4 ] }
]
output [
  { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 4 ] },
  { name: "OUTPUT1", data_type: TYPE_FP32, dims: [ 4 ] }
]
instance_group [ { count: 1, kind: KIND_CPU } ]
""",
    "bls_sync": """
name: "bls_sync"
backend: "python"
max_batch_size: 8
input [
  { name: "INPUT0", data_type: TYPE_FP32, dims: [ 4 ] },
  { name: "INPUT1", data_type: TYPE_FP32, dims: [ 4 ] }
]
output [
  { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 4 ] },
  { name: "OUTPUT1", data_type: TYPE_FP32, dims: [ 4 ] }
]
instance_group [ { count: 2, kind: KIND_CPU } ]
""",
    "bls_async": """
name: "bls_async"
backend: "python"
max_batch_size: 8
input [
  { name: "INPUT0", data_type: TYPE_FP32, dims: [ 4 ] },
  { name: "INPUT1", data_type: TYPE_FP32, dims: [ 4 ] }
]
output [
  { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 4 ] },
  { name: "OUTPUT1", data_type: TYPE_FP32, dims: [ 4 ] }
]
instance_group [ { kind: KIND_CPU } ]
""",
    "preprocess": """
name: "preprocess"
backend: "python"
max_batch_size: 8
input [ { name: "RAW", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [ { name: "FEATURES", data_type: TYPE_FP32, dims: [ 4 ] } ]
""",
    "classifier_onnx": """
name: "classifier_onnx"
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "float_input", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [
  { name: "label", data_type: TYPE_INT64, dims: [ 1 ], reshape: { shape: [ ] } },
  { name: "probabilities", data_type: TYPE_FP32, dims: [ 3 ] }
]
dynamic_batching { max_queue_delay_microseconds: 100 }
instance_group [ { count: 1, kind: KIND_AUTO } ]
model_warmup [ { name: "zeros", batch_size: 1, inputs { key: "float_input" value: { data_type: TYPE_FP32, dims: [ 4 ], zero_data: true } } } ]
""",
    "postprocess": """
name: "postprocess"
backend: "python"
max_batch_size: 8
input [ { name: "probabilities", data_type: TYPE_FP32, dims: [ 3 ] } ]
output [ { name: "label", data_type: TYPE_STRING, dims: [ 1 ] } ]
""",
    "pipeline": """
name: "pipeline"
platform: "ensemble"
max_batch_size: 8
input [ { name: "RAW", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [
  { name: "probabilities", data_type: TYPE_FP32, dims: [ 3 ] },
  { name: "label", data_type: TYPE_STRING, dims: [ 1 ] }
]
ensemble_scheduling {
  step [
    {
      model_name: "preprocess"
      model_version: -1
      input_map { key: "RAW", value: "RAW" }
      output_map { key: "FEATURES", value: "features" }
    },
    {
      model_name: "classifier_onnx"
      model_version: -1
      input_map { key: "float_input", value: "features" }
      output_map { key: "probabilities", value: "probabilities" }
    },
    {
      model_name: "postprocess"
      model_version: -1
      input_map { key: "probabilities", value: "probabilities" }
      output_map { key: "label", value: "label" }
    }
  ]
}
""",
}

ADD_SUB = '''
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.config = json.loads(args["model_config"])

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            out0 = pb_utils.Tensor("OUTPUT0", (a + b).astype(np.float32))
            out1 = pb_utils.Tensor("OUTPUT1", (a - b).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out0, out1]))
        return responses

    def finalize(self):
        print("add_sub: cleaning up")
'''

BLS_SYNC = '''
import triton_python_backend_utils as pb_utils

TARGET = "add_sub"


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            inputs = [pb_utils.get_input_tensor_by_name(request, name) for name in ("INPUT0", "INPUT1")]
            infer_request = pb_utils.InferenceRequest(
                model_name=TARGET, requested_output_names=["OUTPUT0", "OUTPUT1"], inputs=inputs
            )
            infer_response = infer_request.exec()
            if infer_response.has_error():
                raise pb_utils.TritonModelException(infer_response.error().message())
            responses.append(pb_utils.InferenceResponse(output_tensors=infer_response.output_tensors()))
        return responses
'''

BLS_ASYNC = '''
import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            inputs = [pb_utils.get_input_tensor_by_name(request, name) for name in ("INPUT0", "INPUT1")]
            calls = [
                pb_utils.InferenceRequest(model_name="add_sub", requested_output_names=[name], inputs=inputs).async_exec()
                for name in ("OUTPUT0", "OUTPUT1")
            ]
            first, second = await asyncio.gather(*calls)
            for reply in (first, second):
                if reply.has_error():
                    raise pb_utils.TritonModelException(reply.error().message())
            out0 = pb_utils.get_output_tensor_by_name(first, "OUTPUT0")
            out1 = pb_utils.get_output_tensor_by_name(second, "OUTPUT1")
            responses.append(pb_utils.InferenceResponse(output_tensors=[out0, out1]))
        return responses
'''

PREPROCESS = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            raw = pb_utils.get_input_tensor_by_name(request, "RAW").as_numpy()
            scaled = (raw - raw.mean(axis=1, keepdims=True)).astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("FEATURES", scaled)]))
        return responses
'''

POSTPROCESS = '''
import numpy as np
import triton_python_backend_utils as pb_utils

NAMES = np.array([b"setosa", b"versicolor", b"virginica"], dtype=np.object_)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            probabilities = pb_utils.get_input_tensor_by_name(request, "probabilities").as_numpy()
            label = NAMES[probabilities.argmax(axis=1)].reshape(-1, 1)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("label", label)]))
        return responses
'''

SOURCES = {
    "add_sub": ADD_SUB,
    "bls_sync": BLS_SYNC,
    "bls_async": BLS_ASYNC,
    "preprocess": PREPROCESS,
    "postprocess": POSTPROCESS,
}


def write_valid_repository(root: Path, onnx_model: Path | None = None) -> Path:
    """Write the example repository under ``root`` and return it.

    ``classifier_onnx`` gets ``onnx_model`` (an iris classifier) when given, else placeholder bytes
    (the linter never reads the graph).
    """
    for name, text in CONFIGS.items():
        version = root / name / "1"
        version.mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(text.lstrip())
        if name in SOURCES:
            (version / "model.py").write_text(SOURCES[name].lstrip())
        elif name == "classifier_onnx":
            (version / "model.onnx").write_bytes(onnx_model.read_bytes() if onnx_model else b"\x08\x07")
    return root
