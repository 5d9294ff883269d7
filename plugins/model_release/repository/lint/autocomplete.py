"""What Triton 2.51 completes in a model's config before it validates it, done on the linter's copy.

Triton's backends fill in a config (unless the server runs with ``--disable-auto-complete-config``,
or ``--strict-model-config=true``), and only then are its tensors and batching checked:

- python: ``TritonPythonModel.auto_complete_config`` of model.py (python_backend
  ``triton_python_backend_utils.py`` ``ModelConfig``): read statically by :mod:`.autocomplete_read`
  and replayed here as ``ModelConfig`` does it, refusals included;
- onnxruntime: when config.pbtxt lists no inputs or no outputs, they come from the ONNX file, with
  ``max_batch_size`` (the server's default 4 when every tensor's first dim is variable) and a
  dynamic batcher (onnxruntime_backend ``AutoCompleteConfig``); read here with ``onnx``;
- tensorrt: the same from the plan, which cannot be read without TensorRT: a warning.

Where the completion cannot be known, ``info.unread_completion`` says why, and the linter turns the
findings of :data:`DEPENDS_ON_COMPLETION` on that model into ``autocomplete-unread`` warnings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from .autocomplete_read import Call, Completion
from .file_rules import is_symlink
from .findings import listing
from .model_info import Add, ModelInfo

#: the server's default-max-batch-size (``--backend-config=default-max-batch-size``), which onnxruntime applies
DEFAULT_MAX_BATCH_SIZE = 4
#: rules whose verdict depends on the completed config: warnings where the completion is unread
DEPENDS_ON_COMPLETION = frozenset({
    "datatype-invalid", "dims-invalid", "reshape-invalid", "reshape-mismatch", "preferred-batch-size",
    "response-cache-conflict", "batch-io-invalid", "decoupled-returns", "python-no-responses",
    "ensemble-batch-size", "ensemble-map-unknown", "ensemble-input-unmapped", "ensemble-dtype-mismatch",
    "ensemble-shape-mismatch", "ensemble-decoupled-mix", "bls-output-unknown",
})
_TENSOR_KEYS = {"input": ("name", "data_type", "dims", "optional"), "output": ("name", "data_type", "dims")}


@dataclass
class _Replay:
    """The config being completed, the model's name (Triton's messages use it) and what Triton cannot read back."""

    config: mc.ModelConfig
    model: str
    unreadable: list[str] = field(default_factory=list)


class _Refusal(Exception):
    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule, self.message = rule, message


def complete(info: ModelInfo, add: Add, enabled: bool = True) -> None:
    """Replace ``info.config`` by what Triton's backend completes it to (nothing when ``enabled`` is off)."""
    if not enabled or info.config is None:
        return
    if info.kind == "python":
        _python(info, add)
    elif info.kind == "onnxruntime":
        _onnx(info, add)
    elif info.kind == "tensorrt" and _needs_tensors(info.config):
        info.unread_completion = (f"Triton's TensorRT backend takes the missing inputs or outputs from "
                                  f"{info.config.default_model_filename or 'model.plan'}, which the linter cannot read "
                                  "without TensorRT")
        add("autocomplete-unread", info.name, info.config_file,
            f"config.pbtxt lists {_missing(info.config)}: {info.unread_completion}, so the checks on them are "
            "warnings; list them in config.pbtxt to have them checked")


def _needs_tensors(config: mc.ModelConfig) -> bool:
    return not (len(config.input) + len(config.batch_input)) or not len(config.output)


def _missing(config: mc.ModelConfig) -> str:
    missing = [kind for kind, n in (("inputs", len(config.input) + len(config.batch_input)), ("outputs", len(config.output)))
               if not n]
    return "no " + " and no ".join(missing)


# --- python: auto_complete_config ------------------------------------------------------------


def _python(info: ModelInfo, add: Add) -> None:
    if not info.python:
        return
    versions = sorted(info.python)
    completions = [info.python[v].completion for v in versions]
    filename = info.config.default_model_filename or "model.py"  # type: ignore[union-attr]
    file = f"{info.name}/{versions[-1]}/{filename}"
    if any(c != completions[-1] for c in completions):
        info.unread_completion = f"versions {listing(versions)} of {filename} complete the config differently"
        return
    done: Completion | None = completions[-1]
    if done is None:
        return
    if done.invalid:
        add("autocomplete-invalid", info.name, file,
            f"auto_complete_config (line {done.line}) fails when Triton calls it at load: {done.invalid}")
        return
    if done.unread:
        info.unread_completion = (f"auto_complete_config in {file} sets the config in a way the linter cannot read "
                                  f"statically ({done.unread})")
    replay = _Replay(mc.ModelConfig(), info.name)
    replay.config.CopyFrom(info.config)
    for call in done.calls:
        try:
            _APPLY[call.method](replay, call)
        except _Refusal as refused:
            add(refused.rule, info.name, file, f"line {call.line}: {refused.message}")
            return
    if replay.unreadable:  # measured on 2.51: the completed config does not parse, so none of it is used
        add("autocomplete-ignored", info.name, file,
            f"{'; '.join(replay.unreadable)}: Triton cannot read the completed config back, so it loads the model "
            "with config.pbtxt as it is and ignores everything auto_complete_config sets; use Triton's names "
            "(TYPE_FP32, TYPE_INT64, TYPE_STRING, ...)")
        return
    info.config = replay.config


def _conflict(message: str, triton: str, fix: str) -> _Refusal:
    return _Refusal("autocomplete-conflict", f"{message}; Triton refuses the model (\"{triton}\"): {fix}")


def _invalid(message: str, triton: str) -> _Refusal:
    return _Refusal("autocomplete-invalid", f"{message}, so auto_complete_config raises when Triton loads the model "
                                            f"(\"{triton}\"); fix the call")


def _max_batch_size(replay: _Replay, call: Call) -> None:
    config, model = replay.config, replay.model
    size = call.argument
    if not isinstance(size, int) or isinstance(size, bool):
        raise _invalid(f"set_max_batch_size is given {size!r}, not an int", "TypeError")
    if config.max_batch_size > size:
        raise _conflict(f"set_max_batch_size({size}) is below config.pbtxt's max_batch_size {config.max_batch_size}",
                        f"configuration specified max_batch_size {config.max_batch_size}, but in auto-complete-config "
                        f"function for model '{model}' specified max_batch_size {size}",
                        "make them agree, or drop max_batch_size from config.pbtxt")
    config.max_batch_size = size


def _dynamic_batching(replay: _Replay, call: Call) -> None:
    config, model = replay.config, replay.model
    if call.argument is not None:
        raise _invalid("set_dynamic_batching takes no argument", "TypeError")
    found = next((s for s in ("sequence_batching", "ensemble_scheduling") if config.HasField(s)), None)
    if found:
        raise _conflict(f"set_dynamic_batching() on a model whose config.pbtxt sets {found}",
                        f"Configuration specified scheduling_choice as '{found}', but auto-complete-config function for "
                        f"model '{model}' tries to set scheduling_choice as 'dynamic_batching'",
                        f"remove set_dynamic_batching() or {found}")
    config.dynamic_batching.SetInParent()


def _tensor(replay: _Replay, call: Call) -> None:
    config, model = replay.config, replay.model
    kind = "input" if call.method == "add_input" else "output"
    spec = _tensor_spec(kind, call.argument, model)
    name, dtype, dims = spec["name"], spec["data_type"], spec["dims"]
    tensors = config.input if kind == "input" else config.output
    current = next((t for t in tensors if t.name == name), None)
    known = dtype in mc.DataType.keys() and dtype != "TYPE_INVALID"
    unknown = f"line {call.line}: {kind} {name!r} gets data_type {dtype!r}, not a Triton data type"
    if not known and current is None:
        replay.unreadable.append(unknown)
        return
    if current is None:
        tensors.add(name=name, data_type=mc.DataType.Value(dtype), dims=list(dims), **(
            {"optional": bool(spec["optional"])} if "optional" in spec else {}))
        return
    current_dims = list(current.dims)
    ours = f"model.py's {call.method} declares {kind} {name!r}"
    if current.data_type != mc.TYPE_INVALID and mc.DataType.Name(current.data_type) != dtype:
        raise _conflict(f"{ours} as {dtype}, config.pbtxt as {mc.DataType.Name(current.data_type)}",
                        f"configuration expects datatype {mc.DataType.Name(current.data_type)} for {kind} '{name}', "
                        f"model provides {dtype}", "make them agree, or drop data_type from config.pbtxt")
    if current_dims and current_dims != dims:  # a tuple never equals the config's list, as in Triton's check
        raise _conflict(f"{ours} with dims {dims!r}, config.pbtxt with {current_dims}",
                        f"model '{model}', tensor '{name}': the model expects dims {dims} but the model configuration "
                        f"specifies dims {current_dims}", "make them agree (as a list), or drop dims from config.pbtxt")
    if kind == "input" and "optional" in spec and spec["optional"] != current.optional:
        raise _conflict(f"{ours} optional {spec['optional']}, config.pbtxt {current.optional}",
                        f"the model expects optional {spec['optional']} but the model configuration specifies "
                        f"optional {current.optional}", "make them agree")
    if known:
        current.data_type = mc.DataType.Value(dtype)
    else:  # only where config.pbtxt gives none: any other is a conflict above
        replay.unreadable.append(unknown)
    current.dims[:] = list(dims)
    if "optional" in spec:
        current.optional = bool(spec["optional"])


def _tensor_spec(kind: str, spec: Any, model: str) -> dict[str, Any]:
    """The dict given to add_input/add_output, checked as ModelConfig checks it (and as the JSON it becomes must be)."""
    if not isinstance(spec, dict):
        raise _invalid(f"add_{kind} is given {type(spec).__name__} {spec!r}, not a dict", "TypeError")
    where = f"{kind} {spec.get('name', '')!r}".replace(" ''", "")
    allowed = _TENSOR_KEYS[kind]
    extra = sorted(str(k) for k in spec if k not in allowed)
    if extra:
        raise _invalid(f"{where} has {listing(extra)}, which add_{kind} does not take (only {', '.join(allowed)})",
                       f"{kind} '...' in auto-complete-config function for model '{model}' contains property other "
                       f"than {', '.join(repr(k) for k in allowed)}")
    missing = next((k for k in ("name", "data_type", "dims") if k not in spec), None)
    if missing:
        raise _invalid(f"{where} has no {missing!r}",
                       f"{kind} ... in auto-complete-config function for model '{model}' is missing '{missing}' property.")
    dims = spec["dims"]
    if not isinstance(spec["name"], str) or not isinstance(spec["data_type"], str):
        raise _invalid(f"{where} has a name or data_type that is not a string", "TypeError")
    if not isinstance(dims, (list, tuple)) or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        raise _invalid(f"{where} has dims {dims!r}, not a list of ints", "failed to parse")
    return spec


def _transaction_policy(replay: _Replay, call: Call) -> None:
    config, model = replay.config, replay.model
    policy = call.argument
    if not isinstance(policy, dict):
        raise _invalid(f"set_model_transaction_policy is given {policy!r}, not a dict", "AttributeError")
    extra = sorted(str(k) for k in policy if k != "decoupled")
    if extra:
        raise _invalid(f"the transaction policy has {listing(extra)}; only 'decoupled' is allowed",
                       f"model transaction property in auto-complete-config function for model '{model}' contains "
                       "property other than 'decoupled'")
    if "decoupled" in policy:
        wanted = policy["decoupled"]
        has = config.HasField("model_transaction_policy")
        if has and config.model_transaction_policy.decoupled != wanted:
            raise _conflict(f"model.py sets decoupled {wanted}, config.pbtxt {config.model_transaction_policy.decoupled}",
                            f"trying to change decoupled property in auto-complete-config for model '{model}', which "
                            f"is already set to '{config.model_transaction_policy.decoupled}'", "make them agree")
        config.model_transaction_policy.decoupled = bool(wanted)
    config.model_transaction_policy.SetInParent()


def _as_dict(replay: _Replay, call: Call) -> None:
    return None


_APPLY = {"set_max_batch_size": _max_batch_size, "set_dynamic_batching": _dynamic_batching, "add_input": _tensor,
          "add_output": _tensor, "set_model_transaction_policy": _transaction_policy, "as_dict": _as_dict}


# --- onnxruntime: the tensors of the ONNX file ------------------------------------------------


def _onnx(info: ModelInfo, add: Add) -> None:
    config = info.config
    assert config is not None
    if not _needs_tensors(config) or not info.served or info.served[-1] not in info.folders:
        return
    version = info.served[-1]
    filename = config.default_model_filename or "model.onnx"
    path = info.folders[version] / filename
    if not path.exists() or is_symlink(path):
        return  # model-file-missing or a symlink finding says so
    try:
        inputs, outputs = _onnx_tensors(path)
    except Exception as exc:  # noqa: BLE001 - onnx raises DecodeError and others; a directory, external data
        info.unread_completion = (f"Triton's onnxruntime backend takes them from {info.name}/{version}/{filename}, "
                                  f"which the linter cannot read ({type(exc).__name__})")
        add("autocomplete-unread", info.name, info.config_file,
            f"config.pbtxt lists {_missing(config)}: {info.unread_completion}, so the checks on them are warnings; "
            "list them in config.pbtxt or make the file readable with onnx.load")
        return
    completed = mc.ModelConfig()
    completed.CopyFrom(config)
    _onnx_batching(completed, inputs + outputs, info.name, add, info.config_file)
    if not len(config.input) + len(config.batch_input):
        _onnx_io(completed.input, inputs, completed.max_batch_size)
    if not len(config.output):
        _onnx_io(completed.output, outputs, completed.max_batch_size)
    info.config = completed


def _onnx_tensors(path: Path) -> tuple[list[tuple[str, int, list[int]]], list[tuple[str, int, list[int]]]]:
    """(name, config data type, dims with the batch dim) of the graph's inputs (initializers excluded) and outputs."""
    import onnx  # heavy: only models completed from an ONNX file need it

    from ..config import data_type
    from ...model.dtypes import triton_from_onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    if not graph.output:
        raise ValueError("the file holds no graph outputs")  # not a model onnxruntime can load
    initializers = {i.name for i in graph.initializer}

    def tensor(value) -> tuple[str, int, list[int]]:  # noqa: ANN001 - onnx.ValueInfoProto
        t = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]
        return value.name, data_type(triton_from_onnx(t.elem_type, what=value.name)), dims

    return [tensor(v) for v in graph.input if v.name not in initializers], [tensor(v) for v in graph.output]


def _onnx_batching(config: mc.ModelConfig, tensors: list[tuple[str, int, list[int]]], model: str, add: Add,
                   file: str) -> None:
    """AutoCompleteMaxBatch: batching when every tensor's first dim is variable."""
    if all(dims and dims[0] == -1 for _, _, dims in tensors):
        if config.max_batch_size == 0:
            config.max_batch_size = DEFAULT_MAX_BATCH_SIZE
        if config.max_batch_size > 1 and not config.HasField("sequence_batching"):
            config.dynamic_batching.SetInParent()
    elif config.max_batch_size != 0:
        add("autocomplete-conflict", model, file,
            f"max_batch_size is {config.max_batch_size} but a tensor of the ONNX file has no variable first dim, so the "
            f"model cannot batch; Triton refuses it (\"autofill failed for model '{model}': model does not support "
            "batching while non-zero max_batch_size is specified\"): set max_batch_size: 0 or list the tensors")


def _onnx_io(tensors, found: list[tuple[str, int, list[int]]], max_batch_size: int) -> None:  # noqa: ANN001
    """AutoCompleteIO: every tensor of the file, the batch dim dropped when batching; [1] reshaped to [] for none left."""
    for name, dtype, dims in found:
        kept = dims[1:] if max_batch_size > 0 else dims
        tensor = tensors.add(name=name, data_type=dtype, dims=kept or [1])
        if not kept and max_batch_size > 0:
            tensor.reshape.SetInParent()
