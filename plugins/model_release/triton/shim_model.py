"""The canary's onnxruntime shim: a Triton python-backend model that runs a version folder's ONNX file.

Copied by :mod:`model_release.triton.shim` into every version folder of an ``onnxruntime`` leaf
when the canary runs on the local CPU Triton, which has only the python backend. It is loaded by
Triton's python stub inside the runtime venv (numpy<2, onnxruntime), never imported by the
pipeline. Inputs and outputs are the ones config.pbtxt declares, with the same names the
onnxruntime backend would use (Triton requires them to match the ONNX graph).
"""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils

_ORT_TO_NUMPY = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int8)": np.int8, "tensor(int16)": np.int16, "tensor(int32)": np.int32, "tensor(int64)": np.int64,
    "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16, "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_, "tensor(string)": np.object_,
}


class TritonPythonModel:
    def initialize(self, args):
        import onnxruntime as ort

        config = json.loads(args["model_config"])
        version_dir = os.path.join(args["model_repository"], args["model_version"])
        params = config.get("parameters", {})
        filename = params.get("shim_model_filename", {}).get("string_value") or "model.onnx"
        path = os.path.join(version_dir, filename)
        if not os.path.isfile(path):
            raise pb_utils.TritonModelException(f"onnxruntime shim: {path} does not exist")
        options = ort.SessionOptions()
        threads = params.get("shim_intra_op_threads", {}).get("string_value", "1")
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        onnx_inputs = {i.name: _ORT_TO_NUMPY.get(i.type) for i in self.session.get_inputs()}
        self.inputs = []
        for spec in config.get("input", []):
            if spec["name"] not in onnx_inputs:
                raise pb_utils.TritonModelException(
                    f"onnxruntime shim: config input {spec['name']!r} is not an input of {filename}; "
                    f"the ONNX inputs are {sorted(onnx_inputs)}"
                )
            self.inputs.append((spec["name"], onnx_inputs[spec["name"]]))
        onnx_outputs = {o.name for o in self.session.get_outputs()}
        self.outputs = []
        for spec in config.get("output", []):
            if spec["name"] not in onnx_outputs:
                raise pb_utils.TritonModelException(
                    f"onnxruntime shim: config output {spec['name']!r} is not an output of {filename}; "
                    f"the ONNX outputs are {sorted(onnx_outputs)}"
                )
            self.outputs.append((spec["name"], pb_utils.triton_string_to_numpy(spec["data_type"])))

    def execute(self, requests):
        responses = []
        names = [name for name, _ in self.outputs]
        for request in requests:
            try:
                feed = {}
                for name, dtype in self.inputs:
                    tensor = pb_utils.get_input_tensor_by_name(request, name)
                    if tensor is None:
                        continue  # an optional input the request left out
                    array = tensor.as_numpy()
                    feed[name] = array.astype(dtype, copy=False) if dtype is not None and dtype is not np.object_ else array
                results = self.session.run(names, feed)
                tensors = [
                    pb_utils.Tensor(name, np.ascontiguousarray(value).astype(dtype, copy=False))
                    for (name, dtype), value in zip(self.outputs, results)
                ]
                responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
            except Exception as exc:  # noqa: BLE001 - the error goes back to the client
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"onnxruntime shim: {exc}")))
        return responses

    def finalize(self):
        self.session = None
