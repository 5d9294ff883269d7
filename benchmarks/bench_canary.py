"""Canary replay throughput: bounded concurrency vs a sequential loop, same golden set, same server, one run.

Builds the iris classifier repository of the canary tests (ONNX leaf through the python-backend
onnxruntime shim, python postprocess, ensemble), serves it on the local Triton, and replays a
golden set of ``--rows`` rows in ``--batch-rows`` requests, alternating a sequential loop
(concurrency 1) and ``--concurrency`` threads (one client each), ``--repeats`` times each. Prints
the median throughput and p99 of each and their ratio::

    .venv/bin/python benchmarks/bench_canary.py --concurrency 4 --rows 4096 --batch-rows 32
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from model_release.canary.client import TritonHttpClient, replay  # noqa: E402
from model_release.canary.shim import prepare_canary_repository  # noqa: E402
from model_release.local.triton import LocalTriton  # noqa: E402
from tests.canary.support import INPUT, train_iris, write_leaf, write_pipeline  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--batch-rows", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench-canary-") as tmp:
        work = Path(tmp)
        onnx_path, golden, _ = train_iris(work / "train")
        repo = work / "repository"
        write_leaf(repo, onnx_path)
        write_pipeline(repo, "iris")
        copy = prepare_canary_repository(repo, work / "canary")
        x = golden[INPUT]
        rows = np.resize(x, (args.rows, x.shape[1])).astype(np.float32)
        with LocalTriton(copy.path, work_dir=work / "server") as triton:
            triton.client().load_model("iris")

            def client() -> TritonHttpClient:
                return TritonHttpClient(triton.http_url, "iris", {INPUT: "FP32"}, ["probabilities", "label"])

            figures: dict[int, list[dict]] = {1: [], args.concurrency: []}
            for _ in range(args.repeats):
                for c in (1, args.concurrency):
                    figures[c].append(replay({INPUT: rows}, client, batch_rows=args.batch_rows, concurrency=c).timing())

    def med(c: int, key: str) -> float:
        return statistics.median(t[key] for t in figures[c])

    seq, par = med(1, "throughput_rows_per_s"), med(args.concurrency, "throughput_rows_per_s")
    requests = figures[1][0]["requests"]
    print(f"golden set: {args.rows} rows in {requests} requests of {args.batch_rows} rows; {args.repeats} alternating repeats, medians")
    print(f"sequential (concurrency 1):  {seq:10.0f} rows/s   p50 {med(1, 'p50_ms'):.2f} ms   p99 {med(1, 'p99_ms'):.2f} ms")
    print(f"concurrency {args.concurrency:<3d}            {par:10.0f} rows/s   p50 {med(args.concurrency, 'p50_ms'):.2f} ms   "
          f"p99 {med(args.concurrency, 'p99_ms'):.2f} ms")
    print(f"ratio concurrent / sequential throughput: {par / seq:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
