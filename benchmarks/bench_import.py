"""What a DAG file pays to import model-release's Airflow side, on top of ``import airflow.sdk``.

Every DAG parse (the dag-processor, each task's start) imports the DAG file; a user's file imports
``airflow.sdk`` and ``model_release.airflow``. Airflow's own import is the baseline, measured in the same
run: fresh interpreters, alternating, each timing its imports from inside (``time.perf_counter`` around
them, so the interpreter's start-up is not counted), the median of ``--repeat`` each. Also what Airflow
runs in every CLI process that lists providers: the provider's info (``get_provider_info``).

    .venv/bin/python benchmarks/bench_import.py [--repeat 15] [--python PATH]

``--python`` measures another venv's interpreter (an installed wheel, e.g. tests/package's).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CASES = {
    "airflow.sdk": "import airflow.sdk",
    "airflow.sdk + model_release.airflow": "import airflow.sdk\nimport model_release.airflow",
    "airflow.sdk + the factory": "import airflow.sdk\nfrom model_release.airflow import release_task_group",
    "the provider's info": "from model_release.airflow.provider import get_provider_info\nget_provider_info()",
}

PROBE = """
import json, sys, time
code = sys.argv[1]
t = time.perf_counter()
try:
    exec(compile(code, "<bench>", "exec"), {})
except ImportError as exc:
    print(json.dumps({"error": str(exc)}))
else:
    print(json.dumps({"seconds": time.perf_counter() - t, "modules": len(sys.modules)}))
"""


def once(python: str, code: str) -> dict:
    out = subprocess.run([python, "-c", PROBE, code], capture_output=True, text=True, check=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    for code in CASES.values():  # warm: bytecode written, files in the page cache
        once(args.python, code)
    samples: dict[str, list[dict]] = {name: [] for name in CASES}
    for _ in range(args.repeat):
        for name, code in CASES.items():
            samples[name].append(once(args.python, code))
    base = statistics.median(s["seconds"] for s in samples["airflow.sdk"])
    print(f"{'case':40} {'median ms':>10} {'modules':>8} {'vs airflow.sdk':>15}")
    for name, runs in samples.items():
        if "error" in runs[0]:
            print(f"{name:40} not importable here: {runs[0]['error']}")
            continue
        median = statistics.median(s["seconds"] for s in runs)
        extra = "" if name == "airflow.sdk" or name.startswith("the provider") else f"+{(median - base) * 1000:.0f} ms ({median / base:.2f}x)"
        print(f"{name:40} {median * 1000:10.0f} {runs[0]['modules']:8d} {extra:>15}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
