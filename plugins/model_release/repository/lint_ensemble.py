"""Ensemble rules: every step's maps, every tensor's producer and consumers, types, shapes, batch sizes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from .config import wire_name

if TYPE_CHECKING:
    from .lint import ModelInfo

Add = Callable[[str, str, str, str], None]  # rule, model, file, message


@dataclass(frozen=True)
class _End:
    """One end of an ensemble tensor: who produces or consumes it, with which type and full shape."""

    who: str
    datatype: str
    shape: tuple[int, ...]


def _full_shape(dims, max_batch_size: int) -> tuple[int, ...]:
    return ((-1,) if max_batch_size > 0 else ()) + tuple(int(d) for d in dims)


def _compatible(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return len(a) == len(b) and all(x == y or -1 in (x, y) for x, y in zip(a, b))


def check_ensemble(ens: "ModelInfo", models: dict[str, "ModelInfo"], add: Add) -> None:
    """Check one ensemble against the models of its repository, reporting through ``add``."""
    config, name, file = ens.config, ens.name, ens.config_file
    assert config is not None
    if len(config.instance_group):
        add("ensemble-instance-group", name, file,
            "an ensemble has no instances of its own, Triton refuses instance_group on it; "
            "remove instance_group (set instances on its member models instead)")
    steps = config.ensemble_scheduling.step if config.HasField("ensemble_scheduling") else []
    if not steps:
        add("ensemble-no-steps", name, file,
            "platform is 'ensemble' but ensemble_scheduling has no step; add ensemble_scheduling { step [...] } "
            "(dynamic_batching and sequence_batching cannot be set on an ensemble)")
        return

    producers: dict[str, list[_End]] = {}
    consumers: dict[str, list[_End]] = {}
    for t in config.input:
        producers.setdefault(t.name, []).append(_End("ensemble input", wire_name(t.data_type), _full_shape(t.dims, config.max_batch_size)))
    for t in config.output:
        consumers.setdefault(t.name, []).append(_End("ensemble output", wire_name(t.data_type), _full_shape(t.dims, config.max_batch_size)))

    for index, step in enumerate(steps):
        where = f"step {index + 1} ({step.model_name!r})"
        member = models.get(step.model_name)
        if step.model_name == name:
            continue  # a self-reference: reported as a dependency cycle
        if member is None:
            known = ", ".join(sorted(models)) or "none"
            add("ensemble-step-missing", name, file,
                f"{where} names model {step.model_name!r}, which is not in the repository (models: {known}); "
                "add that model or fix the step's model_name")
            continue
        if member.config is None:
            continue  # its own findings say why
        mconf = member.config
        if step.model_version not in (-1, 0) and step.model_version not in member.served:
            add("ensemble-version-missing", name, file,
                f"{where} asks for version {step.model_version} but {step.model_name!r} serves {member.served or 'none'}; "
                "use model_version: -1 (the served version) or one it serves")
        if config.max_batch_size > 0 and mconf.max_batch_size == 0:
            add("ensemble-batch-size", name, file,
                f"{where}: the ensemble batches (max_batch_size {config.max_batch_size}) but {step.model_name!r} "
                "does not (max_batch_size 0); give the member a max_batch_size or set the ensemble's to 0")
        elif config.max_batch_size > mconf.max_batch_size:
            add("ensemble-batch-size", name, file,
                f"{where}: the ensemble's max_batch_size {config.max_batch_size} exceeds {step.model_name!r}'s "
                f"{mconf.max_batch_size}; lower the ensemble's to at most {mconf.max_batch_size}")
        member_inputs = {t.name: t for t in mconf.input}
        member_outputs = {t.name: t for t in mconf.output}
        for key, tensor in step.input_map.items():
            t = member_inputs.get(key)
            if t is None:
                add("ensemble-map-unknown", name, file,
                    f"{where}: input_map key {key!r} is not an input of {step.model_name!r} "
                    f"(its inputs: {sorted(member_inputs)}); use one of those names")
                continue
            consumers.setdefault(tensor, []).append(
                _End(f"input {key!r} of {where}", wire_name(t.data_type), _full_shape(t.dims, mconf.max_batch_size)))
        for key, t in member_inputs.items():
            if key not in step.input_map and not t.optional:
                add("ensemble-input-unmapped", name, file,
                    f"{where}: input {key!r} of {step.model_name!r} is not in the step's input_map; "
                    f"map it to an ensemble tensor: input_map {{ key: {key!r} value: \"...\" }}")
        for key, tensor in step.output_map.items():
            t = member_outputs.get(key)
            if t is None:
                add("ensemble-map-unknown", name, file,
                    f"{where}: output_map key {key!r} is not an output of {step.model_name!r} "
                    f"(its outputs: {sorted(member_outputs)}); use one of those names")
                continue
            producers.setdefault(tensor, []).append(
                _End(f"output {key!r} of {where}", wire_name(t.data_type), _full_shape(t.dims, mconf.max_batch_size)))

    for tensor, ends in sorted(producers.items()):
        if len(ends) > 1:
            add("ensemble-tensor-double", name, file,
                f"ensemble tensor {tensor!r} is written by {len(ends)} producers ({'; '.join(e.who for e in ends)}); "
                "give each producer its own tensor name in its output_map")
    for tensor, ends in sorted(consumers.items()):
        if tensor not in producers:
            add("ensemble-tensor-unproduced", name, file,
                f"ensemble tensor {tensor!r} is read by {ends[0].who} but no step produces it and it is not an "
                f"ensemble input (produced: {sorted(producers)}); map a step output to it or fix the name")
            continue
        source = producers[tensor][0]
        for end in ends:
            if end.datatype != source.datatype:
                add("ensemble-dtype-mismatch", name, file,
                    f"ensemble tensor {tensor!r}: {source.who} is {source.datatype} but {end.who} takes "
                    f"{end.datatype}; make the two data types agree")
            elif not _compatible(source.shape, end.shape):
                add("ensemble-shape-mismatch", name, file,
                    f"ensemble tensor {tensor!r}: {source.who} has shape {list(source.shape)} but {end.who} takes "
                    f"{list(end.shape)} (batch dim included); make the dims (and max_batch_size) agree")
    for t in config.input:
        if t.name not in consumers:
            add("ensemble-input-unused", name, file,
                f"ensemble input {t.name!r} is not read by any step; map it in a step's input_map or remove it")
    for tensor, ends in sorted(producers.items()):
        if tensor not in consumers and ends[0].who != "ensemble input":
            add("ensemble-tensor-unused", name, file,
                f"ensemble tensor {tensor!r} ({ends[0].who}) is computed but never read, which Triton refuses; "
                "drop it from the output_map or make it an ensemble output")
