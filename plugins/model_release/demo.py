"""The demo: two real releases of an iris classifier on the embedded stack, start to finish.

``make demo`` runs ``python -m model_release.demo``: it starts the embedded stack (MLflow on
SQLite, the moto S3 server, an Airflow SQLite DB), trains and registers a classifier under alias
``candidate``, runs the ``model_release`` DAG with ``airflow dags test``, then registers a
retrained candidate and releases it too, so the second report compares it with the first. It
ends by printing the release ids, the reports, and what was promoted; the store is copied to a
local folder so it can be browsed after the command (and the S3 server) ends.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from .workspace import new_release_id

MODEL_NAME = "iris-classifier"
SPEC = "releases/iris.yaml"


def train_iris(tracking_uri: str, *, c: float = 1.0, alias: str | None = "candidate", model_name: str = MODEL_NAME,
               max_iter: int = 500, signature: bool = True) -> str:
    """Train a scaled logistic regression on scikit-learn's bundled iris data; register it.

    Returns:
        The new model version (a string, as MLflow gives it).
    """
    import mlflow
    import numpy as np
    from mlflow.models import infer_signature
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    data = load_iris()
    x = data.data.astype(np.float32)
    y = data.target
    model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=max_iter)).fit(x, y)
    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_registry_uri(tracking_uri)
    mlflow.set_experiment("model-release")  # created by local_tracking with a local artifact folder
    with mlflow.start_run(run_name=f"iris-C{c}") as run:
        mlflow.log_params({"C": c, "max_iter": max_iter, "model": "StandardScaler+LogisticRegression"})
        mlflow.log_metric("train_accuracy", float(model.score(x, y)))
        info = mlflow.sklearn.log_model(
            model,
            name="model",
            signature=infer_signature(x, model.predict(x)) if signature else None,
            input_example=x if signature else None,
            registered_model_name=model_name,
            pip_requirements=["scikit-learn==1.9.1"],
        )
    client = mlflow.MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    version = str(info.registered_model_version)
    if alias:
        client.set_registered_model_alias(model_name, alias, version)
    del run
    return version


def _copy_store(stack: Any, dest: Path) -> int:
    """Download the whole bucket into ``dest`` so it outlives the local S3 server."""
    client = stack.s3_client()
    if dest.exists():
        shutil.rmtree(dest)
    count = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=stack.bucket):
        for obj in page.get("Contents", []):
            target = dest / obj["Key"]
            target.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(stack.bucket, obj["Key"], str(target))
            count += 1
    return count


def _progress_line(line: str) -> bool:
    """The lines of an Airflow run worth showing by default: task starts/ends, stage progress, errors."""
    return "[DAG TEST]" in line or "[model_release." in line or " error " in line.lower() or "Traceback" in line


def main(argv: list[str] | None = None) -> int:
    from .local.stack import EmbeddedStack

    parser = argparse.ArgumentParser(prog="model-release demo", description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=".work/demo", help="where the demo keeps its state (emptied first)")
    parser.add_argument("--verbose", action="store_true", help="echo the Airflow runs' whole logs (default: the stages' progress)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    root = Path(args.root).resolve()
    if root.exists():
        shutil.rmtree(root)
    started = time.monotonic()
    releases: list[dict[str, Any]] = []
    with EmbeddedStack(root) as stack:
        print(f"[demo] embedded stack up: MLflow {stack.tracking_uri}, S3 {stack.endpoint_url}", flush=True)
        stack.migrate_airflow()
        for step, c in enumerate((1.0, 0.05), start=1):
            version = train_iris(str(stack.tracking_uri), c=c)
            release_id = new_release_id("iris")
            print(f"[demo] release {step}: {MODEL_NAME} version {version} (C={c}) as {release_id}", flush=True)
            outcome = stack.run_dag({"spec": SPEC, "release_id": release_id}, echo=True if args.verbose else _progress_line)
            ws = stack.workspace / release_id
            promote_json = ws / "promote" / "promote.json"
            if outcome.returncode != 0 or not promote_json.is_file():
                print("" if args.verbose else outcome.output[-6000:], file=sys.stderr)
                print(f"[demo] FAILED: release {release_id} did not promote (airflow exit {outcome.returncode}, "
                      f"state {outcome.state}); its workspace is {ws}", file=sys.stderr)
                return 1
            promoted = json.loads(promote_json.read_text())
            releases.append({"release_id": release_id, "version": version, "promoted": promoted,
                             "canary": json.loads((ws / "canary" / "canary.json").read_text())})
        store_copy = root / "store"
        n = _copy_store(stack, store_copy)
    print()
    print(f"[demo] done in {time.monotonic() - started:.0f} s: {len(releases)} releases promoted")
    for r in releases:
        p, canary = r["promoted"], r["canary"]
        print(f"  release {r['release_id']}: {MODEL_NAME} v{r['version']} -> {p['release_prefix']}")
        print(f"    channel {p['channel']}: {p['previous_release'] or '(none)'} -> {r['release_id']}; "
              f"MLflow alias {p['mlflow_alias']} -> v{r['version']}; {p['objects']} objects")
        print(f"    {canary['summary']}")
        baseline = json.loads(Path(canary["report_json"]).read_text()).get("baseline")
        if baseline:
            label = baseline["outputs"].get("label", {})
            probs = baseline["outputs"].get("probabilities", {})
            print(f"    against {baseline['name']}: labels agree on {label.get('agreement', 0):.1%} of {label.get('rows')} rows, "
                  f"probabilities differ by up to {probs.get('max_abs', 0):.3f}")
        print(f"    report: {canary['report_json']}")
        print(f"            {canary['report_html']}")
    print(f"  the store ({n} objects) is copied to {store_copy}; channels/production.json names {releases[-1]['release_id']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
