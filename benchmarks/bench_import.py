"""What a DAG file pays to import model-release's Airflow side, on top of ``import airflow.sdk``.

Every DAG parse (the dag-processor, each task's start) imports the DAG file; a user's file imports
``airflow.sdk`` and then ``model_release.airflow`` (its factory). Airflow's own import is the baseline,
measured in the same run: fresh interpreters, alternating, each timing only the step named, after what
comes first (``time.perf_counter`` around it: neither the interpreter's start-up nor Airflow's import is
counted in the later steps), the median of ``--repeat`` each, and the modules the step added. Also the
provider's info alone (``get_provider_info``), which Airflow itself loads in every process through the
entry point: ``import airflow.sdk`` already imports ``model_release.airflow.provider``.

    .venv/bin/python benchmarks/bench_import.py [--repeat 15] [--python PATH]

``--python`` measures another venv's interpreter (an installed wheel, e.g. tests/package's).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

#: case -> (what runs first, untimed; what is timed)
CASES = {
    "import airflow.sdk": ("", "import airflow.sdk"),
    "then import model_release.airflow": ("import airflow.sdk", "import model_release.airflow"),
    "then the factory": ("import airflow.sdk", "from model_release.airflow import release_task_group"),
    "the provider's info, alone": ("", "from model_release.airflow.provider import get_provider_info\nget_provider_info()"),
}

PROBE = """
import json, sys, time
exec(compile(sys.argv[1], "<setup>", "exec"), {})
before = len(sys.modules)
t = time.perf_counter()
try:
    exec(compile(sys.argv[2], "<bench>", "exec"), {})
except ImportError as exc:
    print(json.dumps({"error": str(exc)}))
else:
    print(json.dumps({"seconds": time.perf_counter() - t, "modules": len(sys.modules) - before}))
"""


def once(python: str, setup: str, code: str) -> dict:
    out = subprocess.run([python, "-c", PROBE, setup, code], capture_output=True, text=True, check=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    for setup, code in CASES.values():  # warm: bytecode written, files in the page cache
        once(args.python, setup, code)
    samples: dict[str, list[dict]] = {name: [] for name in CASES}
    for _ in range(args.repeat):
        for name, (setup, code) in CASES.items():
            samples[name].append(once(args.python, setup, code))
    base = statistics.median(s["seconds"] for s in samples["import airflow.sdk"])
    print(f"{'case':36} {'median ms':>10} {'new modules':>12} {'of airflow.sdk':>15}")
    for name, runs in samples.items():
        if "error" in runs[0]:
            print(f"{name:36} not importable here: {runs[0]['error']}")
            continue
        median = statistics.median(s["seconds"] for s in runs)
        print(f"{name:36} {median * 1000:10.1f} {runs[0]['modules']:12d} {median / base:15.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
