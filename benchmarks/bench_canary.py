"""The canary's load phase against perf_analyzer, against a sequential loop, and its memory: one run, one server.

Serves the iris classifier pipeline of the canary tests (ONNX leaf through the python-backend
onnxruntime shim, python postprocess, ensemble) on the local Triton, then measures on that one
endpoint and model, at the same concurrency and request batch size:

1. the load phase (:mod:`model_release.canary.load`, windows until p50/p99 are stable) and
   Triton's own load generator, perf_analyzer (from the ``tritonclient==2.51.0`` wheel, set up here
   as ENVIRONMENT.md describes: a scratch venv, ``nvidia-cuda-runtime-cu12``, Debian's
   ``libb64-0d``), alternating ``--repeats`` times: throughput ratio (target >= 0.9x) and p99
   within 15% of perf_analyzer's;
2. the load phase against a sequential ``client.infer`` loop sending the golden rows one request
   per row (the script a release engineer would otherwise write; target >= 10x), and, for
   reference, a sequential loop sending the same ``--batch-rows`` batches;
3. the load phase's peak Python memory (tracemalloc) with a 100k-row golden set against 1k rows
   (target <= 1.1x).

Each figure is printed with the command that reproduces it::

    .venv/bin/python benchmarks/bench_canary.py --concurrency 4 --batch-rows 16
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from model_release.triton.client import TritonHttpClient  # noqa: E402
from model_release.canary.load import LoadRunner, TritonRequester, measure, request_batches  # noqa: E402
from model_release.triton.shim import prepare_canary_repository  # noqa: E402
from model_release.triton.local import LocalTriton  # noqa: E402
from tests.canary.support import INPUT, train_iris, write_leaf, write_pipeline  # noqa: E402

PA_VENV = ROOT / ".work" / "bench" / "perf-analyzer"
OUTPUTS = ["probabilities", "label"]


def perf_analyzer() -> tuple[Path, dict[str, str]]:
    """perf_analyzer 2.51 from the tritonclient wheel in a scratch venv (created once), and its environment."""
    binary = PA_VENV / "bin" / "perf_analyzer"
    if not binary.exists():
        print("[setup] perf_analyzer: a scratch venv with tritonclient==2.51.0 (no deps) and nvidia-cuda-runtime-cu12", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(PA_VENV)], check=True)
        subprocess.run([str(PA_VENV / "bin" / "pip"), "install", "-q", "--no-deps", "tritonclient==2.51.0",
                        "nvidia-cuda-runtime-cu12"], check=True)
    if subprocess.run(["dpkg", "-s", "libb64-0d"], capture_output=True).returncode != 0:
        print("[setup] perf_analyzer needs Debian's libb64-0d: apt-get install -y libb64-0d", flush=True)
        subprocess.run(["apt-get", "install", "-y", "-q", "libb64-0d"], check=True, capture_output=True)
    cudart = next(PA_VENV.glob("lib/python3*/site-packages/nvidia/cuda_runtime/lib"))
    env = {**os.environ, "LD_LIBRARY_PATH": f"{cudart}:{os.environ.get('LD_LIBRARY_PATH', '')}"}
    return binary, env


def run_perf_analyzer(binary: Path, env: dict[str, str], url: str, model: str, args: argparse.Namespace, out: Path) -> dict[str, float]:
    cmd = [str(binary), "-m", model, "-u", url, "-i", "http", "-b", str(args.batch_rows),
           "--concurrency-range", f"{args.concurrency}:{args.concurrency}", "--measurement-interval", str(int(args.window_s * 1000)),
           "--stability-percentage", "25", "--max-trials", "20", "-f", str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"perf_analyzer failed ({proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    with open(out) as f:
        row = next(csv.DictReader(f))
    return {"throughput_rows_per_s": float(row["Inferences/Second"]), "p99_ms": float(row["p99 latency"]) / 1e3,
            "p50_ms": float(row["p50 latency"]) / 1e3, "command": " ".join(cmd)}


def load_phase(url: str, golden: dict[str, np.ndarray], args: argparse.Namespace, *, budget_s: float | None = None,
               settle: bool = True) -> dict:
    """The load phase's figures; ``settle=False`` runs the whole budget (the same windows whatever the golden set)."""
    batches = request_batches(golden, args.batch_rows)
    runner = LoadRunner(lambda t: TritonRequester(url, "iris", {INPUT: "FP32"}, OUTPUTS, batches, 30.0),
                        concurrency=args.concurrency, batch_rows=args.batch_rows)
    try:
        # the same stability rule as perf_analyzer's run below (3 windows within 25%), so both settle alike
        result = measure(runner, ["iris"], warmup_s=1.0, window_s=args.window_s, stable_windows=3, stability=0.25 if settle else 0.0,
                         budget_s=budget_s or args.budget_s)["iris"]
    finally:
        runner.close()
    return result.figures(3)


def sequential(url: str, rows: np.ndarray, per_request: int, seconds: float) -> float:
    """Rows/s of a plain ``client.infer`` loop: one tritonclient.http client, ``per_request`` rows per call."""
    client = TritonHttpClient(url, "iris", {INPUT: "FP32"}, OUTPUTS)
    sent, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        first = (sent * per_request) % (len(rows) - per_request + 1)
        client.infer({INPUT: rows[first:first + per_request]})
        sent += 1
    elapsed = time.perf_counter() - start
    client.close()
    return sent * per_request / elapsed


def peak_memory(url: str, x: np.ndarray, rows: int, args: argparse.Namespace) -> int:
    golden = {INPUT: np.resize(x, (rows, x.shape[1])).astype(np.float32)}
    tracemalloc.start()
    tracemalloc.reset_peak()
    load_phase(url, golden, args, budget_s=3 * args.window_s, settle=False)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--batch-rows", type=int, default=16)
    parser.add_argument("--window-s", type=float, default=2.0)
    parser.add_argument("--budget-s", type=float, default=20.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    command = f".venv/bin/python benchmarks/bench_canary.py --concurrency {args.concurrency} --batch-rows {args.batch_rows}"
    binary, env = perf_analyzer()

    with tempfile.TemporaryDirectory(prefix="bench-canary-") as tmp:
        work = Path(tmp)
        onnx_path, golden, _ = train_iris(work / "train")
        repo = work / "repository"
        write_leaf(repo, onnx_path)
        write_pipeline(repo, "iris")
        copy = prepare_canary_repository(repo, work / "canary")
        x = golden[INPUT]
        with LocalTriton(copy.path, work_dir=work / "server") as triton:
            client = triton.client()
            client.load_model("iris")
            url = triton.http_url
            ours, theirs = [], []
            for i in range(args.repeats):  # alternating, so the machine's drift falls on both
                ours.append(load_phase(url, {INPUT: x}, args))
                theirs.append(run_perf_analyzer(binary, env, url, "iris", args, work / f"pa-{i}.csv"))
            naive = sequential(url, x, 1, 5.0)
            batched = sequential(url, x, args.batch_rows, 5.0)
            small, large = peak_memory(url, x, 1_000, args), peak_memory(url, x, 100_000, args)
    shutil.rmtree(work, ignore_errors=True)

    def med(items: list[dict], key: str) -> float:
        return statistics.median(i[key] for i in items)

    o_tput, p_tput = med(ours, "throughput_rows_per_s"), med(theirs, "throughput_rows_per_s")
    o_p99, p_p99 = med(ours, "p99_ms"), med(theirs, "p99_ms")
    print(f"endpoint: the iris ensemble on the local CPU Triton (python-backend onnxruntime shim); concurrency "
          f"{args.concurrency}, {args.batch_rows} rows per request, {args.window_s:g} s windows; medians of {args.repeats} alternating repeats")
    print(f"load phase:    {o_tput:10.0f} rows/s   p50 {med(ours, 'p50_ms'):.2f} ms   p99 {o_p99:.2f} ms   "
          f"(stable: {[o['stable'] for o in ours]})")
    print(f"perf_analyzer: {p_tput:10.0f} rows/s   p50 {med(theirs, 'p50_ms'):.2f} ms   p99 {p_p99:.2f} ms")
    print(f"  perf_analyzer command: {theirs[-1]['command']}")
    print(f"throughput, load phase / perf_analyzer: {o_tput / p_tput:.2f}x (target >= 0.9x)")
    print(f"p99, load phase vs perf_analyzer: {o_p99 / p_p99 - 1:+.1%} (target within 15%)")
    print(f"sequential client.infer loop, one row per request: {naive:.0f} rows/s; load phase / it: {o_tput / naive:.1f}x (target >= 10x)")
    print(f"  for reference, sequential loop of {args.batch_rows}-row requests: {batched:.0f} rows/s; load phase / it: {o_tput / batched:.1f}x")
    print(f"peak memory of the load phase: {small / 2**20:.2f} MiB at 1k golden rows, {large / 2**20:.2f} MiB at 100k: "
          f"{large / small:.2f}x (target <= 1.1x)")
    print(f"reproduce: {command}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
