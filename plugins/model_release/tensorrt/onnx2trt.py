"""ONNX -> TensorRT plan with the TensorRT Python API, and its parity against onnxruntime.

Written against TensorRT 10's API (``create_network(0)`` is explicit-batch; memory pools; named
I/O tensors with ``set_tensor_address`` + ``execute_async_v3``). TensorRT and torch (used only as a
CUDA buffer allocator) are imported inside the functions, so this module costs nothing to import
on a CPU machine. Each build leaves ``reproduce.sh`` (an equivalent ``trtexec`` command) beside
the plan.
"""

from __future__ import annotations

import logging
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ExportError
from ..model.golden import iter_npz
from ..model.parity import compare, raise_if_failed
from ..spec import ReleaseSpec
from ..stages import TENSORRT
from ..types import ExportResult, TensorRTResult
from ..workspace import Workspace, atomic_write_bytes, sha256_file
from .decide import Profile, profile_shapes

log = logging.getLogger(__name__)


def gpu_environment() -> tuple[dict[str, str], str | None]:
    """Facts about this worker's GPU stack, and why a plan cannot be built here (None if it can)."""
    env: dict[str, str] = {}
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run(
                [smi, "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=20, check=True,
            ).stdout.strip().splitlines()
            if out:
                name, cap, driver = (part.strip() for part in out[0].split(","))
                env.update(gpu=name, compute_capability=cap, driver=driver)
        except (subprocess.SubprocessError, ValueError, OSError) as exc:
            env["nvidia_smi_error"] = str(exc)[:200]
    try:
        import tensorrt as trt  # noqa: PLC0415
    except ImportError:
        trt = None
    version = getattr(trt, "__version__", None)
    if isinstance(version, str):  # a module named tensorrt that is not TensorRT (a tests/tensorrt package on sys.path) has none
        env["tensorrt"] = version
    if "gpu" not in env:
        return env, "no NVIDIA GPU is visible (nvidia-smi found none)"
    if "tensorrt" not in env:
        return env, "the tensorrt Python package is not installed on this worker"
    return env, None


def build_and_check(spec: ReleaseSpec, export: ExportResult, ws: Workspace, env: dict[str, str]) -> TensorRTResult:
    """Build the plan, run it on the golden set, and gate on parity against onnxruntime."""
    out_dir = ws.stage_dir(TENSORRT, fresh=True)
    plan_path = out_dir / "model.plan"
    max_batch = max(1, spec.repository.max_batch_size)
    profile = profile_shapes(export.inputs, max_batch, spec)
    plan = build_engine(Path(export.onnx_path), profile, spec.tensorrt.precision, spec.tensorrt.workspace_mb)
    atomic_write_bytes(plan_path, plan)
    (out_dir / "reproduce.sh").write_text(_trtexec_command(export.onnx_path, plan_path, profile, spec.tensorrt.precision) + "\n")

    inputs = next(iter(iter_npz(export.golden_path, max_batch, limit=max_batch)))  # one batch, not the whole golden set
    reference = _onnxruntime_outputs(export.onnx_path, inputs)
    outputs = run_engine(plan, inputs)
    report = compare(reference, {k: v for k, v in outputs.items() if k in reference}, spec.tensorrt.tolerances)
    raise_if_failed(
        report, stage=TENSORRT, reference="onnxruntime",
        hint=f"Loosen tensorrt.tolerances or use a wider precision than {spec.tensorrt.precision!r}; the plan is in {out_dir}",
    )
    return TensorRTResult(
        built=True, plan_path=str(plan_path), plan_sha256=sha256_file(plan_path),
        precision=spec.tensorrt.precision, environment=env, parity=report.to_dict(),
    )


def build_engine(onnx_path: Path, profile_shapes: Profile, precision: str, workspace_mb: int) -> bytes:
    """Parse the ONNX file and build a serialized engine with one profile (:func:`~.decide.profile_shapes`).

    Raises:
        ExportError: the parser refused the graph, or the builder produced no engine.
    """
    import tensorrt as trt  # noqa: PLC0415

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(onnx_path.read_bytes()):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise ExportError(f"TensorRT could not parse {onnx_path}: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_mb << 20)
    flag = {"fp16": "FP16", "bf16": "BF16", "int8": "INT8"}.get(precision)
    if flag:
        config.set_flag(getattr(trt.BuilderFlag, flag))
    profile = builder.create_optimization_profile()
    for name, (lo, mid, hi) in profile_shapes.items():
        profile.set_shape(name, lo, mid, hi)
    config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise ExportError(
            f"TensorRT failed to build an engine from {onnx_path} at precision {precision!r}; "
            "the builder log above says why. Try tensorrt.precision: fp32.",
        )
    return bytes(plan)


def run_engine(plan: bytes, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run a serialized engine once on host arrays (torch CUDA tensors as buffers)."""
    import tensorrt as trt  # noqa: PLC0415
    import torch  # noqa: PLC0415

    logger = trt.Logger(trt.Logger.WARNING)
    engine = trt.Runtime(logger).deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    buffers: dict[str, Any] = {}
    for name, array in inputs.items():
        tensor = torch.from_numpy(np.ascontiguousarray(array)).cuda()
        buffers[name] = tensor
        context.set_input_shape(name, tuple(array.shape))
        context.set_tensor_address(name, tensor.data_ptr())
    outputs: dict[str, Any] = {}
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) != trt.TensorIOMode.OUTPUT:
            continue
        shape = tuple(context.get_tensor_shape(name))
        dtype = torch.from_numpy(np.empty(0, dtype=trt.nptype(engine.get_tensor_dtype(name)))).dtype
        outputs[name] = torch.empty(shape, dtype=dtype, device="cuda")
        context.set_tensor_address(name, outputs[name].data_ptr())
    stream = torch.cuda.Stream()
    if not context.execute_async_v3(stream.cuda_stream):
        raise ExportError("TensorRT execution failed on the golden set")
    stream.synchronize()
    return {name: t.cpu().numpy() for name, t in outputs.items()}


def _onnxruntime_outputs(onnx_path: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort  # noqa: PLC0415

    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs), strict=True))


def _trtexec_command(onnx_path: str, plan_path: Path, profile: Profile, precision: str) -> str:
    def fmt(i: int) -> str:
        return ",".join(f"{n}:{'x'.join(str(d) for d in shapes[i])}" for n, shapes in profile.items())

    parts = ["trtexec", f"--onnx={onnx_path}", f"--saveEngine={plan_path}", f"--minShapes={fmt(0)}",
             f"--optShapes={fmt(1)}", f"--maxShapes={fmt(2)}"]
    if precision != "fp32":
        parts.append(f"--{precision}")
    return " ".join(shlex.quote(p) for p in parts)
