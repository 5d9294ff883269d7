"""Register your own model in MLflow under alias ``candidate``: the example of README's "Using it".

Trains a scaled logistic regression on scikit-learn's bundled wine data (13 features, 3 classes)
and registers it as ``wine-classifier``; ``releases/wine.yaml`` is its release spec. For your own
model keep the four things a release needs: a supported flavor (sklearn, pytorch, onnx, xgboost,
lightgbm), a signature, an input example (the golden set the gates replay, unless the spec names a
file) and the alias the spec names::

    python examples/register_wine.py            # prints: registered wine-classifier version 1 as @candidate
    python examples/register_wine.py --c 0.1    # a retrained candidate: version 2

It logs to the MLflow that ``MLFLOW_TRACKING_URI`` names (``source .work/stack/env`` sets it).
"""

import argparse
import os
import sys

import mlflow
import numpy as np
from mlflow.models import infer_signature
from sklearn.datasets import load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

parser = argparse.ArgumentParser(description="Train a wine classifier and register it under alias candidate.")
parser.add_argument("--c", type=float, default=1.0, help="inverse regularisation strength of the logistic regression")
parser.add_argument("--name", default="wine-classifier", help="the registered model's name")
args = parser.parse_args()
if not os.environ.get("MLFLOW_TRACKING_URI"):
    sys.exit("MLFLOW_TRACKING_URI is not set: run `model-release up`, then `source .work/stack/env`")

x, y = load_wine(return_X_y=True)
x = x.astype(np.float32)
model = make_pipeline(StandardScaler(), LogisticRegression(C=args.c, max_iter=1000)).fit(x, y)

mlflow.set_experiment("wine")
with mlflow.start_run(run_name=f"wine-C{args.c}"):
    mlflow.log_param("C", args.c)
    mlflow.log_metric("train_accuracy", model.score(x, y))
    info = mlflow.sklearn.log_model(
        model,
        name="model",
        signature=infer_signature(x, model.predict(x)),
        input_example=x,  # the golden set: every row is replayed through ONNX and the canary
        registered_model_name=args.name,
        pip_requirements=["scikit-learn==1.9.1"],  # skips MLflow's slow requirement inference
    )
version = info.registered_model_version
mlflow.MlflowClient().set_registered_model_alias(args.name, "candidate", version)
print(f"registered {args.name} version {version} as @candidate")
