"""The canary's load phase against perf_analyzer, against a sequential loop, and its memory: one run, one server.

Serves the iris classifier pipeline of the canary tests (ONNX leaf through the python-backend
onnxruntime shim, python postprocess, ensemble) on the local Triton, then measures on that one
endpoint and model, at the same concurrency and request batch size:

1. the load phase (:mod:`model_release.canary.measure.load`, windows until p50/p99 are stable, wired
   as the canary wires it: :func:`model_release.canary.measure.latency.load_runner`, the server's
   statistics read around every window) and Triton's own load generator, perf_analyzer (from the
   ``tritonclient==2.51.0`` wheel, set up here as ENVIRONMENT.md describes: a scratch venv,
   ``nvidia-cuda-runtime-cu12``, Debian's ``libb64-0d``), ``--repeats`` rounds, which of the two
   goes first alternating round by round: throughput ratio (target >= 1.0x) and p99 ratio (target
   <= 1.0x), medians, each beside the client CPU per request of each (the load phase: this process's
   CPU time; perf_analyzer: its process's; each over the requests Triton counted served during the
   run, warm-up included). On a 2-core canary the client's CPU is taken from Triton, so it decides
   the figures; the machine's load average is printed before and after, since other work moves them;
2. the load phase against a sequential ``client.infer`` loop sending the golden rows one request
   per row (the script a release engineer would otherwise write; target >= 10x), and, for
   reference, a sequential loop sending the same ``--batch-rows`` batches;
3. the load phase's peak Python memory (tracemalloc) with a 100k-row golden set against 1k rows
   (target <= 1.1x).

Each figure is printed with the command that reproduces it::

    .venv/bin/python benchmarks/bench_canary.py --concurrency 4 --batch-rows 16 --repeats 5
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
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

from model_release.canary.measure.latency import load_runner  # noqa: E402
from model_release.canary.measure.load import measure  # noqa: E402
from model_release.spec import LoadSpec  # noqa: E402
from model_release.triton.client import TritonHttpClient  # noqa: E402
from model_release.triton.local import LocalTriton  # noqa: E402
from model_release.triton.server import TritonServer  # noqa: E402
from model_release.triton.shim import prepare_canary_repository  # noqa: E402
from tests.canary.support import INPUT, train_iris, write_leaf, write_pipeline  # noqa: E402

PA_VENV = ROOT / ".work" / "bench" / "perf-analyzer"
OUTPUTS = ["probabilities", "label"]
#: perf_analyzer exits 2 when 20 windows did not settle (a busy machine): a round tries it this many times
PA_ATTEMPTS = 3


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


def served(server: TritonServer, model: str) -> int:
    """Requests Triton counts served for ``model`` so far."""
    return int(server.statistics().get(model, {}).get("success_count", 0))


def run_perf_analyzer(binary: Path, env: dict[str, str], server: TritonServer, model: str, args: argparse.Namespace,
                      out: Path) -> dict:
    cmd = [str(binary), "-m", model, "-u", server.url, "-i", "http", "-b", str(args.batch_rows),
           "--concurrency-range", f"{args.concurrency}:{args.concurrency}", "--measurement-interval", str(int(args.window_s * 1000)),
           "--stability-percentage", "25", "--max-trials", "20", "-f", str(out)]
    for attempt in range(1, PA_ATTEMPTS + 1):
        before, cpu = served(server, model), _children_cpu()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        cpu, requests = _children_cpu() - cpu, served(server, model) - before
        if proc.returncode == 0:
            break
        if "Failed to obtain stable measurement" not in proc.stdout or attempt == PA_ATTEMPTS:
            raise SystemExit(f"perf_analyzer failed ({proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        print(f"  perf_analyzer did not settle within 20 windows (try {attempt} of {PA_ATTEMPTS}); once more", flush=True)
    with open(out) as f:
        row = next(csv.DictReader(f))
    return {"throughput_rows_per_s": float(row["Inferences/Second"]), "p99_ms": float(row["p99 latency"]) / 1e3,
            "p50_ms": float(row["p50 latency"]) / 1e3, "command": " ".join(cmd), "cpu_us_per_request": cpu / requests * 1e6,
            "served": requests}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load_phase(server: TritonServer, golden: dict[str, np.ndarray], args: argparse.Namespace, *, budget_s: float | None = None,
               settle: bool = True) -> dict:
    """The load phase's figures and client CPU; ``settle=False`` runs the whole budget (the same windows whatever the golden set)."""
    load = LoadSpec(concurrency=args.concurrency, batch_rows=args.batch_rows, window_s=args.window_s,
                    budget_s=budget_s or args.budget_s)
    runner = load_runner(server.url, server, {"iris": server.entry("iris")}, golden, load)
    before, cpu = served(server, "iris"), time.process_time()
    try:
        # the same stability rule as perf_analyzer's run below (3 windows within 25%), so both settle alike
        result = measure(runner, ["iris"], warmup_s=1.0, window_s=args.window_s, stable_windows=3,
                         stability=0.25 if settle else 1e-9, budget_s=budget_s or args.budget_s)["iris"]
    finally:
        runner.close()
    cpu, requests = time.process_time() - cpu, served(server, "iris") - before
    return {**result.figures(3), "cpu_us_per_request": cpu / requests * 1e6, "served": requests}


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


def peak_memory(server: TritonServer, x: np.ndarray, rows: int, args: argparse.Namespace) -> int:
    golden = {INPUT: np.resize(x, (rows, x.shape[1])).astype(np.float32)}
    tracemalloc.start()
    tracemalloc.reset_peak()
    load_phase(server, golden, args, budget_s=3 * args.window_s, settle=False)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--batch-rows", type=int, default=16)
    parser.add_argument("--window-s", type=float, default=2.0)
    parser.add_argument("--budget-s", type=float, default=20.0)
    parser.add_argument("--repeats", type=int, default=5, help="rounds of both, alternating which goes first (at least 3)")
    args = parser.parse_args(argv)
    if args.repeats < 3:
        parser.error(f"--repeats {args.repeats}: at least 3 rounds, so that a median means something")
    command = (f".venv/bin/python benchmarks/bench_canary.py --concurrency {args.concurrency} --batch-rows {args.batch_rows} "
               f"--repeats {args.repeats}")
    binary, env = perf_analyzer()
    load_before = os.getloadavg()

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
            server = TritonServer(triton.http_url)
            ours, theirs = [], []
            for i in range(args.repeats):  # alternating which goes first, so the machine's drift falls on both
                runs = [lambda: ours.append(load_phase(server, {INPUT: x}, args)),
                        lambda: theirs.append(run_perf_analyzer(binary, env, server, "iris", args, work / f"pa-{i}.csv"))]
                for run in runs if i % 2 == 0 else runs[::-1]:
                    run()
                first = "load phase" if i % 2 == 0 else "perf_analyzer"
                print(f"round {i + 1} ({first} first): load phase {_line_of(ours[-1])} | perf_analyzer {_line_of(theirs[-1])}",
                      flush=True)
            naive = sequential(triton.http_url, x, 1, 5.0)
            batched = sequential(triton.http_url, x, args.batch_rows, 5.0)
            small, large = peak_memory(server, x, 1_000, args), peak_memory(server, x, 100_000, args)
            server.close()
    shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()

    def med(items: list[dict], key: str) -> float:
        return statistics.median(i[key] for i in items)

    o_tput, p_tput = med(ours, "throughput_rows_per_s"), med(theirs, "throughput_rows_per_s")
    o_p99, p_p99 = med(ours, "p99_ms"), med(theirs, "p99_ms")
    o_cpu, p_cpu = med(ours, "cpu_us_per_request"), med(theirs, "cpu_us_per_request")
    print(f"endpoint: the iris ensemble on the local CPU Triton (python-backend onnxruntime shim); concurrency "
          f"{args.concurrency}, {args.batch_rows} rows per request, {args.window_s:g} s windows; medians of {args.repeats} "
          f"rounds, alternating which went first; {os.cpu_count()} CPUs")
    print(f"machine load average (1, 5, 15 min): before {_loadavg(load_before)}, after {_loadavg(load_after)}")
    print(f"load phase:    {o_tput:10.0f} rows/s   p50 {med(ours, 'p50_ms'):.2f} ms   p99 {o_p99:.2f} ms   "
          f"client CPU {o_cpu:.0f} us/request   (stable: {[o['stable'] for o in ours]})")
    print(f"perf_analyzer: {p_tput:10.0f} rows/s   p50 {med(theirs, 'p50_ms'):.2f} ms   p99 {p_p99:.2f} ms   "
          f"client CPU {p_cpu:.0f} us/request")
    print(f"  perf_analyzer command: {theirs[-1]['command']}")
    print(f"throughput, load phase / perf_analyzer: {o_tput / p_tput:.2f}x (target >= 1.0x)")
    print(f"p99, load phase / perf_analyzer: {o_p99 / p_p99:.2f}x (target <= 1.0x)")
    print(f"client CPU per request, load phase / perf_analyzer: {o_cpu / p_cpu:.2f}x (target <= 1.0x)")
    print(f"sequential client.infer loop, one row per request: {naive:.0f} rows/s; load phase / it: {o_tput / naive:.1f}x (target >= 10x)")
    print(f"  for reference, sequential loop of {args.batch_rows}-row requests: {batched:.0f} rows/s; load phase / it: {o_tput / batched:.1f}x")
    print(f"peak memory of the load phase: {small / 2**20:.2f} MiB at 1k golden rows, {large / 2**20:.2f} MiB at 100k: "
          f"{large / small:.2f}x (target <= 1.1x)")
    print(f"reproduce: {command}")
    return 0


def _line_of(figures: dict) -> str:
    return (f"{figures['throughput_rows_per_s']:.0f} rows/s, p99 {figures['p99_ms']:.2f} ms, "
            f"client CPU {figures['cpu_us_per_request']:.0f} us/request over {figures['served']} requests")


def _loadavg(values: tuple[float, float, float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


if __name__ == "__main__":
    raise SystemExit(main())
