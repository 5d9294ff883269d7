"""Test repositories for the canary, built here so the canary tests do not depend on the assembler.

``build_iris_release`` trains a scikit-learn LogisticRegression on iris, exports it with skl2onnx
(``zipmap=False``), and writes a classifier-shaped Triton repository: an onnxruntime leaf, a
python-backend postprocess that turns probabilities into label names (TYPE_STRING, best first),
and an ensemble named after the release. Variants of the postprocess (a label flipper, one that
fails to load) share the same leaf so one server can hold all of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from model_release.spec import ReleaseSpec, parse_spec
from model_release.types import AssembleResult, ExportResult, IntakeResult, TensorSpec
from model_release.workspace import Workspace, sha256_file

from ..not_about_latency import LOAD as NOT_ABOUT_LATENCY

LABELS = ["setosa", "versicolor", "virginica"]
INPUT = "features"
LEAF = "iris_onnx"

POSTPROCESS_PY = '''
import json
import os
import signal
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})
        self.labels = np.array(json.loads(params["labels"]["string_value"]), dtype=object)
        self.top_k = int(params["top_k"]["string_value"])
        self.flip_every = int(params.get("flip_every", {}).get("string_value", "0"))
        self.sleep_s = float(params.get("sleep_ms", {}).get("string_value", "0")) / 1000.0
        self.kill_after = int(params.get("kill_after", {}).get("string_value", "0"))
        self.executed = 0
        if params.get("fail_on_load", {}).get("string_value") == "yes":
            raise RuntimeError("postprocess refuses to load: fail_on_load is set")

    def execute(self, requests):
        self.executed += 1
        if self.kill_after and self.executed >= self.kill_after:  # a candidate that takes the server down
            os.kill(os.getppid(), signal.SIGKILL)
        if self.sleep_s:
            time.sleep(self.sleep_s)
        responses = []
        for request in requests:
            probs = pb_utils.get_input_tensor_by_name(request, "probabilities").as_numpy()
            order = np.argsort(-probs, axis=1, kind="stable")[:, : self.top_k]
            if self.flip_every:
                rows = np.arange(0, len(order), self.flip_every)
                order[rows, 0] = (order[rows, 0] + 1) % len(self.labels)
            names = np.array([[s.encode() for s in self.labels[row]] for row in order], dtype=object)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("label", names)]))
        return responses
'''


@dataclass
class IrisRelease:
    """Everything run_canary needs for one test release."""

    spec: ReleaseSpec
    intake: IntakeResult
    export: ExportResult
    assembled: AssembleResult
    workspace: Workspace
    reference: dict[str, np.ndarray]
    golden: dict[str, np.ndarray]


def _write_config(path: Path, config: mc.ModelConfig) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.pbtxt").write_text(text_format.MessageToString(config))


def _tensor(container, name: str, dtype: int, dims: list[int]) -> None:  # noqa: ANN001
    t = container.add()
    t.name, t.data_type = name, dtype
    t.dims.extend(dims)


def train_iris(tmp: Path) -> tuple[Path, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Train, export to ONNX, and return (onnx path, golden inputs, native reference outputs)."""
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    x, y = load_iris(return_X_y=True)
    x = x.astype(np.float32)
    model = LogisticRegression(max_iter=500).fit(x, y)
    onx = to_onnx(model, initial_types=[(INPUT, FloatTensorType([None, 4]))], options={"zipmap": False}, target_opset=17)
    tmp.mkdir(parents=True, exist_ok=True)
    onnx_path = tmp / "model.onnx"
    onnx_path.write_bytes(onx.SerializeToString())
    golden = {INPUT: x}
    reference = {"probabilities": model.predict_proba(x).astype(np.float32), "label": model.predict(x).astype(np.int64)}
    return onnx_path, golden, reference


def write_leaf(repo: Path, onnx_path: Path, *, max_batch_size: int = 64) -> None:
    config = mc.ModelConfig(name=LEAF, backend="onnxruntime", max_batch_size=max_batch_size)
    _tensor(config.input, INPUT, mc.TYPE_FP32, [4])
    _tensor(config.output, "probabilities", mc.TYPE_FP32, [len(LABELS)])
    config.instance_group.add(count=1, kind=mc.ModelInstanceGroup.KIND_CPU)
    config.dynamic_batching.SetInParent()
    _write_config(repo / LEAF, config)
    (repo / LEAF / "1").mkdir(parents=True, exist_ok=True)
    (repo / LEAF / "1" / "model.onnx").write_bytes(onnx_path.read_bytes())


def write_pipeline(repo: Path, name: str, *, flip_every: int = 0, fail_on_load: bool = False, top_k: int = 1,
                   sleep_ms: float = 0, kill_after: int = 0) -> list[str]:
    """Write ``<name>_post`` and the ensemble ``<name>`` over the shared leaf; return the load order."""
    post = f"{name}_post"
    config = mc.ModelConfig(name=post, backend="python", max_batch_size=64)
    _tensor(config.input, "probabilities", mc.TYPE_FP32, [len(LABELS)])
    _tensor(config.output, "label", mc.TYPE_STRING, [top_k])
    config.instance_group.add(count=1, kind=mc.ModelInstanceGroup.KIND_CPU)
    params = {"labels": json.dumps(LABELS), "top_k": str(top_k), "flip_every": str(flip_every),
              "fail_on_load": "yes" if fail_on_load else "no", "sleep_ms": str(sleep_ms), "kill_after": str(kill_after)}
    for key, value in params.items():
        config.parameters[key].string_value = value
    _write_config(repo / post, config)
    (repo / post / "1").mkdir(parents=True, exist_ok=True)
    (repo / post / "1" / "model.py").write_text(POSTPROCESS_PY)

    ens = mc.ModelConfig(name=name, platform="ensemble", max_batch_size=64)
    _tensor(ens.input, INPUT, mc.TYPE_FP32, [4])
    _tensor(ens.output, "probabilities", mc.TYPE_FP32, [len(LABELS)])
    _tensor(ens.output, "label", mc.TYPE_STRING, [top_k])
    leaf_step = ens.ensemble_scheduling.step.add(model_name=LEAF, model_version=-1)
    leaf_step.input_map[INPUT] = INPUT
    leaf_step.output_map["probabilities"] = "probabilities"
    post_step = ens.ensemble_scheduling.step.add(model_name=post, model_version=-1)
    post_step.input_map["probabilities"] = "probabilities"
    post_step.output_map["label"] = "label"
    _write_config(repo / name, ens)
    (repo / name / "1").mkdir(parents=True, exist_ok=True)  # an ensemble needs an (empty) version folder
    return [LEAF, post, name]


def make_release(
    root: Path,
    repo: Path,
    onnx_path: Path,
    golden: dict[str, np.ndarray],
    reference: dict[str, np.ndarray],
    *,
    name: str = "iris",
    load_order: list[str] | None = None,
    canary: dict | None = None,
    release_id: str = "iris-test",
) -> IrisRelease:
    """The stage results run_canary reads, written into a workspace under ``root``."""
    ws = Workspace(release_id, root=root / "ws")
    export_dir = ws.stage_dir("export")
    golden_path, reference_path = export_dir / "golden.npz", export_dir / "reference.npz"
    np.savez(golden_path, **golden)
    np.savez(reference_path, **reference)
    spec = parse_spec({
        "name": name,
        "model": {"name": "iris-classifier", "alias": "candidate"},
        "repository": {"shape": "classifier", "labels": LABELS},
        # a short load phase with ratio limits no noise can trip: these tests are about the canary's logic
        "canary": {"load": dict(NOT_ABOUT_LATENCY),  # (tests/not_about_latency.py says why)
                   **(canary or {"batch_rows": 16, "concurrency": 2})},
    })
    rows = len(next(iter(golden.values())))
    intake = IntakeResult(
        model_name="iris-classifier", version="1", alias="candidate", run_id=None, source="test", flavor="sklearn",
        model_dir=str(root), inputs=[TensorSpec(INPUT, "FP32", (4,))],
        outputs=[TensorSpec("label", "INT64", ()), TensorSpec("probabilities", "FP32", (3,))],
        content_digest="0" * 64, classes=[0, 1, 2],
    )
    export = ExportResult(
        onnx_path=str(onnx_path), onnx_sha256=sha256_file(onnx_path), opset=17,
        inputs=intake.inputs, outputs=intake.outputs, parity={}, golden_path=str(golden_path), golden_rows=rows,
        reference_path=str(reference_path),
    )
    order = load_order or [LEAF, f"{name}_post", name]
    assembled = AssembleResult(
        repository_dir=str(repo), manifest_path="", entry_model=name, load_order=order, models={m: 1 for m in order},
        roles={"probabilities": "probabilities", "label": "label"}, labels=list(LABELS), classes=[0, 1, 2],
        calls={name: [LEAF, f"{name}_post"]},
    )
    return IrisRelease(spec, intake, export, assembled, ws, reference, golden)


def served_champion(repo: Path, work: Path, *, name: str = "iris", release_id: str = "iris-champion"):  # noqa: ANN201
    """The ``name`` pipeline of ``repo`` as a served production champion (renamed, as the canary loads it)."""
    import shutil

    from model_release.canary.champion import CHAMPION_SUFFIX, SERVED, Champion, rename_repository
    from model_release.canary.judge.compare import Interface
    from model_release.canary.judge.contract import contract_of

    source = work / "champion-source"
    order = [LEAF, f"{name}_post", name]
    for model in order:
        shutil.copytree(repo / model, source / model, dirs_exist_ok=True)
    names = {m: m + CHAMPION_SUFFIX for m in order}
    renamed = rename_repository(source, work / "champion", names)
    roles = {"probabilities": "probabilities", "label": "label"}
    return Champion(
        SERVED, "production", release_id=release_id, name=f"release {release_id}", repository=renamed,
        entry=names[name], load_order=[names[m] for m in order], interface=Interface(roles, list(LABELS), [0, 1, 2]),
        contract=contract_of(renamed, names[name], list(LABELS)), pinned=True,
        calls={names[name]: [names[LEAF], names[f"{name}_post"]]},
    )
