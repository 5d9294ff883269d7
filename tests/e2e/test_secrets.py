"""No secret is ever written or printed: a whole release with distinctive fake credentials everywhere.

The MLflow tracking URI carries a password (``http://mr-bot:PASSWORD@host``: an MLflow server over
HTTP, MLflow's own Flask app serving the stack's SQLite store); the AWS variables carry a key id, a
secret key and a session token (the moto S3 server accepts any). The CLI runs as a user runs it, in a
subprocess: a whole release (intake, export, canary on the local Triton, promotion to S3 with the
MLflow alias following) at DEBUG, then a store command, a rollback and a release against an
unreachable MLflow at INFO. Every output, and every byte of every file written (the workspace, the
store's objects, the MLflow database and artifacts, the test's folder), is searched for each secret,
and for the ``Authorization`` header's base64 form of the MLflow credentials.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from model_release.local.demo import train_iris

from .conftest import NOT_ABOUT_LATENCY, write_spec

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEY_ID = "AKIAMRSECRETSTEST0042"
SECRET_KEY = "mr-aws-secret-Xq7vDistinctive"
SESSION_TOKEN = "mr-aws-session-token-Zt4wDistinctive"
MLFLOW_USER = "mr-bot"
MLFLOW_PASSWORD = "mr-mlflow-pw-Kc2pDistinctive"
SECRETS = {
    "AWS key id": KEY_ID,
    "AWS secret key": SECRET_KEY,
    "AWS session token": SESSION_TOKEN,
    "MLflow password": MLFLOW_PASSWORD,
    "MLflow basic auth": base64.b64encode(f"{MLFLOW_USER}:{MLFLOW_PASSWORD}".encode()).decode(),
}
MODEL = "iris-secrets"
PREFIX = "secrets"


@pytest.fixture(scope="module")
def mlflow_http(stack) -> Iterator[int]:  # noqa: ANN001
    """MLflow's tracking server app over HTTP on 127.0.0.1 (a thread), serving the stack's store; its port."""
    import logging

    from werkzeug.serving import make_server

    keys = {"_MLFLOW_SERVER_FILE_STORE": stack.tracking_uri, "_MLFLOW_SERVER_REGISTRY_STORE": stack.tracking_uri,
            "_MLFLOW_SERVER_ARTIFACT_ROOT": str(stack.root / "mlflow" / "artifacts")}
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(keys)
    from mlflow.server import app

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        thread.join(timeout=10)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


#: Every phase of iris.yaml's canary runs (load phase, tuning, expectations: each writes files and logs
#: that the scan reads), each briefly: this test is about secrets, not latency. The load phase as in
#: NOT_ABOUT_LATENCY (tests/e2e/conftest.py), whose loose ratios keep a busy machine's noise from failing
#: the release; tuning still tries its grid, 0.5 s a trial (the test checks that each phase ran).
BRIEF = {**{k: v for k, v in NOT_ABOUT_LATENCY.items() if not k.startswith("canary.tune.")},
         "canary.tune.trial_s": 0.5, "canary.tune.budget_s": 20}


def _spec(stack, folder: Path) -> Path:  # noqa: ANN001
    """iris.yaml for its own model and store prefix, every canary phase on, each brief (``BRIEF``)."""
    spec = write_spec(stack, folder / "iris-secrets.yaml", model=MODEL, prefix=PREFIX, settings=BRIEF)
    data = yaml.safe_load(spec.read_text())
    assert data["canary"]["tune"]["enabled"] and data["canary"].get("load", {}).get("enabled", True)
    return spec


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(stack, ws: Path, tracking_uri: str, level: str) -> dict[str, str]:  # noqa: ANN001
    env = stack.env()
    for key in list(env):
        if key.startswith(("AWS_", "MLFLOW_HTTP_", "MODEL_RELEASE_DEBUG")):
            env.pop(key)
    env.update(
        AWS_ACCESS_KEY_ID=KEY_ID, AWS_SECRET_ACCESS_KEY=SECRET_KEY, AWS_SESSION_TOKEN=SESSION_TOKEN,
        AWS_DEFAULT_REGION="us-east-1", MODEL_RELEASE_S3_ENDPOINT_URL=stack.endpoint_url,
        MLFLOW_TRACKING_URI=tracking_uri, MODEL_RELEASE_LOG_LEVEL=level, MODEL_RELEASE_WORKSPACE=str(ws),
        PYTHONUNBUFFERED="1",
    )
    return env


def _cli(env: dict[str, str], cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "model_release.cli", *argv], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=900)


def _leaks(blobs: dict[str, bytes]) -> list[str]:
    found = []
    for where, data in blobs.items():
        for what, secret in SECRETS.items():
            if secret.encode() in data:
                found.append(f"{what} in {where}")
    return found


def _files(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


def _store_objects(stack) -> dict[str, bytes]:  # noqa: ANN001
    client = stack.s3_client()
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=stack.bucket, Prefix=f"{PREFIX}/"):
        for obj in page.get("Contents", []):
            out[f"s3://{stack.bucket}/{obj['Key']}"] = client.get_object(Bucket=stack.bucket, Key=obj["Key"])["Body"].read()
    return out


def test_the_scan_finds_a_planted_secret(tmp_path) -> None:
    (tmp_path / "a.json").write_text(f'{{"uri": "http://{MLFLOW_USER}:{MLFLOW_PASSWORD}@h"}}')
    assert _leaks(_files(tmp_path)) == [f"MLflow password in {tmp_path / 'a.json'}"]


def test_no_secret_in_any_output_or_file_of_a_whole_release(stack, mlflow_http, tmp_path) -> None:  # noqa: ANN001
    train_iris(stack.tracking_uri, model_name=MODEL, c=1.0)
    spec = _spec(stack, tmp_path)
    ws, cwd = tmp_path / "ws", tmp_path / "cwd"
    cwd.mkdir()
    secret_uri = f"http://{MLFLOW_USER}:{MLFLOW_PASSWORD}@127.0.0.1:{mlflow_http}"
    mlflow_files_before = {p: p.stat().st_mtime_ns for p in (stack.root / "mlflow").rglob("*") if p.is_file()}

    debug = _env(stack, ws, secret_uri, "DEBUG")
    done = _cli(debug, cwd, "release", str(spec), "--release", "iris-secrets-1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"DEBUG model_release.pipeline: release iris-secrets-1: MLflow http://***@127.0.0.1:{mlflow_http}" in done.stderr
    promoted = (ws / "iris-secrets-1" / "promote" / "promote.json")
    assert promoted.is_file() and '"mlflow_alias": "production"' in promoted.read_text()
    report = json.loads((ws / "iris-secrets-1" / "canary" / "report.json").read_text())
    assert report["tuning"]["trials"] and report["load_phase"]["candidate"] and report["expectations"], \
        "every canary phase ran, and wrote what the scan reads"
    runs = {"release at DEBUG": done}

    info = _env(stack, ws, secret_uri, "INFO")
    store = f"s3://{stack.bucket}/{PREFIX}"
    runs["store releases at INFO"] = _cli(info, cwd, "store", "releases", "--store", store)
    assert runs["store releases at INFO"].returncode == 0, runs["store releases at INFO"].stderr
    runs["rollback at INFO"] = _cli(info, cwd, "rollback", "--store", store, "--tracking-uri", secret_uri)
    assert runs["rollback at INFO"].returncode != 0  # nothing to roll back to: an error line
    unreachable = f"http://{MLFLOW_USER}:{MLFLOW_PASSWORD}@127.0.0.1:{_closed_port()}"
    runs["unreachable MLflow at INFO"] = _cli(_env(stack, ws, unreachable, "INFO"), cwd, "release", str(spec))
    failed = runs["unreachable MLflow at INFO"]
    assert failed.returncode == 4 and "MLflow could not read registered model" in failed.stderr
    assert "http://***@127.0.0.1" in failed.stderr, failed.stderr[-2000:]  # MLflow's message named the URI

    outputs = {f"{name}: {stream}": getattr(proc, stream).encode() for name, proc in runs.items() for stream in ("stdout", "stderr")}
    written = _files(tmp_path)
    mlflow_written = {str(p): p.read_bytes() for p in (stack.root / "mlflow").rglob("*")
                      if p.is_file() and mlflow_files_before.get(p) != p.stat().st_mtime_ns}
    objects = _store_objects(stack)
    assert any(k.endswith("/release.json") for k in objects) and any("/reports/" in k for k in objects)
    assert any(p.endswith("intake.json") for p in written) and any(p.endswith("report.html") for p in written)
    assert any(p.endswith("mlflow.db") for p in mlflow_written)  # the alias and the canary's run were recorded
    assert _leaks({**outputs, **written, **mlflow_written, **objects}) == []
