"""Test support: small ONNX models, stage results and specs for the assemble tests, and the local Triton
the load tests install generated repositories into.

Several generated repositories are installed side by side into one server's repository (ONNX
leaves through :func:`model_release.triton.shim.prepare_canary_repository`, exactly as the canary
serves them), and loaded explicitly by the tests.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from model_release.triton.shim import prepare_canary_repository
from model_release.triton.local import LocalTriton as _Server
from model_release.repository.onnx_io import onnx_io
from model_release.spec import ReleaseSpec, parse_spec
from model_release.types import ExportResult, IntakeResult
from model_release.workspace import sha256_file

INPUT = "float_input"


def iris() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_iris

    x, y = load_iris(return_X_y=True)
    return x.astype(np.float32), y


def sklearn_onnx(path: Path, kind: str = "lr") -> Any:
    """Fit a small model on iris and export it with skl2onnx (no ZipMap); returns the fitted model.

    kinds: ``lr`` (a good classifier), ``weak`` (a heavily regularised one: unsure on most rows),
    ``tree`` (a shallow tree), ``regressor`` (a linear regression: no probabilities).
    """
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.tree import DecisionTreeClassifier

    x, y = iris()
    model = {
        "lr": lambda: LogisticRegression(max_iter=500, C=10.0),
        "weak": lambda: LogisticRegression(max_iter=500, C=0.02),
        "tree": lambda: DecisionTreeClassifier(max_depth=3, random_state=0),
        "regressor": lambda: LinearRegression(),
    }[kind]().fit(x, y)
    options = {} if kind == "regressor" else {id(model): {"zipmap": False}}
    onx = to_onnx(model, initial_types=[(INPUT, FloatTensorType([None, 4]))], options=options, target_opset=17)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(onx.SerializeToString())
    return model


def export_result(onnx_path: Path) -> ExportResult:
    inputs, outputs = onnx_io(onnx_path)
    return ExportResult(
        onnx_path=str(onnx_path), onnx_sha256=sha256_file(onnx_path), opset=17, inputs=inputs, outputs=outputs,
        parity={"probabilities": {"max_abs": 1e-8}}, golden_path=str(onnx_path.parent / "golden.npz"), golden_rows=150,
        converter={"skl2onnx": "1.20.0"},
    )


def intake_result(classes: list[Any] | None = (0, 1, 2)) -> IntakeResult:  # type: ignore[assignment]
    return IntakeResult(
        model_name="iris-classifier", version="3", alias="candidate", run_id="abc123", source="models:/m-1",
        flavor="sklearn", model_dir="/nowhere", inputs=[], outputs=[], content_digest="sha256:00",
        metrics={"accuracy": 0.97}, params={"C": "10"}, classes=list(classes) if classes is not None else None,
    )


def make_spec(name: str = "iris", base_dir: Path | None = None, **repository: Any) -> ReleaseSpec:
    data = {"name": name, "model": {"name": "iris-classifier", "alias": "candidate"}, "repository": repository}
    return parse_spec(data, base_dir=str(base_dir) if base_dir else None)


class LocalTriton:
    """A started tritonserver serving ``<workdir>/models``; ``install`` adds repositories to it."""

    def __init__(self, workdir: Path, ready_timeout: float = 60.0) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.repository = workdir / "models"
        self.repository.mkdir()
        self._server = _Server(self.repository, work_dir=workdir / "server", ready_timeout=ready_timeout)
        self._server.start()
        self.url = self._server.http_url
        self.process = self._server.process

    def log_tail(self, lines: int = 40) -> str:
        return self._server.log_tail(lines)

    def install(self, repository: Path) -> None:
        """Copy a generated repository into the server's, ONNX leaves shimmed as the canary does."""
        with tempfile.TemporaryDirectory(dir=self.repository.parent) as staging:
            staged = prepare_canary_repository(repository, Path(staging) / "models")
            shutil.copytree(staged.path, self.repository, dirs_exist_ok=True)

    def stop(self) -> None:
        self._server.stop()
