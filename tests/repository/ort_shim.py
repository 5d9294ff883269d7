# A python-backend stand-in for an onnxruntime leaf on the local Triton, which has no onnxruntime
# backend: runs the version folder's model.onnx with onnxruntime, tensors named as in config.pbtxt.
import json
import os

import onnxruntime
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        path = os.path.join(args["model_repository"], args["model_version"], "model.onnx")
        self.session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        self.inputs = [tensor["name"] for tensor in config["input"]]
        self.outputs = [tensor["name"] for tensor in config["output"]]

    def execute(self, requests):
        responses = []
        for request in requests:
            feeds = {}
            for name in self.inputs:
                tensor = pb_utils.get_input_tensor_by_name(request, name)
                if tensor is not None:
                    feeds[name] = tensor.as_numpy()
            values = self.session.run(self.outputs, feeds)
            tensors = [pb_utils.Tensor(name, value) for name, value in zip(self.outputs, values)]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses
