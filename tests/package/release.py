"""One wine release the way a platform team runs it: its own DAG file of a few lines, in a venv outside the
clone, against a running stack (MLflow, the S3 store, a serving Triton); then the proof it was promoted and
served. tests/package/test_user_dag.py runs it in the locked core install, test_oldest.py beside the oldest
Airflow and MLflow the ranges claim.

The stack's MLflow (SQLite), the moto S3 server and the serving Triton run from the test process, as a
team's services run outside its Airflow; only ``examples/register_wine.py`` (the model side, from the
README) and the DAG run in the installed venv. What the venv is told is what a team sets: the tracking URI,
the connections ``mlflow_default`` and ``aws_default`` and the local Triton's runtime for the CPU canary
(``MODEL_RELEASE_TRITON_RUNTIME``); the serving Triton's agent registers in the store, where the rollout task
finds it. Nothing names the clone.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from model_release.local.fleet import LocalFleet, s3_env
from model_release.local.stack import EmbeddedStack, connection_env
from model_release.triton.local import runtime_venv

from tests.conftest import PROJECT

from .conftest import Venv

#: the user's DAG file: what the README's "In your own Airflow" shows, at most ten lines
USER_DAG = '''\
from airflow.sdk import DAG
from model_release.airflow import release_task_group

with DAG("wine_release", schedule=None, catchup=False) as dag:
    release_task_group("wine.yaml")  # beside this file

if __name__ == "__main__":
    print("run state:", dag.test().state)
'''
WINE = PROJECT / "releases" / "wine.yaml"
ENTRY_MODEL = "wine"


def write_user_folder(home: Path, *, prefix: str) -> None:
    """The user's DAG file, its spec (wine.yaml with the store prefix ``prefix``, without the canary's load
    phase, tuning and expectations), the golden set beside it, and the README's registration script."""
    (home / "wine_release.py").write_text(USER_DAG)
    spec = yaml.safe_load(WINE.read_text())
    spec["promote"]["store"] = f"s3://model-store/{prefix}"
    # as tests/dag_spec.py: these tests are about the installed package, not latency (the load phase, tuning and
    # great_expectations are tested in tests/canary/ and cost tens of seconds of a release on two cores)
    spec["canary"].update(load={"enabled": False}, tune={"enabled": False}, expectations=False)
    (home / "wine.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    (home / "wine-golden.npz").write_bytes((WINE.parent / spec["golden"]["path"]).read_bytes())
    (home / "register_wine.py").write_text((PROJECT / "examples" / "register_wine.py").read_text())


def user_env(venv: Venv, tracking: str, stack: EmbeddedStack) -> dict[str, str]:
    return venv.env(MLFLOW_TRACKING_URI=tracking, AIRFLOW__CORE__DAGS_FOLDER=str(venv.home),
                    MODEL_RELEASE_TRITON_RUNTIME=str(runtime_venv()), **connection_env(tracking, stack.endpoint_url))


def serving(stack: EmbeddedStack, root: Path, prefix: str) -> LocalFleet:
    """One serving Triton with its agent, following channel production of the store the spec promotes to."""
    return LocalFleet(root, store=f"s3://{stack.bucket}/{prefix}", count=1, env=s3_env(stack.endpoint_url))


def release_wine(venv: Venv, stack: EmbeddedStack, fleet: LocalFleet, *, prefix: str, tracking: str | None = None) -> dict[str, Any]:
    """Register wine-classifier@candidate and run the user's DAG with ``dag.test()``; the run's output and
    what the store, MLflow and the serving Triton say afterwards.

    Args:
        tracking: the tracking URI (an MLflow server of the venv's own version); the stack's SQLite store when None.
    """
    tracking = tracking or str(stack.tracking_uri)
    write_user_folder(venv.home, prefix=prefix)
    env = user_env(venv, tracking, stack)
    steps: dict[str, float] = {}
    with timed(steps, "register"):
        registered = venv.run(venv.python, "register_wine.py", env=env, timeout=300)
    assert "as @candidate" in registered.stdout, registered.stdout + registered.stderr
    with timed(steps, "airflow db migrate"):  # dag.test() needs the tables, not the canary's pool
        venv.run(venv.bin("airflow"), "db", "migrate", env=env, timeout=300)
    with timed(steps, "dag.test()"):
        run = venv.run(venv.python, "wine_release.py", env=env, timeout=900, check=False)
    (venv.home / "dag-test.log").write_text(run.stdout + run.stderr)
    print("\n[package] " + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in steps.items()))
    if run.returncode == 0 and run.stdout.rstrip().endswith("success"):
        fleet.wait_ready(timeout_s=120)  # the agent serves the channel's release (the rollout task waited for it too)
    return {"run": run, "pointer": stack_pointer(stack, prefix), "alias": production_version(tracking),
            "served": served_accuracy(fleet)}


@contextmanager
def timed(steps: dict[str, float], name: str) -> Iterator[None]:
    started = time.monotonic()
    try:
        yield
    finally:
        steps[name] = time.monotonic() - started


def stack_pointer(stack: EmbeddedStack, prefix: str) -> dict[str, Any] | None:
    import json

    client = stack.s3_client()
    try:
        body = client.get_object(Bucket=stack.bucket, Key=f"{prefix}/channels/production.json")["Body"].read()
    except client.exceptions.NoSuchKey:
        return None
    return dict(json.loads(body))


def production_version(tracking: str) -> str | None:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=tracking, registry_uri=tracking)
    try:
        return str(client.get_model_version_by_alias("wine-classifier", "production").version)
    except mlflow.exceptions.MlflowException:
        return None


def served_accuracy(fleet: LocalFleet) -> float | None:
    """The share of the golden rows whose cultivar the first serving Triton's ``wine`` answers right, or None
    when it does not serve the model."""
    import tritonclient.http as httpclient

    assert fleet.fleet is not None
    golden = np.load(WINE.parent / "wine-golden.npz")
    client = httpclient.InferenceServerClient(fleet.fleet.servers[0].url, network_timeout=60)
    try:
        if not client.is_model_ready(ENTRY_MODEL):
            return None
        meta = client.get_model_metadata(ENTRY_MODEL)
        (inp,) = meta["inputs"]
        labels = next(o["name"] for o in meta["outputs"] if o["datatype"] == "BYTES")
        answers = []
        for start in range(0, len(golden["input"]), 64):  # the spec's max_batch_size
            rows = golden["input"][start:start + 64].astype(np.float32)
            tensor = httpclient.InferInput(inp["name"], list(rows.shape), inp["datatype"])
            tensor.set_data_from_numpy(rows)
            result = client.infer(ENTRY_MODEL, [tensor])  # every output: Triton 2.51's ensembles refuse a subset
            answers.append(result.as_numpy(labels).reshape(len(rows), -1)[:, 0])
    finally:
        client.close()
    predicted = np.asarray([a.decode() if isinstance(a, bytes) else str(a) for a in np.concatenate(answers)])
    return float(np.mean(predicted == golden["cultivar"]))


def failure(run: Any) -> str:
    """What a failed run says: its error records and tracebacks (whole), then the output's tail."""
    lines = (run.stdout + run.stderr).splitlines()
    picked = [i for i, line in enumerate(lines) if "[error" in line or "Traceback" in line]
    errors = "\n".join("\n".join(lines[i:i + 40]) for i in picked[:4])
    return f"{errors}\n--- tail ---\n" + "\n".join(lines[-40:])
