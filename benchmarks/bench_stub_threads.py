"""The local Triton's python stubs with one OpenBLAS thread (the default) against a thread per core, in one run.

Every instance of a python-backend model is a stub process of its own, which imports numpy; numpy's
OpenBLAS starts a thread per core in each at import. :class:`~model_release.triton.local.LocalTriton`
gives every stub ``OPENBLAS_NUM_THREADS=1`` unless the caller's environment sets it
(``STUB_THREADS_ENV``). This starts the local Triton over the canary tests' iris repository (the ONNX
leaf through the onnxruntime shim and ``--models`` python postprocess pipelines), loads every pipeline,
answers ``--requests`` requests on each, stops, and counts the CPU the server and its stubs spent
(``RUSAGE_CHILDREN``, read once the server is reaped). Rounds alternate between the default and
``OPENBLAS_NUM_THREADS`` set to the core count (what OpenBLAS does by itself); the medians and their
ratio are printed::

    .venv/bin/python benchmarks/bench_stub_threads.py [--rounds 5] [--models 4] [--requests 20]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from model_release.triton.local import LocalTriton, STUB_THREADS_ENV  # noqa: E402
from model_release.triton.shim import prepare_canary_repository  # noqa: E402
from tests.canary.support import INPUT, train_iris, write_leaf, write_pipeline  # noqa: E402


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_round(repository: Path, names: list[str], requests: int, env: dict[str, str]) -> tuple[float, float]:
    """CPU-s of the server and its stubs, and wall seconds, for one start, load, serve and stop."""
    import tritonclient.http as httpclient

    x = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    before, t0 = _children_cpu(), time.perf_counter()
    with LocalTriton(repository, env=env) as triton:
        client = triton.client()
        for name in names:
            client.load_model(name)
        for name in names:
            for _ in range(requests):
                inp = httpclient.InferInput(INPUT, list(x.shape), "FP32")
                inp.set_data_from_numpy(x)
                client.infer(name, [inp])
    return _children_cpu() - before, time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--models", type=int, default=4, help="python postprocess pipelines loaded each round")
    parser.add_argument("--requests", type=int, default=20, help="requests answered by each pipeline each round")
    args = parser.parse_args()
    for var in STUB_THREADS_ENV:  # the default rounds must get LocalTriton's own value
        if os.environ.pop(var, None) is not None:
            print(f"{var} is set in this environment: left out of this run")
    cores = os.cpu_count() or 1
    settings = {"default (one OpenBLAS thread)": {}, f"a thread per core ({cores})": {"OPENBLAS_NUM_THREADS": str(cores)}}
    with tempfile.TemporaryDirectory(prefix="bench-stubs-") as tmp:
        work = Path(tmp)
        onnx_path, _, _ = train_iris(work / "train")
        repo = work / "repository"
        write_leaf(repo, onnx_path)
        names = [f"iris_{i}" for i in range(args.models)]
        for name in names:
            write_pipeline(repo, name)
        copy = prepare_canary_repository(repo, work / "served").path
        stubs = 1 + args.models
        print(f"{args.rounds} rounds: start, load {args.models} pipelines ({stubs} python stubs), "
              f"{args.requests} requests each, stop; {cores} cores", flush=True)
        cpu: dict[str, list[float]] = {k: [] for k in settings}
        for r in range(args.rounds):
            for label, env in settings.items():
                spent, wall = one_round(copy, names, args.requests, env)
                cpu[label].append(spent)
                print(f"  round {r + 1}: {label:32s} {spent:6.2f} CPU-s in {wall:5.2f} s", flush=True)
    default, threaded = (statistics.median(v) for v in cpu.values())
    print(f"median CPU-s a round: default {default:.2f}, a thread per core {threaded:.2f}; "
          f"per stub {(threaded - default) / stubs:.3f} CPU-s saved; ratio default/threaded {default / threaded:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
