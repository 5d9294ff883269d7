"""The contract a release makes with its clients, and what breaks it.

A client of the channel calls the entry model: it sends the entry's inputs (names, data types,
dims), batches of up to ``max_batch_size`` rows, and reads its outputs and the labels they name.
:func:`contract_of` reads that from a repository's entry ``config.pbtxt`` (through Triton's
ModelConfig protobuf); :func:`breaks` lists every difference that would break a client written
against the champion. Compatible changes are not breaks: a new output, a larger
``max_batch_size``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...repository.config import CONFIG_FILE, read_config, wire_name
from ...types import TensorSpec


@dataclass(frozen=True)
class Contract:
    """What a client of the entry model relies on."""

    entry: str
    inputs: dict[str, tuple[str, tuple[int, ...]]]
    outputs: dict[str, tuple[str, tuple[int, ...]]]
    max_batch_size: int | None
    labels: list[str] | None = None
    #: where it was read from, for messages
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry": self.entry, "max_batch_size": self.max_batch_size, "labels": self.labels, "source": self.source,
            "inputs": {n: {"datatype": d, "dims": list(s)} for n, (d, s) in self.inputs.items()},
            "outputs": {n: {"datatype": d, "dims": list(s)} for n, (d, s) in self.outputs.items()},
        }


def contract_of(repository: str | Path, entry: str, labels: list[str] | None) -> Contract:
    """The contract of ``entry`` in a Triton model repository (its config.pbtxt)."""
    config = read_config(Path(repository) / entry / CONFIG_FILE)

    def tensors(items: Any) -> dict[str, tuple[str, tuple[int, ...]]]:
        return {t.name: (wire_name(t.data_type), tuple(int(d) for d in t.dims)) for t in items}

    return Contract(entry=entry, inputs=tensors(config.input), outputs=tensors(config.output),
                    max_batch_size=int(config.max_batch_size), labels=labels, source=str(Path(repository) / entry))


def signature_contract(name: str, inputs: list[TensorSpec], outputs: list[TensorSpec], classes: list[Any] | None) -> Contract:
    """A native model's contract from its MLflow signature (for a champion that is not served)."""
    return Contract(
        entry=name, inputs={t.name: (t.datatype, tuple(t.dims)) for t in inputs},
        outputs={t.name: (t.datatype, tuple(t.dims)) for t in outputs}, max_batch_size=None,
        labels=[str(c) for c in classes] if classes is not None else None, source=f"the MLflow signature of {name}",
    )


def breaks(champion: Contract, candidate: Contract, *, outputs: bool = True) -> list[str]:
    """Every way ``candidate`` breaks a client written against ``champion``, one sentence each.

    Args:
        outputs: compare outputs too (a native champion's outputs are named by its flavor, not served).
    """
    found: list[str] = []
    for name, (dtype, dims) in champion.inputs.items():
        got = candidate.inputs.get(name)
        if got is None:
            found.append(f"input {name!r} ({dtype} {list(dims)}) was removed or renamed"
                         + (f"; the candidate takes {sorted(set(candidate.inputs) - set(champion.inputs))}" if set(candidate.inputs) - set(champion.inputs) else ""))
        else:
            found += _tensor_change("input", name, (dtype, dims), got)
    for name in sorted(set(candidate.inputs) - set(champion.inputs)):
        dtype, dims = candidate.inputs[name]
        found.append(f"input {name!r} ({dtype} {list(dims)}) is new and required: clients do not send it")
    if outputs:
        for name, (dtype, dims) in champion.outputs.items():
            got = candidate.outputs.get(name)
            if got is None:
                found.append(f"output {name!r} ({dtype} {list(dims)}) was removed or renamed")
            else:
                found += _tensor_change("output", name, (dtype, dims), got)
    if champion.max_batch_size is not None and candidate.max_batch_size is not None:
        if champion.max_batch_size > 0 and candidate.max_batch_size < champion.max_batch_size:
            found.append(f"max_batch_size dropped from {champion.max_batch_size} to {candidate.max_batch_size}: "
                         f"requests of up to {champion.max_batch_size} rows would be refused")
        elif champion.max_batch_size == 0 and candidate.max_batch_size > 0:
            found.append("batching was turned on (max_batch_size 0 -> "
                         f"{candidate.max_batch_size}): every tensor gains a batch dimension clients do not send")
    if champion.labels is not None and candidate.labels is not None and set(champion.labels) != set(candidate.labels):
        dropped = [x for x in champion.labels if x not in set(candidate.labels)]
        added = [x for x in candidate.labels if x not in set(champion.labels)]
        parts = ([f"dropped {dropped}"] if dropped else []) + ([f"added {added}"] if added else [])
        found.append(f"the label set changed: {', '.join(parts)}")
    return found


def _tensor_change(kind: str, name: str, was: tuple[str, tuple[int, ...]], now: tuple[str, tuple[int, ...]]) -> list[str]:
    out = []
    if was[0] != now[0]:
        out.append(f"{kind} {name!r} changed type from {was[0]} to {now[0]}")
    if was[1] != now[1]:
        out.append(f"{kind} {name!r} changed dims from {list(was[1])} to {list(now[1])}")
    return out
