"""Build a TensorRT plan with the TensorRT stage and serve it on a GPU Triton: run where a GPU with TensorRT exists.

    python tests/gpu/build_and_serve.py [--triton /opt/tritonserver/bin/tritonserver] [--out DIR]

What it does, each step printing what it found:

1. makes a two-layer MLP as ONNX (float32, dynamic batch) and its golden rows;
2. runs the TensorRT stage (``build_plan``, ``tensorrt.mode: require``, fp32): it parses, builds the
   profile from ``repository.max_batch_size``, writes ``model.plan`` and ``reproduce.sh`` and checks
   the plan's outputs against onnxruntime (the parity gate);
3. lays the plan out as a Triton model (``platform: tensorrt_plan``), checks its build stamp against
   this GPU the way the canary does (``check_plans``), starts ``tritonserver`` (a build with the
   TensorRT backend, e.g. the NGC container's ``/opt/tritonserver/bin/tritonserver``) in explicit
   mode on 127.0.0.1, loads the model and compares served outputs with onnxruntime;
4. exits 0 when everything matched; non-zero naming the step that failed. Without a GPU or
   TensorRT it exits 77 saying which is missing (pytest's ``gpu`` marker skips for the same reason).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins"))


def main() -> int:
    from model_release.triton.delivery import RemoteCanary, check_plans
    from model_release.local.ports import free_port
    from model_release.spec import parse_spec
    from model_release.tensorrt import build_plan
    from model_release.tensorrt.onnx2trt import _onnxruntime_outputs, gpu_environment
    from model_release.workspace import Workspace

    parser = argparse.ArgumentParser()
    parser.add_argument("--triton", default=shutil.which("tritonserver") or "/opt/tritonserver/bin/tritonserver")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    env, missing = gpu_environment()
    if missing:
        print(f"SKIP: {missing}")
        return 77
    out = args.out or Path(tempfile.mkdtemp(prefix="trt-serve-"))
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.tensorrt.test_tensorrt_stage import BASE, _mlp_export

    export = _mlp_export(out)
    spec = parse_spec({**BASE, "tensorrt": {"mode": "require", "precision": "fp32"}})
    result = build_plan(spec, export, Workspace("gpu-check", out))
    print(f"1-2. built {result.plan_path} on {env}; parity {result.parity}")
    repo = out / "repository"
    (repo / "mlp" / "1").mkdir(parents=True, exist_ok=True)
    shutil.copy2(result.plan_path, repo / "mlp" / "1" / "model.plan")
    (repo / "mlp" / "config.pbtxt").write_text('name: "mlp"\nplatform: "tensorrt_plan"\nmax_batch_size: 8\n'
                                               'input [{ name: "x" data_type: TYPE_FP32 dims: [4] }]\n'
                                               'output [{ name: "y" data_type: TYPE_FP32 dims: [3] }]\n')
    here = RemoteCanary("127.0.0.1", gpu=True, tensorrt=env["tensorrt"], compute_capability=env.get("compute_capability"))
    check_plans(repo, ["mlp"], {"environment": result.environment}, here, whose="the GPU check")
    print("3. the plan's stamp matches this GPU")
    if not Path(args.triton).exists():
        print(f"FAIL: no tritonserver at {args.triton} (pass --triton)")
        return 2
    port = free_port()
    server = subprocess.Popen([args.triton, f"--model-repository={repo}", "--model-control-mode=explicit",
                               "--http-address=127.0.0.1", f"--http-port={port}", "--grpc-port=0", "--allow-metrics=false"],
                              stdout=open(out / "tritonserver.log", "wb"), stderr=subprocess.STDOUT)
    try:
        import tritonclient.http as httpclient

        client = httpclient.InferenceServerClient(f"127.0.0.1:{port}")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if client.is_server_live():
                    break
            except Exception:  # noqa: BLE001
                time.sleep(0.5)
        client.load_model("mlp")
        with np.load(export.golden_path) as golden:
            x = golden["x"][:8]
        inp = httpclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        served = client.infer("mlp", [inp]).as_numpy("y")
        want = _onnxruntime_outputs(export.onnx_path, {"x": x})["y"]
        ok = np.allclose(served, want, atol=1e-3, rtol=1e-3)
        print(f"4. served by tritonserver: max abs diff {float(np.max(np.abs(served - want))):.2e} -> {'OK' if ok else 'FAIL'}")
        client.close()
        return 0 if ok else 1
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    sys.exit(main())
