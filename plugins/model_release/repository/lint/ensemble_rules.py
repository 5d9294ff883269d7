"""Ensemble rules, in the order Triton 2.51 checks an ensemble.

1. its own settings (``ValidateEnsembleSchedulingConfig``): no instance groups, optimization or
   warmup; steps that name a model, an input_map and an output_map;
2. the data flow of the config alone (``BuildEnsembleGraph``): each tensor written once, every
   input read, every output written, no tensor computed and left unread;
3. each step against its member once the members are loaded (``ValidateEnsembleConfig``): the
   member and version exist, batch sizes, map keys, required inputs mapped;
4. every end of a tensor against the first one registered (inputs, outputs, then the steps in
   order): same data type, and shapes that agree with or without the batch dimension;
5. no step (nor the outputs) fed from two different decoupled models.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ..config import wire_name
from .findings import listing
from .model_info import Add, ModelInfo


@dataclass(frozen=True)
class _End:
    """One end of an ensemble tensor: who produces or consumes it, its type, dims and whether it batches."""

    who: str
    datatype: str
    dims: tuple[int, ...]
    batching: bool

    @property
    def full(self) -> tuple[int, ...]:
        return ((-1,) if self.batching else ()) + self.dims


def _agree(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Triton's CompareDimsWithWildcard."""
    return len(a) == len(b) and all(x == y or -1 in (x, y) for x, y in zip(a, b))


def _where(index: int, step) -> str:  # noqa: ANN001 - ModelEnsembling.Step
    return f"step {index + 1} ({step.model_name!r})"


@dataclass
class _Ensemble:
    """One ensemble under check: its info, the repository's models and how to report."""

    info: ModelInfo
    models: dict[str, ModelInfo]
    add: Add
    ends: dict[str, list[_End]] = field(default_factory=dict)  # tensor -> ends, first registered first
    wiring_ok: bool = True

    def report(self, rule: str, message: str) -> None:
        self.add(rule, self.info.name, self.info.config_file, message)
        self.wiring_ok = False


def check_ensemble(ens: ModelInfo, models: dict[str, ModelInfo], add: Add) -> None:
    """Check one ensemble against the models of its repository, reporting through ``add``."""
    e = _Ensemble(ens, models, add)
    if not _own_settings(e):
        return
    _data_flow(e)
    _members(e)
    _consistency(e)
    if e.wiring_ok:
        _decoupled(e)


# --- 1. its own settings ---------------------------------------------------------------------


def _own_settings(e: _Ensemble) -> bool:
    """False when there are no usable steps (nothing further to check)."""
    config = e.info.config
    assert config is not None
    if len(config.instance_group):
        e.report("ensemble-instance-group",
                 "an ensemble has no instances of its own, Triton refuses instance_group on it; "
                 "remove instance_group (set instances on its member models instead)")
    own = [what for what, present in (("optimization", config.HasField("optimization")),
                                      ("model_warmup", len(config.model_warmup) > 0)) if present]
    if own:
        e.report("ensemble-own-settings",
                 f"{' and '.join(own)} cannot be set on an ensemble, Triton refuses it; set them on the member models")
    steps = config.ensemble_scheduling.step
    if not config.HasField("ensemble_scheduling") or not steps:
        e.report("ensemble-no-steps",
                 "platform is 'ensemble' but ensemble_scheduling has no step; add ensemble_scheduling { step [...] } "
                 "(dynamic_batching and sequence_batching cannot be set on an ensemble)")
        return False
    for index, step in enumerate(steps):
        missing = [part for part, empty in (("model_name", not step.model_name), ("input_map", not step.input_map),
                                            ("output_map", not step.output_map)) if empty]
        if missing:
            e.report("ensemble-step-incomplete",
                     f"step {index + 1} has no {' and no '.join(missing)}; Triton refuses the ensemble "
                     f"(\"must specify '{missing[0]}' in step {index}\"): every step names a model and maps inputs and outputs")
    return e.wiring_ok


# --- 2. the data flow of the config alone ---------------------------------------------------


def _data_flow(e: _Ensemble) -> None:
    config = e.info.config
    assert config is not None
    writers: dict[str, list[str]] = {}
    readers: dict[str, list[str]] = {}
    for index, step in enumerate(config.ensemble_scheduling.step):
        for key, tensor in step.output_map.items():
            writers.setdefault(tensor, []).append(f"output {key!r} of {_where(index, step)}")
        for key, tensor in step.input_map.items():
            readers.setdefault(tensor, []).append(f"input {key!r} of {_where(index, step)}")
    inputs = [t.name for t in config.input]
    outputs = {t.name for t in config.output}
    for tensor, who in sorted(writers.items()):
        if len(who) > 1:
            e.report("ensemble-tensor-double",
                     f"ensemble tensor {tensor!r} is written by {len(who)} step outputs ({'; '.join(who[:5])}); "
                     "give each its own tensor name in its output_map")
        if tensor in inputs:
            e.add("ensemble-input-overwritten", e.info.name, e.info.config_file,
                  f"ensemble tensor {tensor!r} is an ensemble input and also written by {who[0]}; Triton accepts it, "
                  "but the steps then read one or the other: give the output its own name")
    for name in inputs:
        if name not in readers and name not in writers:
            e.report("ensemble-input-unused",
                     f"ensemble input {name!r} is not read by any step, which Triton refuses; map it in a step's input_map "
                     "or remove it")
    for tensor in sorted((set(readers) | outputs) - set(writers) - set(inputs)):
        who = readers.get(tensor, ["the ensemble's output"])[0]
        e.report("ensemble-tensor-unproduced",
                 f"ensemble tensor {tensor!r} is read by {who} but no step writes it and it is not an ensemble input "
                 f"(written: {listing(sorted(writers))}); map a step output to it or fix the name")
    for tensor, who in sorted(writers.items()):
        if tensor not in readers and tensor not in outputs:
            e.report("ensemble-tensor-unused",
                     f"ensemble tensor {tensor!r} ({who[0]}) is computed but never read, which Triton refuses; "
                     "drop it from the output_map or make it an ensemble output")


# --- 3. each step against its member ----------------------------------------------------------


def _members(e: _Ensemble) -> None:
    config = e.info.config
    assert config is not None
    for t in config.input:
        _register(e, t.name, _End("ensemble input", wire_name(t.data_type), _own_dims(t), config.max_batch_size > 0))
    for t in config.output:
        _register(e, t.name, _End("ensemble output", wire_name(t.data_type), _own_dims(t), config.max_batch_size > 0))
    for index, step in enumerate(config.ensemble_scheduling.step):
        if step.model_name == e.info.name:
            continue  # a self-reference: reported as an ensemble cycle
        member = e.models.get(step.model_name)
        if member is None:
            e.report("ensemble-step-missing",
                     f"{_where(index, step)} names model {step.model_name!r}, which is not in the repository "
                     f"(models: {listing(sorted(e.models))}); add that model or fix the step's model_name")
        elif member.config is not None:
            _step(e, index, step, member)


def _own_dims(t) -> tuple[int, ...]:  # noqa: ANN001
    """An ensemble input's or output's dims as Triton takes them: its reshape when it has one."""
    return tuple(int(d) for d in (t.reshape.shape if t.HasField("reshape") else t.dims))


def _register(e: _Ensemble, tensor: str, end: _End) -> None:
    e.ends.setdefault(tensor, []).append(end)


def _step(e: _Ensemble, index: int, step, member: ModelInfo) -> None:  # noqa: ANN001
    config, mconf, where = e.info.config, member.config, _where(index, step)
    assert config is not None and mconf is not None
    if step.model_version != -1 and step.model_version not in member.served:
        e.report("ensemble-version-missing",
                 f"{where} asks for version {step.model_version} but {step.model_name!r} serves "
                 f"{listing(member.served) if member.served else 'none'} (model_version 0 is also what an omitted "
                 "model_version means; only -1 means the served one); use model_version: -1 or a version it serves")
    if 0 < mconf.max_batch_size < config.max_batch_size:
        e.report("ensemble-batch-size",
                 f"{where}: the ensemble's max_batch_size {config.max_batch_size} exceeds {step.model_name!r}'s "
                 f"{mconf.max_batch_size}; lower the ensemble's to at most {mconf.max_batch_size}")
    batching = mconf.max_batch_size > 0
    inputs = {t.name: t for t in mconf.input}
    outputs = {t.name: t for t in mconf.output}
    for side, mapping, tensors in (("input", step.input_map, inputs), ("output", step.output_map, outputs)):
        for key in sorted(set(mapping) - set(tensors)):
            e.report("ensemble-map-unknown",
                     f"{where}: {side}_map key {key!r} is not an {side} of {step.model_name!r} "
                     f"(its {side}s: {listing(sorted(tensors))}); use one of those names")
    for key, t in inputs.items():
        if key in step.input_map:
            _register(e, step.input_map[key], _End(f"input {key!r} of {where}", wire_name(t.data_type), tuple(t.dims), batching))
        elif not t.optional:
            e.report("ensemble-input-unmapped",
                     f"{where}: input {key!r} of {step.model_name!r} is not in the step's input_map; "
                     f"map it to an ensemble tensor: input_map {{ key: {key!r} value: \"...\" }}")
    for key, tensor in step.output_map.items():
        if key in outputs:
            t = outputs[key]
            _register(e, tensor, _End(f"output {key!r} of {where}", wire_name(t.data_type), tuple(t.dims), batching))


# --- 4. every end of a tensor against the first ------------------------------------------------


def _consistency(e: _Ensemble) -> None:
    for tensor, ends in sorted(e.ends.items()):
        first = ends[0]
        for end in ends[1:]:
            if end.datatype != first.datatype:
                e.report("ensemble-dtype-mismatch",
                         f"ensemble tensor {tensor!r}: {first.who} is {first.datatype} but {end.who} is "
                         f"{end.datatype}; make the two data types agree")
            elif not (_agree(first.dims, end.dims) or _agree(first.full, end.full)):
                e.report("ensemble-shape-mismatch",
                         f"ensemble tensor {tensor!r}: {first.who} has shape {list(first.full)} but {end.who} has "
                         f"{list(end.full)} (batch dim included, where the model batches), and their dims differ too; "
                         "make the dims (and max_batch_size) agree")


# --- 5. decoupled origins -------------------------------------------------------------------


_SINK = "\0outputs"


def _decoupled(e: _Ensemble) -> None:
    """Label every tensor by the decoupled model it comes from (0: none), as Triton does; refuse a mix."""
    config = e.info.config
    assert config is not None
    prev: dict[str, list[str]] = {_SINK: [t.name for t in config.output]}
    nxt: dict[str, list[str]] = {t.name: [_SINK] for t in config.output}
    origin: dict[str, tuple[int, bool]] = {}  # tensor -> (step index, member decoupled)
    for index, step in enumerate(config.ensemble_scheduling.step):
        member = e.models.get(step.model_name)
        for out in step.output_map.values():
            origin[out] = (index, member is not None and member.decoupled)
            prev.setdefault(out, []).extend(step.input_map.values())
            for source in step.input_map.values():
                nxt.setdefault(source, []).append(out)
    label = {t.name: 0 for t in config.input}
    sibling: dict[int, int] = {}
    counter = 0
    queue = deque(label)
    while queue:
        for node in nxt.get(queue.popleft(), []):
            if node in label or any(p not in label for p in prev.get(node, [])):
                continue
            labels = {label[p] for p in prev[node]}
            if len(labels) > 1:
                where = "the ensemble's outputs come" if node == _SINK else \
                    f"{_where(origin[node][0], config.ensemble_scheduling.step[origin[node][0]])} receives inputs that come"
                e.report("ensemble-decoupled-mix",
                         f"{where} from different decoupled models, which Triton refuses; feed each step from one "
                         "decoupled branch only")
                return
            index, decoupled = origin.get(node, (-1, False))
            if index in sibling:
                label[node] = sibling[index]
            else:
                if decoupled:
                    counter += 1
                label[node] = counter if decoupled else labels.pop()
                if index >= 0:
                    sibling[index] = label[node]
            queue.append(node)
