"""docs/getting-started.md's session, run as written: a model of the reader's own, from MLflow to a served answer.

The project is copied to a temporary folder (as the README session test does) and one bash shell runs
every command of the page's "The session" section in order; each must exit 0 and print what its comment
says. The page trains a breast-cancer classifier no example ships, makes its golden set from a pandas
DataFrame, writes its spec from scratch, releases it, waits for the two serving Tritons to serve it, and
asks one of them with tritonclient (its answer compared with the model's own predict_proba) and with curl.
Afterwards: the served answer's labels are the spec's, the store holds the release the channel names, and
no process of the stack is left.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from model_release.local import procs

from ..not_about_latency import LOAD
from .readme import commands
from .session import copy_project, read_env_file, run_session, tree, user_env

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(2400)]

DOC = Path("docs/getting-started.md")


def _by_start(results: list[dict], prefix: str) -> dict:
    return next(r for r in results if r["cmd"].text.startswith(prefix))


def _quiet_load(cmds):  # noqa: ANN001, ANN202
    """The spec's load phase measured as the suite's other tests not about latency do: the session runs beside
    them, whose load a latency gate would read as a slower model. Only the here-document's spec changes."""
    extra = "\n".join(["  load:", *(f"    {k}: {json.dumps(v)}" for k, v in LOAD.items())])
    for cmd in cmds:
        if cmd.text.startswith("cat > my-release/cancer.yaml"):
            cmd.text = cmd.text.replace("\ncanary:\n", f"\ncanary:\n{extra}\n", 1)
    return cmds


def test_getting_started_runs_as_written_and_the_served_model_answers_as_the_model_does(tmp_path: Path) -> None:
    home = tmp_path / "model-release"
    home.mkdir()
    before = copy_project(home)
    env = user_env(home)
    root = home / ".work" / "stack"
    cmds = _quiet_load(commands(home / DOC, "The session"))
    assert len(cmds) >= 9, [c.first_line for c in cmds]
    try:
        results = run_session(home, cmds, tmp_path / "session", env, doc=str(DOC))
        for r in results:  # what each comment of the page says the command prints
            for fragment in r["cmd"].expect:
                assert fragment in r["out"], f"{DOC} line {r['cmd'].line} says it prints {fragment!r}:\n{r['out'][-3000:]}"
        released = _by_start(results, "model-release release ")["out"]
        outcome = json.loads(released[released.index("{\n"):])
        assert outcome["promoted"]["channel"] == "production" and outcome["canary"]["passed"] is True
        served = _by_start(results, "python - <<'EOF'  # prints `answers match")["out"]
        labels = json.loads(served.split("labels: ", 1)[1].splitlines()[0].replace("'", '"'))
        assert len(labels) == 8 and set(labels) <= {"malignant", "benign"}, served
        curl = json.loads(_by_start(results, "curl ")["out"])
        label = next(o for o in curl["outputs"] if o["name"] == "label")
        assert label["datatype"] == "BYTES" and label["data"][0] in ("malignant", "benign"), curl
        fleet = json.loads(_by_start(results, "model-release fleet status")["out"])
        assert [(s["server"], s["ready"], s["release"]) for s in fleet["servers"]] == [
            ("serve-1", True, outcome["release_id"]), ("serve-2", True, outcome["release_id"])]
    finally:  # whatever happened: nothing of the stack may keep running
        down = subprocess.run([str(home / ".venv/bin/model-release"), "down"], cwd=home, env=env,
                              capture_output=True, text=True, timeout=300)
    assert down.returncode == 0, down.stdout + down.stderr
    stack_id = json.loads((root / "stack.json").read_text())["stack_id"]
    assert procs.marked(stack_id) == []
    stray = tree(home) - before
    assert stray <= {"my-release", *(f"my-release/{n}" for n in (
        "golden-rows.parquet", "cancer-golden.npz", "cancer.yaml", "request.json"))}, sorted(stray)
    assert read_env_file(root / "env")["MODEL_RELEASE_SERVE_STORE"] == "s3://model-store/cancer"
