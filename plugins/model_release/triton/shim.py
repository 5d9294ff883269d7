"""The canary copy of a model repository, with ONNX leaves served through a python-backend shim.

The local CPU Triton (the nvidia-pytriton wheel) has only the python backend. To canary a
repository on it, every leaf with ``backend: "onnxruntime"`` (or ``platform: "onnxruntime_onnx"``)
becomes a python-backend model that runs onnxruntime on its version folder's ``model.onnx``
(:mod:`model_release.triton.shim_model`); BLS and ensemble stages are copied unchanged. A TensorRT
plan cannot be shimmed: it needs a GPU Triton. config.pbtxt is read and written only through
Triton's own ``ModelConfig`` protobuf.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..model.dtypes import triton_from_onnx, wire_type
from ..errors import CanaryRejected, GpuUnavailable, ModelReleaseError
from ..repository.config import write_config
from ..workspace import link_or_copy

SHIM_SOURCE = Path(__file__).with_name("shim_model.py")
SHIM_DESCRIPTION = "CPU, python-backend onnxruntime shim"

_ONNX = ("onnxruntime", "onnxruntime_onnx")
_UNCHANGED = ("python", "ensemble")
_GPU_ONLY = {"tensorrt": "a TensorRT plan", "tensorrt_plan": "a TensorRT plan"}


@dataclass
class CanaryRepository:
    """What :func:`prepare_canary_repository` made."""

    path: Path
    shimmed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def description(self) -> str:
        return SHIM_DESCRIPTION if self.shimmed else "CPU, python backend (no model needed a shim)"


def read_config(path: Path):  # -> model_config_pb2.ModelConfig
    """Parse a config.pbtxt with Triton's ModelConfig protobuf (via :mod:`model_release.repository.config`).

    Raises:
        CanaryRejected: the file is not valid ModelConfig text.
    """
    from ..repository.config import ConfigParseError
    from ..repository.config import read_config as parse

    try:
        return parse(path)
    except ConfigParseError as exc:
        raise CanaryRejected(
            f"{path} is not a valid Triton model configuration ({exc}); fix the template that rendered it",
        ) from None


def _kind(config) -> str:  # noqa: ANN001
    return config.backend or config.platform or ""


def prepare_canary_repository(source: Path, destination: Path) -> CanaryRepository:
    """Copy ``source`` to ``destination``, shimming every onnxruntime leaf.

    Args:
        source: the assembled Triton model repository (left untouched).
        destination: an empty or missing folder for the canary copy.

    Returns:
        The copy's path and which models were shimmed.

    Raises:
        GpuUnavailable: a model needs a backend the local CPU Triton cannot provide (a TensorRT plan).
        CanaryRejected: a model folder has no readable config.pbtxt.
    """
    from tritonclient.grpc import model_config_pb2

    source, destination = Path(source), Path(destination)
    if not source.is_dir():
        raise CanaryRejected(f"model repository {str(source)!r} does not exist; run the assemble stage first")
    if destination.exists():
        shutil.rmtree(destination)
    # model files are linked, not copied: what is changed here (config.pbtxt, the shim's model.py) is replaced whole
    shutil.copytree(source, destination, symlinks=False, copy_function=link_or_copy)
    result = CanaryRepository(path=destination)
    for model_dir in sorted(p for p in destination.iterdir() if p.is_dir()):
        cfg_path = model_dir / "config.pbtxt"
        if not cfg_path.is_file():
            continue  # not a model (a manifest folder, for example); Triton ignores it too
        config = read_config(cfg_path)
        kind = _kind(config)
        if kind in _ONNX:
            _shim(model_dir, config, model_config_pb2)
            write_config(cfg_path, config)
            result.shimmed.append(model_dir.name)
        elif kind in _GPU_ONLY:
            raise GpuUnavailable(
                f'model "{model_dir.name}" is {_GPU_ONLY[kind]} ({kind!r}), which cannot be shimmed on the local CPU '
                "Triton (python backend only). Run the canary against a GPU Triton (endpoint=...), or build the "
                "release with tensorrt.mode: off so the leaf stays ONNX.",
            )
        elif kind in _UNCHANGED:
            result.unchanged.append(model_dir.name)
        else:
            raise GpuUnavailable(
                f'model "{model_dir.name}" uses backend {kind!r}, which the local CPU Triton does not have (it has the '
                "python backend, ensembles and an onnxruntime shim). Run the canary against a Triton with that "
                "backend (endpoint=...).",
            )
    return result


def auto_complete_needed(repository: Path) -> str | None:
    """Why a Triton serving ``repository`` must complete model configurations, or None.

    Triton's auto-complete costs a python stub per python model load (the python backend starts one
    to call the model's ``auto_complete_config``, whether it defines it or not; about a second on the
    CPU canary, at every load and tuning reload). It changes nothing when no ``model.py`` defines
    ``auto_complete_config`` and every model declares its inputs and outputs, which is what a
    shimmed repository of the assembled templates is; then the server can run with
    ``--disable-auto-complete-config``. Anything else (a model that completes itself, a config
    without tensors, a file that does not parse) keeps it on. The canary chooses its server's flag
    by it; the roll-out refuses, by it, a release for servers that run without auto-complete, and a
    remote canary that declares ``auto_complete: false`` refuses a repository by it.
    """
    import ast

    for model_dir in sorted(p for p in Path(repository).iterdir() if p.is_dir()):
        cfg_path = model_dir / "config.pbtxt"
        if not cfg_path.is_file():
            continue
        try:
            config = read_config(cfg_path)
        except CanaryRejected:
            return f"{cfg_path} does not parse"
        if not config.input or not config.output:
            return f'model "{model_dir.name}" declares no {"inputs" if not config.input else "outputs"} in config.pbtxt'
        for script in sorted(model_dir.glob("*/model.py")):
            try:
                tree = ast.parse(script.read_text(encoding="utf-8"))
            except (OSError, SyntaxError, ValueError):
                return f"{script} does not parse"
            if any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "auto_complete_config"
                   for node in ast.walk(tree)):
                return f'model "{model_dir.name}" defines auto_complete_config ({script})'
    return None


def _shim(model_dir: Path, config, pb) -> None:  # noqa: ANN001
    """Turn one onnxruntime model's folder and config into a python-backend shim."""
    filename = config.default_model_filename or "model.onnx"
    versions = [v for v in model_dir.iterdir() if v.is_dir() and v.name.isdigit()]
    onnx_versions = [v for v in versions if (v / filename).is_file()]
    if not onnx_versions:
        raise CanaryRejected(
            f'model "{model_dir.name}" has backend onnxruntime but no version folder holds {filename} '
            f"(folders: {sorted(v.name for v in versions)}); re-run the assemble stage",
        )
    for version in onnx_versions:
        check_onnx_io(model_dir.name, config, version / filename)
        (version / "model.py").unlink(missing_ok=True)  # never write through a link into the source repository
        shutil.copyfile(SHIM_SOURCE, version / "model.py")
    config.platform = ""
    config.backend = "python"
    if filename != "model.onnx":
        config.parameters["shim_model_filename"].string_value = filename
    # the python backend reads default_model_filename as the .py file: keep the ONNX name in a parameter
    config.default_model_filename = ""
    config.ClearField("optimization")  # GPU execution accelerators mean nothing to the shim
    for group in config.instance_group:
        if group.kind == pb.ModelInstanceGroup.KIND_GPU:
            group.kind = pb.ModelInstanceGroup.KIND_CPU
            del group.gpus[:]


def _onnx_dims(value_info) -> list[int]:  # noqa: ANN001 - an onnx ValueInfoProto
    return [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else -1 for d in value_info.type.tensor_type.shape.dim]


def check_onnx_io(model: str, config, onnx_path: Path) -> None:  # noqa: ANN001
    """Refuse, as Triton's onnxruntime backend does at load time, config tensors that do not fit the ONNX graph.

    The shim itself would serve them (the python backend does not compare shapes), so without this
    check the CPU canary could pass a repository a GPU Triton refuses to load. Checked: every
    configured tensor exists in the graph, has its data type, and its full shape (``[-1] + dims`` when
    batching, ``reshape`` taking the place of ``dims`` when given) has the graph's rank, a variable
    batch dimension, and no fixed size that differs from the graph's.

    Raises:
        CanaryRejected: naming the model, the tensor, both shapes and what to change.
    """
    import onnx
    from tritonclient.grpc import model_config_pb2

    try:
        graph = onnx.load(str(onnx_path), load_external_data=False).graph
    except Exception as exc:  # noqa: BLE001 - onnx raises protobuf's DecodeError and others
        raise CanaryRejected(
            f'model "{model}": {onnx_path} is not a readable ONNX model ({type(exc).__name__}: {exc}); '
            "re-run the export and assemble stages",
        ) from None
    initializers = {i.name for i in graph.initializer}
    tensors = {"input": {v.name: v for v in graph.input if v.name not in initializers},
               "output": {v.name: v for v in graph.output}}
    problems = []
    for kind, configured in (("input", config.input), ("output", config.output)):
        for t in configured:
            info = tensors[kind].get(t.name)
            if info is None:
                problems.append(f"{kind} {t.name!r} is not an {kind} of {onnx_path.name} (it has {sorted(tensors[kind])})")
                continue
            try:
                onnx_type = triton_from_onnx(info.type.tensor_type.elem_type, what=f"{kind} {t.name!r}")
            except ModelReleaseError:
                onnx_type = f"ONNX type {info.type.tensor_type.elem_type}"
            config_type = wire_type(model_config_pb2.DataType.Name(t.data_type))
            if onnx_type != config_type:
                problems.append(f"{kind} {t.name!r} is {config_type} in config.pbtxt but {onnx_type} in the ONNX graph")
            graph_dims = _onnx_dims(info)
            dims = list(t.reshape.shape) if t.HasField("reshape") else list(t.dims)
            full = ([-1] + dims) if config.max_batch_size > 0 else dims
            if config.max_batch_size > 0 and (not graph_dims or graph_dims[0] != -1):
                problems.append(f"{kind} {t.name!r} has shape {graph_dims} in the ONNX graph: batching (max_batch_size "
                                f"{config.max_batch_size}) needs a variable first dimension")
            elif len(graph_dims) != len(full) or any(g != c and -1 not in (g, c) for g, c in zip(graph_dims, full)):
                problems.append(
                    f"{kind} {t.name!r}: the ONNX graph has shape {graph_dims} but the configuration specifies {full} "
                    f"({'the batch dimension followed by ' if config.max_batch_size > 0 else ''}"
                    f"{'reshape' if t.HasField('reshape') else 'dims'} {dims})"
                )
    if problems:
        raise CanaryRejected(
            f'model "{model}" would not load on Triton\'s onnxruntime backend: ' + "; ".join(problems)
            + ". Fix the tensor specs the assemble stage wrote into its config.pbtxt (a batch-only tensor [N] is "
            "dims: [1] with reshape: { shape: [] }).",
        )
