"""Export stage figures, measured in one run and printed as ratios against a baseline.

1. Export cold time over cached time (target >= 5x): the export stage of an unchanged model with
   empty caches, then with the conversion and parity caches filled (the ONNX file and the proven
   parity result of exactly the same check are reused: neither the native model nor onnxruntime
   is loaded), for three models: the demo's scaler + logistic regression, a 100-tree gradient
   boosting classifier, and a small torch CNN. A third column shows the ONNX file reused but the
   parity check run again (the parity cache emptied): what a changed golden set or tolerance costs.
2. Parity-check throughput, rows/s, against a plain ``numpy.allclose`` loop over the same batches
   (target >= 0.9x): the gate computes far more (max abs/rel, mean, NaN/Inf, worst rows), so
   this says what that costs.
3. Peak memory of the parity check streaming a golden set of 10x the rows, over 1x (target
   <= 1.1x), measured with tracemalloc (numpy reports its buffers to it).

Run: ``.venv/bin/python benchmarks/bench_export.py`` (about a minute on 2 cores).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

import numpy as np  # noqa: E402

from model_release.export import export  # noqa: E402
from model_release.model.golden import NpzWriter, iter_npz  # noqa: E402
from model_release.intake.stage import resolve  # noqa: E402
from model_release.local.mlflow import use_local_tracking  # noqa: E402
from model_release.model.parity import ParityAccumulator  # noqa: E402
from model_release.spec import Tolerances, parse_spec  # noqa: E402
from model_release.workspace import Workspace  # noqa: E402

REPEATS = 5


def register_models(root: Path) -> str:
    """The demo's kind of model (scaler + logistic regression) and a small torch CNN, registered."""
    import mlflow
    import torch
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    uri = use_local_tracking(root / "mlflow", experiment="bench-export")
    x, y = load_breast_cancer(return_X_y=True)
    rows = np.concatenate([x] * 2)[:1024]
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(x, y)
    with mlflow.start_run():
        mlflow.sklearn.log_model(model, name="model", input_example=rows, registered_model_name="bench-sklearn",
                                 pip_requirements=["scikit-learn"])
    boosted = GradientBoostingClassifier(n_estimators=100, max_depth=3, random_state=0).fit(x, y)
    with mlflow.start_run():
        mlflow.sklearn.log_model(boosted, name="model", input_example=rows, registered_model_name="bench-sklearn-gbm",
                                 pip_requirements=["scikit-learn"], skops_trusted_types=["sklearn.tree._tree.Tree"])
    torch.manual_seed(0)
    cnn = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(8 * 16 * 16, 10)).eval()
    images = np.random.default_rng(0).normal(size=(256, 1, 16, 16)).astype(np.float32)
    with mlflow.start_run():
        mlflow.pytorch.log_model(cnn, name="model", input_example=images, registered_model_name="bench-torch",
                                 pip_requirements=["torch"])
    client = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
    for name in ("bench-sklearn", "bench-sklearn-gbm", "bench-torch"):
        client.set_registered_model_alias(name, "candidate", "1")
    return uri


def cold_over_cached(root: Path, uri: str, model_name: str) -> tuple[float, float, float]:
    spec = parse_spec({"name": "bench", "model": {"name": model_name, "alias": "candidate"}})
    ws_root = root / f"ws-{model_name}"
    intake = resolve(spec, Workspace("intake", root=ws_root), tracking_uri=uri)
    export(spec, intake, Workspace("warm-up", root=ws_root))  # imports and first-call costs out of the way
    cold, cached, rechecked = [], [], []
    for i in range(REPEATS):
        shutil.rmtree(ws_root / ".cache", ignore_errors=True)
        t0 = time.perf_counter()
        first = export(spec, intake, Workspace(f"cold-{i}", root=ws_root))
        t1 = time.perf_counter()
        second = export(spec, intake, Workspace(f"cached-{i}", root=ws_root))
        t2 = time.perf_counter()
        shutil.rmtree(ws_root / ".cache" / "export-parity")
        t3 = time.perf_counter()
        third = export(spec, intake, Workspace(f"rechecked-{i}", root=ws_root))
        t4 = time.perf_counter()
        assert not first.cached and second.cached and third.cached
        assert second.converter["parity"].startswith("reused from cache ") and third.converter["parity"].startswith("checked on ")
        assert second.parity == first.parity == third.parity
        cold.append(t1 - t0)
        cached.append(t2 - t1)
        rechecked.append(t4 - t3)
    return statistics.median(cold), statistics.median(cached), statistics.median(rechecked)


def parity_throughput(rows: int = 200_000, width: int = 10, batch: int = 1024) -> tuple[float, float]:
    rng = np.random.default_rng(1)
    ref = rng.random((rows, width))
    cand = (ref + rng.normal(scale=1e-7, size=ref.shape)).astype(np.float32)
    tolerances = Tolerances.model_validate({"default": {"atol": 1e-5, "rtol": 1e-4}})

    def baseline() -> bool:
        ok = True
        for i in range(0, rows, batch):
            ok &= bool(np.allclose(cand[i : i + batch], ref[i : i + batch], rtol=1e-4, atol=1e-5))
        return ok

    def gate() -> bool:
        acc = ParityAccumulator(tolerances)
        for i in range(0, rows, batch):
            acc.update({"scores": ref[i : i + batch]}, {"scores": cand[i : i + batch]})
        return acc.result().passed

    best = {"baseline": 0.0, "gate": 0.0}
    for _ in range(REPEATS):  # interleaved, best of each: the least disturbed run
        for name, fn in (("baseline", baseline), ("gate", gate)):
            t0 = time.perf_counter()
            assert fn()
            best[name] = max(best[name], rows / (time.perf_counter() - t0))
    return best["gate"], best["baseline"]


def parity_peak_memory(folder: Path, rows: int, width: int = 10, batch: int = 1024) -> int:
    """tracemalloc peak of streaming a reference and a candidate file of ``rows`` rows through the gate."""
    rng = np.random.default_rng(2)
    ref_path, cand_path = folder / f"ref-{rows}.npz", folder / f"cand-{rows}.npz"
    with NpzWriter(ref_path) as ref_w, NpzWriter(cand_path) as cand_w:
        for start in range(0, rows, batch):
            n = min(batch, rows - start)
            r = rng.random((n, width))
            ref_w.append({"scores": r, "label": r.argmax(axis=1)})
            cand_w.append({"scores": (r + 1e-7).astype(np.float32), "label": r.argmax(axis=1)})
    tolerances = Tolerances.model_validate({"default": {"atol": 1e-5, "rtol": 1e-4}})
    tracemalloc.start()
    tracemalloc.reset_peak()
    acc = ParityAccumulator(tolerances, {"label": 1.0})
    for ref, cand in zip(iter_npz(ref_path, batch), iter_npz(cand_path, batch)):
        acc.update(ref, cand)
    assert acc.result().passed and acc.result().outputs["scores"].total_rows == rows
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="bench-export-"))
    try:
        uri = register_models(root)
        print("export stage, cold (empty caches) over cached (ONNX file and parity result reused), median of", REPEATS)
        for model_name in ("bench-sklearn", "bench-sklearn-gbm", "bench-torch"):
            cold, cached, rechecked = cold_over_cached(root, uri, model_name)
            print(f"  {model_name:17s} cold {cold * 1000:8.1f} ms  cached {cached * 1000:7.1f} ms  "
                  f"ratio {cold / cached:5.1f}x  (target >= 5x);  ONNX reused, parity re-checked {rechecked * 1000:7.1f} ms "
                  f"({cold / rechecked:.1f}x)")
        gate, base = parity_throughput()
        print(f"parity throughput: gate {gate:,.0f} rows/s, numpy.allclose loop {base:,.0f} rows/s, "
              f"ratio {gate / base:.2f}x  (target >= 0.9x)")
        one = parity_peak_memory(root, 4096)
        ten = parity_peak_memory(root, 40960)
        print(f"parity peak memory (tracemalloc): 4,096 rows {one / 1024:.0f} KiB, 40,960 rows {ten / 1024:.0f} KiB, "
              f"ratio {ten / one:.2f}x  (target <= 1.1x)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
