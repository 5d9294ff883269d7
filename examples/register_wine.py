"""Register your own model in MLflow under alias ``candidate``: the example of README's "Using it".

Trains a scaled logistic regression on scikit-learn's bundled wine data (13 features, 3 classes)
and registers it as ``wine-classifier``; ``releases/wine.yaml`` is its release spec. The model
trains on a stratified split only: the other rows, with their cultivar, are the golden set
``releases/wine-golden.npz`` (``--write-golden`` writes it), so the canary scores every release on
rows it never saw. For your own model keep the four things a release needs: a supported flavor
(sklearn, pytorch, onnx, xgboost, lightgbm), a signature, a golden set (a file with the ground truth,
as here, or the input example) and the alias the spec names::

    python examples/register_wine.py            # prints: registered wine-classifier version 1 as @candidate
    python examples/register_wine.py --no-alias # registered, alias left alone: release it with --version
    python examples/register_wine.py --c 2      # a retrained candidate: version 2

It logs to the MLflow that ``MLFLOW_TRACKING_URI`` names (``source .work/stack/env`` sets it).
"""

import argparse
import os
import sys
from pathlib import Path

import numpy as np

#: the cultivars, in class order: releases/wine.yaml's repository.labels and the golden file's target
CULTIVARS = ("barolo", "grignolino", "barbera")
#: the share of the 178 rows held out as the golden set: 112 rows, each cultivar 30 or more (the
#: canary's per-class gates need canary.classes.min_support, 30, and the golden set golden.min_rows, 100)
GOLDEN_SHARE, SEED = 0.625, 0
GOLDEN_FILE = Path(__file__).resolve().parents[1] / "releases" / "wine-golden.npz"


def split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The wine data as ``(x_train, y_train, x_golden, y_golden)``: stratified, the same every time."""
    from sklearn.datasets import load_wine
    from sklearn.model_selection import train_test_split

    x, y = load_wine(return_X_y=True)
    x_train, x_golden, y_train, y_golden = train_test_split(
        x.astype(np.float32), y, test_size=GOLDEN_SHARE, stratify=y, random_state=SEED)
    return x_train, y_train, x_golden, y_golden


def write_golden(path: Path = GOLDEN_FILE) -> Path:
    """The held-out rows as the spec's golden file: ``input`` (float32 [N, 13]) and ``cultivar`` (names)."""
    _, _, x, y = split()
    np.savez(path, input=x, cultivar=np.asarray(CULTIVARS)[y])
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description="Train a wine classifier and register it under alias candidate.")
    parser.add_argument("--c", type=float, default=1.0, help="inverse regularisation strength of the logistic regression")
    parser.add_argument("--name", default="wine-classifier", help="the registered model's name")
    parser.add_argument("--no-alias", action="store_true",
                        help="register the version without moving @candidate: nothing starts by itself (on a stack "
                             "`model-release up` started, moving the alias starts the spec's DAG through the webhook); "
                             "release it by version")
    parser.add_argument("--write-golden", metavar="PATH", help="only write the held-out rows as a golden file to PATH")
    args = parser.parse_args()
    if args.write_golden:
        print(f"wrote {write_golden(Path(args.write_golden))}")
        return
    if not os.environ.get("MLFLOW_TRACKING_URI"):
        sys.exit("MLFLOW_TRACKING_URI is not set: run `model-release up`, then `source .work/stack/env`")

    import mlflow
    from mlflow.models import infer_signature

    from model_release.model.skops_import import import_skops

    import_skops()  # MLflow's sklearn flavor saves with skops, whose import would load all of PyTorch (1.5 s) for nothing
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y, _, _ = split()
    model = make_pipeline(StandardScaler(), LogisticRegression(C=args.c, max_iter=1000)).fit(x, y)
    mlflow.set_experiment("wine")
    with mlflow.start_run(run_name=f"wine-C{args.c}"):
        mlflow.log_param("C", args.c)
        mlflow.log_metric("train_accuracy", model.score(x, y))
        info = mlflow.sklearn.log_model(
            model,
            name="model",
            signature=infer_signature(x, model.predict(x)),
            input_example=x,  # training rows; the golden set is releases/wine-golden.npz, held out from them
            registered_model_name=args.name,
            pip_requirements=["scikit-learn==1.9.1"],  # skips MLflow's slow requirement inference
        )
    version = info.registered_model_version
    if args.no_alias:
        print(f"registered {args.name} version {version} without moving @candidate")
        return
    mlflow.MlflowClient().set_registered_model_alias(args.name, "candidate", version)
    print(f"registered {args.name} version {version} as @candidate")


if __name__ == "__main__":
    main()
