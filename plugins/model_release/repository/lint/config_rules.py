"""Rules on one config.pbtxt as Triton 2.51 validates it (core ``model_config_utils.cc``).

Three families: the platform/backend pair (``kind``), the inputs and outputs (``tensors``, as
ValidateIOShape, ValidateModelInput and ValidateBatchIO do), and scheduling (batch sizes, the
dynamic and sequence batchers, the response cache, instance groups).
"""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2 as mc

from .findings import listing
from .file_rules import DEFAULT_FILES, check_labels, inferred_backend
from .model_info import Add, ModelInfo

#: platform -> the backend Triton fills in for it
PLATFORMS = {
    "ensemble": None,
    "onnxruntime_onnx": "onnxruntime",
    "tensorrt_plan": "tensorrt",
    "pytorch_libtorch": "pytorch",
    "tensorflow_savedmodel": "tensorflow",
    "tensorflow_graphdef": "tensorflow",
}
#: backends Triton pairs with a platform (GetBackendType); any other backend takes any platform
TYPED_BACKENDS = frozenset({"onnxruntime", "tensorrt", "pytorch", "tensorflow"})
KNOWN_BACKENDS = TYPED_BACKENDS | {"python", "openvino", "fil", "dali", "identity", "vllm", "tensorrtllm"}
_TRT = "tensorrt_plan"


# --- platform and backend ------------------------------------------------------------------


def check_kind(info: ModelInfo, add: Add) -> None:
    """Decide ``info.kind`` (the backend Triton runs it on, or ``ensemble``) as Triton's auto-complete does."""
    config, name, file = info.config, info.name, info.config_file
    assert config is not None
    platform, backend = config.platform, config.backend
    if platform == "ensemble":
        info.kind = "ensemble"
        if backend:
            add("ensemble-backend", name, file,
                f"platform is 'ensemble' and backend is {backend!r}; Triton refuses it (\"Ensemble model must have "
                "platform type 'ensemble' and empty backend type\"): remove backend")
    elif backend:
        info.kind = backend
        _backend_pair(info, add)
    elif platform:
        info.kind = PLATFORMS.get(platform)
        if info.kind is None:
            add("platform-unknown", name, file,
                f"platform {platform!r} is not one Triton knows ({', '.join(sorted(PLATFORMS))}) and there is no backend; "
                f"Triton refuses it (\"unexpected platform type {platform!r}\"): fix it, or set backend instead")
    else:
        _inferred(info, add)


def _backend_pair(info: ModelInfo, add: Add) -> None:
    config, name, file = info.config, info.name, info.config_file
    assert config is not None
    platform, backend = config.platform, config.backend
    if backend == "tensorflow" and not platform:
        platform = _tensorflow_platform(info)
    if backend in TYPED_BACKENDS and PLATFORMS.get(platform or _platform_of(backend)) != backend:
        shown = platform or "(none, and no model.savedmodel or model.graphdef to infer it from)"
        add("platform-backend-pair", name, file,
            f"platform {shown} is not the platform of backend {backend!r}; Triton refuses the pair (\"unexpected "
            f"'platform' and 'backend' pair, got:{platform}, {backend}\"): remove platform, or set "
            f"{', '.join(repr(p) for p, b in PLATFORMS.items() if b == backend)}")
    elif platform and backend not in TYPED_BACKENDS and PLATFORMS.get(platform, "?") != backend:
        add("platform-conflict", name, file,
            f"platform {platform!r} with backend {backend!r}: Triton loads it with {backend!r} and ignores the platform; "
            "remove platform")
    if backend not in KNOWN_BACKENDS:
        add("backend-unknown", name, file,
            f"backend {backend!r} is not one the linter knows; Triton loads it only where that backend is installed "
            "(its files are not checked)")


#: backend -> the platform Triton's auto-complete fills in when the backend is given alone (not tensorflow's: two)
_FILLED_PLATFORM = {b: p for p, b in PLATFORMS.items() if b not in (None, "tensorflow")}


def _platform_of(backend: str) -> str:
    """The platform Triton's auto-complete fills in for a backend given alone."""
    return _FILLED_PLATFORM.get(backend, "")


def _tensorflow_platform(info: ModelInfo) -> str:
    assert info.config is not None
    filename = info.config.default_model_filename
    if filename in ("model.savedmodel", "model.graphdef"):
        return "tensorflow_" + filename.split(".")[1]
    return "tensorflow_savedmodel" if inferred_backend(info.path) == "tensorflow" else ""


def _inferred(info: ModelInfo, add: Add) -> None:
    config, name, file = info.config, info.name, info.config_file
    assert config is not None
    by_name = {f: b for b, f in DEFAULT_FILES.items()}.get(config.default_model_filename)
    inferred = ("tensorflow" if by_name.startswith("tensorflow") else by_name) if by_name else inferred_backend(info.path)
    if inferred is None:
        add("platform-missing", name, file,
            "config sets neither platform nor backend and the first version folder holds no model file Triton knows "
            f"({', '.join(sorted(DEFAULT_FILES.values()))}); add backend: \"...\"")
        return
    info.kind = inferred
    add("platform-inferred", name, file,
        f"config sets neither platform nor backend; Triton infers backend {inferred!r} from the file name: "
        f"write backend: \"{inferred}\" so a renamed file cannot change it")


def effective_platform(info: ModelInfo) -> str:
    """The platform after Triton's auto-complete (empty for python and custom backends)."""
    assert info.config is not None
    return info.config.platform or _platform_of(info.kind or "")


# --- inputs and outputs --------------------------------------------------------------------


def check_tensors(info: ModelInfo, add: Add) -> None:
    """Inputs and outputs as ValidateIOShape / ValidateModelInput see them; then batch IO and labels."""
    config = info.config
    assert config is not None
    for kind, tensors in (("input", config.input), ("output", config.output)):
        seen: set[str] = set()
        for t in tensors:
            if not t.name:
                add("tensor-name-empty", info.name, info.config_file,
                    f"an {kind} has no name; Triton refuses it (\"model {kind} must specify 'name'\"): name it")
                continue
            if t.name in seen:
                add("tensor-duplicate", info.name, info.config_file,
                    f"two {kind}s are named {t.name!r}; Triton keeps the first and ignores the other: rename or remove one")
            seen.add(t.name)
            _tensor(info, kind, t, add)
    check_batch_io(info, add)
    check_labels(info, add)


def _tensor(info: ModelInfo, kind: str, t, add: Add) -> None:  # noqa: ANN001 - ModelInput or ModelOutput
    config, name, file = info.config, info.name, info.config_file
    assert config is not None
    what = f"{kind} {t.name!r}"
    if t.data_type == mc.TYPE_INVALID:
        add("datatype-invalid", name, file, f"{what} has no data_type; set one, e.g. TYPE_FP32")
    dims = list(t.dims)
    dims_ok = bool(dims) and all(d >= 1 or d == -1 for d in dims)
    if not dims_ok:
        add("dims-invalid", name, file,
            f"{what} has dims {listing(dims)}; give every dim as a positive size or -1 (variable), at least one "
            "(reshape does not replace dims)")
    if t.HasField("reshape"):
        _reshape(info, what, dims if dims_ok else None, list(t.reshape.shape), add)
    if kind == "input" and t.format in (mc.ModelInput.FORMAT_NHWC, mc.ModelInput.FORMAT_NCHW) and len(dims) != 3:
        add("tensor-format-dims", name, file,
            f"{what} has format {mc.ModelInput.Format.Name(t.format)} and {len(dims)} dims; Triton refuses it "
            "(\"model input NHWC/NCHW require 3 dims\"): give 3 dims or drop format")
    if effective_platform(info) != _TRT:
        for flag, said in (("is_shape_tensor", "shape tensors are"), ("is_non_linear_format_io", "non-linear IO format is")):
            if getattr(t, flag):
                add("tensorrt-only-field", name, file,
                    f"{what} sets {flag}, but {said} only supported for TensorRT; Triton refuses it: remove {flag}")


def _reshape(info: ModelInfo, what: str, dims: list[int] | None, shape: list[int], add: Add) -> None:
    config, name, file = info.config, info.name, info.config_file
    assert config is not None
    if not shape and config.max_batch_size == 0:
        add("reshape-invalid", name, file,
            f"{what} has an empty reshape but the model does not batch, which Triton refuses (scalar tensors are not "
            "supported): remove the reshape or batch the model")
    elif any(d < 1 and d != -1 for d in shape):
        add("reshape-invalid", name, file,
            f"{what} has reshape {listing(shape)}; every reshape dim must be a positive size or -1")
    elif dims is not None and not _same_size(dims, shape):
        add("reshape-mismatch", name, file,
            f"{what}: dims {listing(dims)} and reshape {listing(shape)} hold different numbers of elements (counted "
            "between the -1s, as Triton does); make them agree")


def _element_count(dims: list[int]) -> int:
    """Triton's GetElementCount: -1 with a variable dim, 0 for no dims, else the product."""
    if -1 in dims:
        return -1
    count = 0
    for i, d in enumerate(dims):
        count = d if i == 0 else count * d
    return count


def _chunks(dims: list[int]) -> list[int]:
    """Products of the runs of fixed dims between the -1s."""
    out, current = [], 1
    for d in dims:
        if d == -1:
            out.append(current)
            current = 1
        else:
            current *= d
    return out + [current]


def _same_size(dims: list[int], shape: list[int]) -> bool:
    a, b = _element_count(dims), _element_count(shape)
    if a != b and not (b == 0 and a == 1):
        return False
    return a != -1 or _chunks(dims) == _chunks(shape)


def check_batch_io(info: ModelInfo, add: Add) -> None:
    """batch_input and batch_output as ValidateBatchIO checks them."""
    config = info.config
    assert config is not None
    inputs = {t.name for t in config.input}
    outputs = {t.name for t in config.output}
    problems = []
    for b in config.batch_input:
        kind = mc.BatchInput.Kind.Name(b.kind)
        if len(b.source_input) != 1:
            problems.append(f"batch_input kind {kind} takes 1 source input, got {len(b.source_input)}")
        if b.data_type not in (mc.TYPE_INT32, mc.TYPE_FP32):
            problems.append(f"batch_input {listing(b.target_name)} must be TYPE_INT32 or TYPE_FP32")
        problems += [f"batch_input source {s!r} is not an input" for s in b.source_input if s not in inputs]
    for b in config.batch_output:
        if len(b.source_input) != 1:
            problems.append(f"batch_output takes 1 source input, got {len(b.source_input)}")
        problems += [f"batch_output source {s!r} is not an input" for s in b.source_input if s not in inputs]
        problems += [f"batch_output target {t!r} is not an output" for t in b.target_name if t not in outputs]
        if len(set(b.target_name)) != len(b.target_name):
            problems.append("a batch_output target is named twice")
    for problem in problems:
        add("batch-io-invalid", info.name, info.config_file, f"{problem}; Triton refuses the model: fix it")


# --- batching, scheduling, instances -------------------------------------------------------


def check_scheduling(info: ModelInfo, add: Add) -> None:
    """max_batch_size, the batchers, the response cache, instance groups, python parameters."""
    config, name, file = info.config, info.name, info.config_file
    assert config is not None
    if config.max_batch_size < 0:
        add("batch-size-invalid", name, file, f"max_batch_size {config.max_batch_size} is negative; use 0 (no batching) or more")
    if config.HasField("dynamic_batching"):
        _preferred(info, "dynamic_batching", list(config.dynamic_batching.preferred_batch_size), add)
        _priorities(info, add)
    if config.HasField("sequence_batching"):
        _sequence(info, add)
    if config.response_cache.enable and (config.model_transaction_policy.decoupled or config.HasField("sequence_batching")):
        what = "a decoupled model" if config.model_transaction_policy.decoupled else "a sequence-batched model"
        add("response-cache-conflict", name, file,
            f"response_cache is enabled on {what}, which Triton does not support and refuses: disable the cache")
    if config.HasField("ensemble_scheduling") and info.kind not in (None, "ensemble"):
        add("scheduling-not-ensemble", name, file,
            f"ensemble_scheduling is set but the platform is not 'ensemble' ({info.kind}); "
            "set platform: \"ensemble\" or remove the steps")
    if info.kind != "ensemble":
        check_instance_groups(info, add)
    if info.kind == "python":
        force = config.parameters.get("FORCE_CPU_ONLY_INPUT_TENSORS")
        if force is not None and force.string_value not in ("yes", "no"):
            add("python-parameter-invalid", name, file,
                f"parameter FORCE_CPU_ONLY_INPUT_TENSORS is {force.string_value!r}; the python backend refuses the model "
                "unless it is \"yes\" or \"no\"")


def _preferred(info: ModelInfo, where: str, sizes: list[int], add: Add) -> None:
    assert info.config is not None
    limit = info.config.max_batch_size
    bad = [s for s in sizes if s <= 0 or s > limit]
    if bad:
        add("preferred-batch-size", info.name, info.config_file,
            f"{where} preferred_batch_size {listing(bad)} is not within 1..max_batch_size ({limit}); "
            f"use sizes from 1 to {limit}" + ("" if limit else " (or give the model a max_batch_size)"))


def _priorities(info: ModelInfo, add: Add) -> None:
    assert info.config is not None
    dyn = info.config.dynamic_batching
    levels = dyn.priority_levels
    if levels:
        if not 1 <= dyn.default_priority_level <= levels:
            add("priority-level-invalid", info.name, info.config_file,
                f"default_priority_level {dyn.default_priority_level} is not in [1, {levels}] (priority_levels "
                f"{levels}); Triton refuses it: set default_priority_level within that range")
        bad = [k for k in dyn.priority_queue_policy if not 1 <= k <= levels]
        if bad:
            add("priority-level-invalid", info.name, info.config_file,
                f"priority_queue_policy names levels {listing(sorted(bad))} outside [1, {levels}]; use levels in range")
    if dyn.preserve_ordering:
        policies = [dyn.default_queue_policy, *dyn.priority_queue_policy.values()]
        delayed = any(p.default_timeout_microseconds and p.timeout_action == mc.ModelQueuePolicy.DELAY for p in policies)
        if levels > 1 or delayed:
            add("preserve-ordering-conflict", info.name, info.config_file,
                "preserve_ordering is true with " + ("several priority levels" if levels > 1 else "a DELAY timeout action")
                + "; Triton refuses the combination: drop one of them")


def _sequence(info: ModelInfo, add: Add) -> None:
    assert info.config is not None
    seq = info.config.sequence_batching
    if seq.HasField("oldest"):
        _preferred(info, "sequence_batching oldest", list(seq.oldest.preferred_batch_size), add)
    if seq.HasField("direct") and not 0.0 <= seq.direct.minimum_slot_utilization <= 1.0:
        add("sequence-batching-invalid", info.name, info.config_file,
            f"direct minimum_slot_utilization {seq.direct.minimum_slot_utilization} is outside (0, 1]; use a value in it")
    for problem in _control_problems(seq):
        add("sequence-batching-invalid", info.name, info.config_file, f"{problem}; Triton refuses the model: fix it")


def _control_problems(seq) -> list[str]:  # noqa: ANN001 - ModelSequenceBatching
    kinds = mc.ModelSequenceBatching.Control
    problems, names, by_kind = [], {}, {}
    for tensor in seq.control_input:
        if not tensor.name:
            problems.append("a sequence batching control tensor has no name")
        for control in tensor.control:
            kind = kinds.Kind.Name(control.kind)
            if tensor.name in names and names[tensor.name] != kind:
                problems.append(f"control tensor {tensor.name!r} is given for two control kinds")
            names[tensor.name] = kind
            if kind in by_kind:
                problems.append(f"sequence batching names more than one {kind} tensor")
            by_kind[kind] = control
    for kind, control in by_kind.items():
        pairs = [f for f in ("int32_false_true", "fp32_false_true", "bool_false_true") if len(getattr(control, f))]
        if kind == "CONTROL_SEQUENCE_CORRID":
            if pairs:
                problems.append(f"{kind} must not give {' or '.join(pairs)}")
            elif control.data_type not in (mc.TYPE_UINT64, mc.TYPE_INT64, mc.TYPE_UINT32, mc.TYPE_INT32, mc.TYPE_STRING):
                problems.append(f"{kind} has data type {mc.DataType.Name(control.data_type)}; allowed: UINT64, INT64, "
                                "UINT32, INT32, STRING")
        elif len(pairs) != 1:
            problems.append(f"{kind} must give exactly one of int32_false_true, fp32_false_true, bool_false_true")
        elif len(getattr(control, pairs[0])) != 2:
            problems.append(f"{kind} {pairs[0]} must have exactly 2 entries")
    return problems


def check_instance_groups(info: ModelInfo, add: Add) -> None:
    """Instance groups as ValidateInstanceGroup checks them (KIND_AUTO becomes CPU or GPU first)."""
    config, name, file = info.config, info.name, info.config_file
    assert config is not None
    group_kind = mc.ModelInstanceGroup.Kind
    for index, group in enumerate(config.instance_group):
        label = group.name or f"{name}_{index}"
        if group.count < 0:
            add("instance-count-invalid", name, file,
                f"instance group {label!r} has count {group.count}; Triton replaces a count below 1 with its default: "
                "use 1 or more")
        if group.kind in (group_kind.KIND_CPU, group_kind.KIND_MODEL) and len(group.gpus):
            add("instance-gpus-invalid", name, file,
                f"instance group {label!r} has kind {group_kind.Name(group.kind)} but lists GPUs {listing(group.gpus)}; "
                "Triton refuses it: remove gpus or use KIND_GPU")
        if group.kind == group_kind.KIND_GPU:
            add("instance-kind-gpu", name, file,
                f"instance group {label!r} has kind KIND_GPU: Triton loads it only on a server with "
                f"{'GPUs ' + listing(group.gpus) if len(group.gpus) else 'a GPU'} (a CPU canary refuses it); "
                "KIND_AUTO uses a GPU where there is one")
        if len(group.profile) and effective_platform(info) != _TRT:
            add("tensorrt-only-field", name, file,
                f"instance group {label!r} sets profile, which only TensorRT models support; Triton refuses it: remove it")
