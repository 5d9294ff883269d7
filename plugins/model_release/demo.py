"""The demo: three real releases of an iris classifier on the embedded stack, and the gate at work.

``make demo`` runs ``python -m model_release.demo``: it starts the embedded stack (MLflow on
SQLite, the moto S3 server, an Airflow SQLite DB), then runs the ``model_release`` DAG with
``airflow dags test`` three times, each on a newly registered candidate:

1. a logistic regression: the channel's first release, promoted;
2. the same model retrained on labels of which 40% are noise: the canary serves it beside
   release 1 and scores both on the golden set's ground truth; it is worse, and it is blocked;
3. a better-regularised retrain: judged against release 1 (still the champion), promoted.

It ends by printing what happened to each (the gates that blocked release 2, with the figures,
and the report paths); the store is copied to a local folder so it can be browsed afterwards.
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

from .stages import CANARY, PROMOTE
from .workspace import new_release_id

MODEL_NAME = "iris-classifier"
SPEC = "releases/iris.yaml"


def train_iris(tracking_uri: str, *, c: float = 1.0, alias: str | None = "candidate", model_name: str = MODEL_NAME,
               max_iter: int = 500, signature: bool = True, noise: float = 0.0, seed: int = 0) -> str:
    """Train a scaled logistic regression on scikit-learn's bundled iris data; register it.

    Args:
        noise: the share of training labels replaced by random classes (a degraded retrain).

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
    y = data.target.copy()
    if noise:
        rng = np.random.default_rng(seed)
        rows = rng.choice(len(y), int(noise * len(y)), replace=False)
        y[rows] = rng.integers(0, len(data.target_names), len(rows))
    model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=max_iter)).fit(x, y)
    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_registry_uri(tracking_uri)
    mlflow.set_experiment("model-release")  # created by local_tracking with a local artifact folder
    with mlflow.start_run(run_name=f"iris-C{c}" + (f"-noise{noise}" if noise else "")) as run:
        mlflow.log_params({"C": c, "max_iter": max_iter, "label_noise": noise, "model": "StandardScaler+LogisticRegression"})
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


#: the demo's three candidates: (what it is, training arguments, whether the canary should let it through)
RELEASES = (
    ("a logistic regression, the channel's first release", {"c": 1.0}, True),
    ("a retrain on 40% noisy labels, worse than production", {"c": 1.0, "noise": 0.4}, False),
    ("a better-regularised retrain (C=10)", {"c": 10.0}, True),
)


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
        for step, (what, training, should_pass) in enumerate(RELEASES, start=1):
            version = train_iris(str(stack.tracking_uri), **training)
            release_id = new_release_id("iris")
            print(f"[demo] release {step}: {MODEL_NAME} version {version}, {what}, as {release_id}", flush=True)
            outcome = stack.run_dag({"spec": SPEC, "release_id": release_id}, echo=True if args.verbose else _progress_line)
            done = _read_release(stack.workspace / release_id, release_id, version, what)
            if done is None or done["promoted"] is not None and not should_pass or done["promoted"] is None and should_pass:
                print("" if args.verbose else outcome.output[-6000:], file=sys.stderr)
                print(f"[demo] FAILED: release {release_id} ({what}) was expected to be "
                      f"{'promoted' if should_pass else 'blocked by the canary'} but was not (airflow exit "
                      f"{outcome.returncode}, state {outcome.state}); its workspace is {stack.workspace / release_id}", file=sys.stderr)
                return 1
            releases.append(done)
        store_copy = root / "store"
        n = _copy_store(stack, store_copy)
    print()
    promoted = [r for r in releases if r["promoted"]]
    print(f"[demo] done in {time.monotonic() - started:.0f} s: {len(promoted)} of {len(releases)} releases promoted, "
          f"{len(releases) - len(promoted)} blocked by the canary")
    for r in releases:
        _print_release(r)
    print(f"  the store ({n} objects) is copied to {store_copy}; channels/production.json names {promoted[-1]['release_id']}")
    return 0


def _read_release(ws: Path, release_id: str, version: str, what: str) -> dict[str, Any] | None:
    """What the DAG run left in the release's workspace: the canary's verdict and, if any, the promotion."""
    canary_json, promote_json = ws / CANARY / f"{CANARY}.json", ws / PROMOTE / f"{PROMOTE}.json"
    if not canary_json.is_file():
        return None
    from .workspace import absolute_paths

    # results name their files relative to the release folder (@workspace/...): resolve them here
    canary = absolute_paths(json.loads(canary_json.read_text()), str(ws))
    report = json.loads(Path(canary["report_json"]).read_text())
    promoted = absolute_paths(json.loads(promote_json.read_text()), str(ws)) if promote_json.is_file() else None
    return {"release_id": release_id, "version": version, "what": what, "canary": canary, "report": report, "promoted": promoted}


def _print_release(r: dict[str, Any]) -> None:
    canary, report, p = r["canary"], r["report"], r["promoted"]
    verdict = "PROMOTED" if p else "INCONCLUSIVE" if report.get("verdict") == "inconclusive" else "BLOCKED"
    print(f"  release {r['release_id']}: {MODEL_NAME} v{r['version']} ({r['what']}): {verdict}")
    champion = report.get("champion") or {}
    print(f"    judged against: {champion.get('name') or 'no champion'}"
          + (f" ({champion.get('reason')})" if champion.get("kind") != "served" and champion.get("reason") else ""))
    quality = report.get("quality") or {}
    for metric, value in (quality.get("candidate") or {}).items():
        theirs = (quality.get("champion") or {}).get(metric)
        print(f"    {metric}: {value:.4f}" + (f" (champion {theirs:.4f})" if theirs is not None else ""))
    for gate in report.get("gates") or []:
        if gate.get("passed") is False:
            print(f"    gate {gate['name']} FAILED: {gate['message']} [{gate['setting']}]")
        elif gate.get("outcome") == "inconclusive":
            print(f"    gate {gate['name']} INCONCLUSIVE: {gate['message']} [{gate['setting']}]")
    if p:
        print(f"    -> {p['release_prefix']}; channel {p['channel']}: {p['previous_release'] or '(none)'} -> {r['release_id']}; "
              f"MLflow alias {p['mlflow_alias']} -> v{r['version']}; {p['objects']} objects")
    else:
        print("    nothing promoted; the channel still points at the champion")
    print(f"    report: {canary['report_json']}")
    print(f"            {canary['report_html']}")


if __name__ == "__main__":
    raise SystemExit(main())
