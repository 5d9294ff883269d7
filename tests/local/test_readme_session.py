"""docs/local-stack.md's "Using it", run as written against a stack started by ``model-release up``; then a restart.

The project is copied to a temporary folder (its tracked and untracked-but-not-ignored files, with
the two venvs linked), so the test's ``.work/stack`` never touches a developer's own stack. One bash
shell runs every command of the section in order (so ``source`` carries over) and stops at the
first that fails; each must exit 0 and print what its comment in the README says it prints. The
README itself starts the stack (``up --detach``) and stops it (``down``). The copy's wine.yaml measures
the canary's load phase as the other tests not about latency do (tests/not_about_latency.py), so the
session can run beside the rest of the suite in make test's parallel part.

The canary task's log in Airflow holds the canary's lines without great_expectations' INFO records.

Then the stack is started again, and must still hold the registered models and aliases, the store's
releases and channel history, and Airflow's run history. Both UIs answer 200 on the printed URLs;
headless Chromium saves the Airflow DAG list (showing ``model_release``) and the MLflow model page
(showing alias ``production``). A last ``down`` must leave no process of the stack, and nothing may
have been written outside ``.work/`` (no stray ``mlflow.db`` or ``mlruns``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from model_release.local import procs
from model_release.local.http import AirflowApi, answers
from model_release.local.moto_process import _MOTO_SECRET

from ..not_about_latency import LOAD
from .browser import Chromium, ensure_chromium
from .readme import commands
from .session import copy_project, read_env_file, run_session, tree, user_env

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(2400)]

PROJECT = Path(__file__).resolve().parents[2]
SHOTS = PROJECT / ".work" / "screenshots"


def _not_about_latency(spec: Path) -> None:
    """The copy's wine.yaml measures its load phase as the other tests not about latency do (tests/not_about_latency.py).

    The session runs beside the rest of the suite, whose load another worker's canary would read as a
    slower model: at the README's own 1.5x limit both releases could end inconclusive on noise. Only
    ``canary.load`` changes; every command runs as the README writes it.
    """
    import yaml

    doc = yaml.safe_load(spec.read_text())
    doc["canary"]["load"] = {**doc["canary"]["load"], **LOAD}
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))


def _by_start(results: list[dict], prefix: str) -> dict:
    return next(r for r in results if r["cmd"].text.startswith(prefix))


def _json_in(output: str) -> dict:
    """The JSON document a command printed on stdout, among the log lines it wrote to stderr."""
    decoder = json.JSONDecoder()
    for i, line in enumerate(lines := output.splitlines()):
        if line == "{":
            return dict(decoder.raw_decode("\n".join(lines[i:]))[0])
    raise AssertionError(f"no JSON document in:\n{output[-3000:]}")


def _check_outputs(results: list[dict]) -> None:
    for r in results:  # what each README comment says the command prints
        for fragment in r["cmd"].expect:
            assert fragment in r["out"], f"README line {r['cmd'].line} says it prints {fragment!r}; it printed:\n{r['out'][-3000:]}"
    first = _json_in(_by_start(results, "model-release release ")["out"])
    assert first["promoted"]["channel"] == "production" and first["canary"]["passed"] is True
    waited = _by_start(results, "model-release status --wait")["out"]
    assert "waiting for 1 run(s)" in waited and waited.rstrip().splitlines()[-1].split()[1] == "success"
    decision = _by_start(results, "model-release report ")["out"]  # the decision block, not JSON
    assert any(line.startswith("PASSED ") for line in decision.splitlines()), decision[-3000:]
    assert f"judged against release {first['release_id']} (" in decision and "(served)" in decision, \
        "version 2 was not judged against the release version 1 promoted, served beside it"
    rollback = _json_in(_by_start(results, "model-release rollback ")["out"])
    assert rollback["to_release"] == first["release_id"]
    assert _by_start(results, "python -c 'import mlflow")["out"].strip().splitlines()[-1] == "2"


def _check_canary_task_log(root: Path) -> None:
    """The canary task's log in Airflow holds the canary's own lines, not great_expectations' INFO chatter."""
    logs = sorted((root / "airflow" / "logs" / "dag_id=model_release").rglob("task_id=canary/*.log"))
    assert logs, f"no log of the canary task under {root / 'airflow' / 'logs'}"
    text = "\n".join(log.read_text(errors="replace") for log in logs)
    assert "canary: load candidate: window 1:" in text, text[-3000:]
    chatter = [line for line in text.splitlines() if "Skipping registering function" in line]
    assert chatter == [], f"{len(chatter)} INFO records of great_expectations in the canary's task log, e.g. {chatter[0][:300]}"


def _stack_id(root: Path) -> str:
    return str(json.loads((root / "stack.json").read_text())["stack_id"])


def _assert_no_process(stack_id: str, urls: list[str]) -> None:
    assert procs.marked(stack_id) == [], "model-release down left processes of the stack running"
    for url in urls:
        assert answers(url, timeout=1) is None, f"{url} still answers after down"


def test_readme_using_it_runs_as_written_and_the_stack_survives_a_restart(tmp_path: Path) -> None:
    ensure_chromium()  # before the stack starts: installing it takes about a minute
    home = tmp_path / "model-release"
    home.mkdir()
    before = copy_project(home)
    _not_about_latency(home / "releases" / "wine.yaml")
    env = user_env(home)
    root = home / ".work" / "stack"
    cmds = commands(home / "docs" / "local-stack.md")
    try:
        started = time.monotonic()
        results = run_session(home, cmds, tmp_path / "session", env, doc="docs/local-stack.md")
        session_s = time.monotonic() - started
        _check_outputs(results)
        stack = read_env_file(root / "env")
        _assert_no_process(_stack_id(root), [stack["MLFLOW_TRACKING_URI"], stack["AIRFLOW_URL"], stack["AWS_ENDPOINT_URL"]])

        secrets = {"the Airflow password": json.loads((root / "airflow" / "passwords.json").read_text())["admin"],
                   "the S3 secret key": _MOTO_SECRET}
        logs = [*(root / "logs").glob("*.log"), *(root / "airflow" / "logs").rglob("*.log")]
        for what, secret in secrets.items():
            for r in results:
                assert secret not in r["out"], f"{what} was printed by README line {r['cmd'].line}"
            for log in logs:
                assert secret not in log.read_text(errors="replace"), f"{what} is in {log}"
        assert (root / "env").stat().st_mode & 0o077 == 0
        _check_canary_task_log(root)

        # a restart, in the foreground this time, keeps the registry, the store and the run history
        log = tmp_path / "up-foreground.log"
        t0 = time.monotonic()
        with open(log, "w") as out:
            fg = subprocess.Popen([str(home / ".venv/bin/model-release"), "up"], cwd=home, env=env, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        try:
            printed = _wait_for_up(fg, log)
            warm_s = time.monotonic() - t0
            stack = read_env_file(root / "env")
            assert printed == {"mlflow": stack["MLFLOW_TRACKING_URI"], "airflow": stack["AIRFLOW_URL"],
                               "s3": stack["AWS_ENDPOINT_URL"]}, printed
            t1 = time.monotonic()
            _check_restarted(stack)
            t2 = time.monotonic()
            _check_uis(printed, stack, tmp_path / "shots")
            print(f"[readme] {t2 - t1:6.1f} s  after the restart: registry, store and run history checked")
            print(f"[readme] {time.monotonic() - t2:6.1f} s  after the restart: both UIs checked, screenshots saved")
        finally:
            t3 = time.monotonic()
            if fg.poll() is None:
                fg.send_signal(signal.SIGINT)  # Ctrl-C
                fg.wait(300)
            print(f"[readme] {time.monotonic() - t3:6.1f} s  Ctrl-C: the foreground `up` stopped the stack")
        assert fg.returncode == 0 and "[up] stopped" in log.read_text(), log.read_text()[-3000:]
        _assert_no_process(_stack_id(root), list(printed.values()))
        print(f"[readme] session {session_s:.0f} s (cold up {results[0]['seconds']:.0f} s), warm up {warm_s:.0f} s (foreground)")
    finally:  # whatever happened: nothing of the stack may keep running
        t4 = time.monotonic()
        down = subprocess.run([str(home / ".venv/bin/model-release"), "down"], cwd=home, env=env,
                              capture_output=True, text=True, timeout=300)
    print(f"[readme] {time.monotonic() - t4:6.1f} s  the last `model-release down` (nothing left to stop)")
    assert down.returncode == 0, down.stdout + down.stderr
    assert procs.marked(_stack_id(root)) == []
    stray = tree(home) - before
    assert stray == set(), f"the session wrote files outside .work/: {sorted(stray)}"


def _wait_for_up(proc: subprocess.Popen, log: Path, timeout: float = 900) -> dict[str, str]:
    """Wait for a foreground ``model-release up`` to print its URLs; returns them by service."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text()
        if "\n  stop it:" in text:  # the last line of what it prints once ready
            found = dict(re.findall(r"^  (MLflow|Airflow|S3)[^\n]*?(http://127\.0\.0\.1:\d+)", text, re.M))
            return {"mlflow": found["MLflow"], "airflow": found["Airflow"], "s3": found["S3"]}
        assert proc.poll() is None, f"model-release up exited with {proc.returncode}:\n{text[-3000:]}"
        time.sleep(0.1)
    raise AssertionError(f"model-release up printed no URLs within {timeout:.0f} s:\n{log.read_text()[-3000:]}")


def _check_restarted(stack: dict[str, str]) -> None:
    import boto3
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=stack["MLFLOW_TRACKING_URI"], registry_uri=stack["MLFLOW_TRACKING_URI"])
    model = client.get_registered_model("wine-classifier")
    # production was rolled back; the README registers without moving @candidate (no webhook-started run)
    assert model.aliases == {"production": "1"}, model.aliases

    s3 = boto3.client("s3", endpoint_url=stack["AWS_ENDPOINT_URL"], aws_access_key_id=stack["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=stack["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")
    manifests = [o["Key"] for o in s3.list_objects_v2(Bucket="model-store", Prefix="wine/releases/")["Contents"]
                 if o["Key"].endswith("/release.json")]
    assert len(manifests) == 2, manifests
    history = subprocess.run([sys.executable, "-m", "model_release.cli", "store", "history", "--store", "s3://model-store/wine"],
                             env={**os.environ, **stack}, capture_output=True, text=True, timeout=120)
    assert history.returncode == 0, history.stderr
    assert len(json.loads(history.stdout)) == 3  # two promotions and the rollback

    api = AirflowApi(stack["AIRFLOW_URL"], stack["AIRFLOW_USERNAME"], stack["AIRFLOW_PASSWORD"])
    runs = api.get("/api/v2/dags/model_release/dagRuns")
    assert runs["total_entries"] == 1 and runs["dag_runs"][0]["state"] == "success"
    assert runs["dag_runs"][0]["conf"] == {"spec": "releases/wine.yaml", "version": 2}
    # nothing started the spec's own DAG behind the session's back: each release was started by hand, once
    assert api.get("/api/v2/dags/model_release__wine/dagRuns")["total_entries"] == 0


def _check_uis(printed: dict[str, str], stack: dict[str, str], shots: Path) -> None:
    mlflow_url, airflow_url = printed["mlflow"], printed["airflow"]
    for url in (mlflow_url + "/", airflow_url + "/", airflow_url + "/api/v2/monitor/health"):
        with urllib.request.urlopen(url, timeout=30) as resp:
            assert resp.status == 200, url
    api = AirflowApi(airflow_url, stack["AIRFLOW_USERNAME"], stack["AIRFLOW_PASSWORD"])
    with Chromium() as browser:
        browser.set_cookie(airflow_url, "_token", api.token())
        dags = browser.screenshot(airflow_url + "/dags", shots / "airflow-dags.png", expect=["model_release", " Dags\nSort by"])
        page = browser.screenshot(mlflow_url + "/#/models/wine-classifier", shots / "mlflow-wine-classifier.png",
                                  expect=["wine-classifier", "@ production"])
    assert "Sign in" not in dags and "model_release.channel" in page
    for png in shots.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000, png
    SHOTS.mkdir(parents=True, exist_ok=True)
    for png in shots.glob("*.png"):
        shutil.copy2(png, SHOTS / png.name)
    print(f"[readme] screenshots: {sorted(str(SHOTS / p.name) for p in shots.glob('*.png'))}")
