"""How many bytes a release workspace holds for a large model: every file's size, and each stored file once.

Starts the embedded stack (MLflow, the S3 endpoint), logs a wide image CNN twice (two seeds, untrained:
the bytes are the point, so the quality gates are off) and releases both versions; the second is
judged against the first, served from the store. Then walks the second release's workspace (and the
workspace root's shared caches) and prints:

- ``apparent``: the sum of every file's size, as ``du --apparent-size`` counts a tree without links;
- ``stored``: each file's bytes once per inode (what the disk holds: hard links share one copy);
- the files over 1 MB with their link counts, and the ONNX file's size; then the same two sums over
  the whole workspace root (both releases and the caches).

Run it on two checkouts to compare (``PYTHONPATH=/path/to/other/plugins`` runs the other's code):
``.venv/bin/python benchmarks/bench_workspace_size.py [--width 256]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MB = 1 << 20


def sizes(root: Path) -> tuple[int, int, list[tuple[str, int, int]]]:
    """(apparent bytes, stored bytes, [(relative path, bytes, links)] of the files over 1 MB)."""
    apparent, seen, stored, big = 0, set(), 0, []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        st = path.stat()
        apparent += st.st_size
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            stored += st.st_size
        if st.st_size > MB:
            big.append((str(path.relative_to(root)), st.st_size, st.st_nlink))
    return apparent, stored, big


def main() -> None:
    import mlflow
    import torch
    from mlflow.models import ModelSignature
    from mlflow.types.schema import Schema, TensorSpec

    from model_release.local.stack import EmbeddedStack
    from model_release.pipeline import Services, release
    from model_release.spec import load_spec
    from model_release.store import open_store
    from model_release.workspace import Workspace
    from tests.e2e import deep_models as dm
    from tests.e2e.conftest import NOT_ABOUT_LATENCY, SPEC

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--width", type=int, default=256, help="the CNN's width (256: an ONNX file of about 28 MB)")
    args = parser.parse_args()
    images = dm.digits_images()
    with tempfile.TemporaryDirectory(prefix="bench-ws-") as tmp, EmbeddedStack(Path(tmp) / "stack") as stack:
        golden = Path(tmp) / "digits.npz"
        np.savez(golden, **images.golden, digit=images.golden_y)
        signature = ModelSignature(inputs=Schema([TensorSpec(np.dtype("float32"), (-1, 3, 8, 8), "image")]),
                                   outputs=Schema([TensorSpec(np.dtype("float32"), (-1, 10), "logits")]))
        mlflow.set_tracking_uri(stack.tracking_uri)
        mlflow.set_registry_uri(stack.tracking_uri)
        settings = {"name": "wide", "model.name": "wide-cnn", "promote.store": "s3://model-store/wide", "golden.path": str(golden),
                    "golden.target": None, "repository.shape": "single", "repository.labels": None, "export.opset": 18,
                    "canary.quality": {}, "canary.champion.max_ks": 1.0, "canary.expectations": False,
                    "export.tolerances": {"default": {"atol": 1e-3, "rtol": 1e-2}},
                    "canary.tolerances": {"default": {"atol": 1e-3, "rtol": 1e-2}}, **NOT_ABOUT_LATENCY}
        spec = load_spec(SPEC, overrides=settings)
        services = Services(tracking_uri=stack.tracking_uri, open_store=lambda uri: open_store(uri, s3_client=stack.s3_client()))
        root = Path(tmp) / "workspace"
        for seed in (0, 1):
            torch.manual_seed(seed)
            with mlflow.start_run():
                mlflow.pytorch.log_model(dm.DigitsCNN(width=args.width).eval(), name="model", registered_model_name="wide-cnn",
                                         signature=signature, pip_requirements=["torch==2.13.0"], serialization_format="pickle")
            mlflow.MlflowClient().set_registered_model_alias("wide-cnn", "candidate", str(seed + 1))
            started = time.perf_counter()
            ws = Workspace(f"wide-{seed}", root=root)
            outcome = release(spec, ws, services)
            print(f"release {seed + 1}: {'promoted' if outcome.promoted else outcome.error} in {time.perf_counter() - started:.1f} s")
        onnx_bytes = (ws.path / "export" / "model.onnx").stat().st_size
        apparent, stored, big = sizes(ws.path)
        shared = sizes(root / ".cache") if (root / ".cache").exists() else (0, 0, [])
        print(f"ONNX file: {onnx_bytes / MB:.1f} MB")
        print(f"second release's workspace: apparent {apparent / MB:.1f} MB, stored {stored / MB:.1f} MB "
              f"({apparent / max(onnx_bytes, 1):.1f}x / {stored / max(onnx_bytes, 1):.1f}x the ONNX file)")
        print(f"shared caches (.cache): apparent {shared[0] / MB:.1f} MB, stored {shared[1] / MB:.1f} MB")
        everything = sizes(root)
        print(f"the whole workspace root (both releases, the caches): apparent {everything[0] / MB:.1f} MB, "
              f"stored {everything[1] / MB:.1f} MB")
        for path, size, links in big:
            print(f"  {size / MB:7.1f} MB  links {links}  {path}")
        print(f"machine load: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
