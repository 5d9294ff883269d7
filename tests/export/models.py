"""Real models for the intake and export tests: trained here, logged to a real SQLite MLflow.

Shared by tests/intake and tests/export. Models are small so a whole module trains in seconds;
``pip_requirements`` is always given so MLflow does not spend seconds inferring them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from model_release.local.mlflow import DEFAULT_EXPERIMENT, use_local_tracking
from model_release.spec import ReleaseSpec, parse_spec
from model_release.workspace import Workspace

PIP = {
    "sklearn": ["scikit-learn==1.9.1"], "pytorch": ["torch==2.13.0"], "onnx": ["onnx==1.23.2"],
    "xgboost": ["xgboost-cpu"], "lightgbm": ["lightgbm"], "pyfunc": ["mlflow"],
}


@dataclass
class Registry:
    """A local MLflow (tracking + registry on SQLite) under ``root``."""

    root: Path
    uri: str = ""

    def __post_init__(self) -> None:
        self.uri = use_local_tracking(self.root)

    @property
    def client(self) -> Any:
        from mlflow import MlflowClient

        return MlflowClient(tracking_uri=self.uri, registry_uri=self.uri)

    def log(self, flavor: str, model: Any, name: str, *, alias: str | None = "candidate",
            params: dict[str, Any] | None = None, metrics: dict[str, float] | None = None, **kwargs: Any) -> str:
        """Log ``model`` with ``mlflow.<flavor>.log_model``, register it as ``name``; returns the version."""
        import importlib

        import mlflow

        mlflow.set_tracking_uri(self.uri)
        mlflow.set_registry_uri(self.uri)
        mlflow.set_experiment(DEFAULT_EXPERIMENT)
        module = importlib.import_module(f"mlflow.{flavor}")
        key = "python_model" if flavor == "pyfunc" else ("onnx_model" if flavor == "onnx" else None)
        args = {key: model} if key else {}
        with mlflow.start_run():
            mlflow.log_params(params or {"trained_by": "tests"})
            mlflow.log_metrics(metrics or {"train_score": 1.0})
            info = module.log_model(*([] if key else [model]), name="model", registered_model_name=name,
                                    pip_requirements=PIP[flavor], **args, **kwargs)
        version = str(info.registered_model_version)
        if alias:
            self.client.set_registered_model_alias(name, alias, version)
        return version


def make_spec(model_name: str, *, alias: str | None = "candidate", version: int | None = None,
              base_dir: Path | None = None, **sections: Any) -> ReleaseSpec:
    """A release spec for ``model_name`` with the given sections (``export={...}``, ``golden={...}``).

    Export tests convert small golden sets on purpose (fast, and the point is parity): the spec
    lowers golden.min_rows to 1 unless the test sets it. The repository shape is ``single`` unless
    the test sets one: the export stage refuses a model the shape cannot serve before converting it
    (a regressor for the classifier shape), and these tests convert every kind of model.
    """
    sections["golden"] = {"min_rows": 1, **sections.get("golden", {})}
    sections["repository"] = {"shape": "single", **sections.get("repository", {})}
    model: dict[str, Any] = {"name": model_name}
    if version is not None:
        model["version"] = version
    else:
        model["alias"] = alias
    data = {"name": "rel", "model": model, **sections}
    return parse_spec(data, base_dir=str(base_dir) if base_dir else None)


def new_ws(root: Path, release: str) -> Workspace:
    return Workspace(release, root=root)


# --------------------------------------------------------------------------- training


def iris() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_iris

    x, y = load_iris(return_X_y=True)
    return x, y


def sklearn_classifier_pipeline() -> tuple[Any, np.ndarray]:
    """StandardScaler + LogisticRegression on breast_cancer (30 float features, 2 classes)."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = load_breast_cancer(return_X_y=True)
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)).fit(x, y), x


def sklearn_regressor() -> tuple[Any, np.ndarray]:
    """PolynomialFeatures + Ridge on diabetes."""
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures, StandardScaler

    x, y = load_diabetes(return_X_y=True)
    return make_pipeline(StandardScaler(), PolynomialFeatures(2), Ridge(alpha=1.0)).fit(x, y), x


def sklearn_columns_pipeline() -> tuple[Any, Any]:
    """A DataFrame pipeline: a scaled numeric column, a one-hot string column, awkward column names."""
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    rng = np.random.default_rng(0)
    n = 200
    frame = pd.DataFrame({
        "petal length (cm)": rng.normal(3, 1, n),
        "2nd width": rng.normal(1, 0.3, n),
        "colour": rng.choice(["red", "green", "blue"], n),
    })
    y = (frame["petal length (cm)"] + (frame["colour"] == "red") > 3.2).astype(int).to_numpy()
    pre = ColumnTransformer([
        ("num", StandardScaler(), ["petal length (cm)", "2nd width"]),
        ("cat", OneHotEncoder(handle_unknown="ignore"), ["colour"]),
    ])
    from sklearn.pipeline import Pipeline

    model = Pipeline([("pre", pre), ("clf", RandomForestClassifier(n_estimators=10, max_depth=4, random_state=0))])
    return model.fit(frame, y), frame


def torch_mlp() -> tuple[Any, np.ndarray]:
    import torch

    torch.manual_seed(0)
    x = np.random.default_rng(0).normal(size=(64, 8)).astype(np.float32)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()
    return model, x


def torch_cnn() -> tuple[Any, np.ndarray]:
    import torch

    torch.manual_seed(0)
    x = np.random.default_rng(1).normal(size=(16, 1, 8, 8)).astype(np.float32)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 4, 5), torch.nn.Softmax(dim=1),
    ).eval()
    return model, x


def torch_two_in_two_out() -> Any:
    """A module taking two tensors and returning two (scores, embedding); pickled by MLflow."""
    import torch

    class TwoHeads(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Linear(4, 4)
            self.head = torch.nn.Linear(6, 3)

        def forward(self, features: Any, extra: Any) -> Any:
            embedding = torch.tanh(self.embed(features))
            scores = torch.softmax(self.head(torch.cat([embedding, extra], dim=1)), dim=1)
            return scores, embedding

    torch.manual_seed(0)
    return TwoHeads().eval()
