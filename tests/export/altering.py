"""A converter that alters one output of the real skl2onnx conversion, to inject drift, NaN or label flips.

It wraps the real sklearn converter and rewrites one output with a few real ONNX nodes on the
rows whose first feature exceeds :data:`THRESHOLD`, so a test knows exactly which rows must be
reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from model_release.export.base import converter_for

THRESHOLD = 17.0  # breast_cancer "mean radius": a minority of rows lie above it


@dataclass
class AlteringConverter:
    """The real sklearn converter, then ``output`` rewritten on rows where input[:, 0] > THRESHOLD."""

    output: str
    how: str  # "drift" | "nan" | "flip"
    amount: float = 0.02
    flavor: str = "sklearn"

    def versions(self) -> dict[str, str]:
        return {**converter_for("sklearn").versions(), "altered": f"{self.output}-{self.how}-{self.amount}"}

    def convert(self, native: Any, intake: Any, opset: int, sample: Mapping[str, np.ndarray]) -> Any:
        from onnx import TensorProto, helper

        model = converter_for("sklearn").convert(native, intake, opset, sample)
        graph, raw = model.graph, f"{self.output}_raw"
        for node in graph.node:
            node.input[:] = [raw if n == self.output else n for n in node.input]
            node.output[:] = [raw if n == self.output else n for n in node.output]
        const = lambda name, dtype, vals, dims: helper.make_node(  # noqa: E731
            "Constant", [], [name], value=helper.make_tensor(name + "_v", dtype, dims, vals))
        nodes = [
            const("c_start", TensorProto.INT64, [0], [1]), const("c_end", TensorProto.INT64, [1], [1]),
            const("c_axis", TensorProto.INT64, [1], [1]), const("c_thr", TensorProto.FLOAT, [THRESHOLD], []),
            helper.make_node("Slice", ["input", "c_start", "c_end", "c_axis"], ["x0"]),
            helper.make_node("Greater", ["x0", "c_thr"], ["hit"]),  # [N, 1]
        ]
        if self.how == "drift":
            nodes += [const("c_amt", TensorProto.FLOAT, [self.amount], []), const("c_zero", TensorProto.FLOAT, [0.0], []),
                      helper.make_node("Where", ["hit", "c_amt", "c_zero"], ["delta"]),
                      helper.make_node("Add", [raw, "delta"], [self.output])]
        elif self.how == "nan":
            nodes += [const("c_nan", TensorProto.FLOAT, [float("nan")], []),
                      helper.make_node("Where", ["hit", "c_nan", raw], [self.output])]
        else:  # flip a binary label
            nodes += [const("c_one", TensorProto.INT64, [1], []), const("c_flat", TensorProto.INT64, [-1], [1]),
                      helper.make_node("Reshape", ["hit", "c_flat"], ["hit_flat"]),
                      helper.make_node("Sub", ["c_one", raw], ["flipped"]),
                      helper.make_node("Where", ["hit_flat", "flipped", raw], [self.output])]
        graph.node.extend(nodes)
        return model
