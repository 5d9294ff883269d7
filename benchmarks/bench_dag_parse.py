"""What a DAG file using model-release costs each parse, against a DAG of plain ``@task`` functions.

Every DAG file is parsed again and again (the dag-processor, each task's worker), so the release's
DAG files must parse without MLflow, ONNX, torch or scikit-learn. Each figure is the median over
fresh interpreters, taken in turns, of the time to run the file after ``import airflow.sdk`` (what
every DAG file pays anyway). The baseline, measured in the same run: a DAG of the release's nine
tasks as plain ``@task`` functions chained the same way, importing nothing but Airflow. Also
printed: ``import model_release.airflow`` alone (what importing the package costs before any name
is used).

    .venv/bin/python benchmarks/bench_dag_parse.py [--repeat 9]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: the baseline: the release's shape with plain tasks
PLAIN = '''
from airflow.sdk import DAG, task

with DAG("plain_release", schedule=None):
    ids = ["start", "intake", "export", "tensorrt", "assemble", "canary", "promote", "rollout"]
    tasks = [task(task_id=i)(lambda ref=None: ref)() for i in ids]
    for up, down in zip(tasks, tasks[1:]):
        up >> down
    tasks[0] >> task(task_id="finish", trigger_rule="all_done")(lambda: None)()
'''
#: a user's DAG file (README, "Your own DAG")
USER = '''
from airflow.sdk import DAG

from model_release.airflow import release_task_group

with DAG("team_release", schedule=None):
    release_task_group("iris.yaml")
'''
_PROBE = r'''
import importlib.util, json, sys, time
if sys.argv[1] == "--package":
    t = time.perf_counter()
    import model_release.airflow
    print(json.dumps({"s": time.perf_counter() - t, "heavy": []}))
    raise SystemExit
import airflow.sdk
t = time.perf_counter()
spec = importlib.util.spec_from_file_location("dagfile", sys.argv[1])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
heavy = sorted(m for m in ("mlflow", "onnx", "torch", "sklearn", "numpy") if m in sys.modules)
print(json.dumps({"s": time.perf_counter() - t, "heavy": heavy}))
'''


def _once(target: str) -> dict:
    env = {**os.environ, "MODEL_RELEASE_HOME": str(ROOT), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    ran = subprocess.run([sys.executable, "-c", _PROBE, target], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=300)
    if ran.returncode != 0:
        sys.exit(f"parsing {target} failed:\n{ran.stderr[-3000:]}")
    return json.loads(ran.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9, help="fresh interpreters per file (the median is shown)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "plain.py").write_text(PLAIN)
        (Path(tmp) / "user.py").write_text(USER)
        files = {"plain @task DAG (baseline)": str(Path(tmp) / "plain.py"), "user DAG, release_task_group": str(Path(tmp) / "user.py"),
                 "dags/model_release.py": str(ROOT / "dags" / "model_release.py"),
                 "dags/model_release_scheduled.py": str(ROOT / "dags" / "model_release_scheduled.py"),
                 "import model_release.airflow alone": "--package"}
        seen: dict[str, list[dict]] = {name: [] for name in files}
        for _ in range(args.repeat):  # in turns, so a change in the machine's load falls on every file alike
            for name, target in files.items():
                seen[name].append(_once(target))
    base = statistics.median(r["s"] for r in seen["plain @task DAG (baseline)"])
    for name, runs in seen.items():
        median = statistics.median(r["s"] for r in runs)
        heavy = sorted({m for r in runs for m in r["heavy"]})
        print(f"{name:36s} {median * 1000:7.1f} ms   {median / base:5.2f}x baseline"
              + (f"   imported {heavy}" if heavy else ""))
    print(f"(median of {args.repeat} fresh interpreters each, after `import airflow.sdk`; load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
