"""config.pbtxt through Triton's own ModelConfig protobuf (no hand-written parser).

``tritonclient[grpc]`` ships the generated ``model_config_pb2``; ``text_format`` reads and writes
its text form, which is what config.pbtxt is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from ..model.dtypes import config_type, wire_type
from ..workspace import atomic_write_bytes

ModelConfig = mc.ModelConfig
CONFIG_FILE = "config.pbtxt"


class ConfigParseError(ValueError):
    """config.pbtxt is not a valid ModelConfig in text format (the message says where)."""


def parse_config(text: str) -> mc.ModelConfig:
    """Parse config.pbtxt text into a ModelConfig.

    Raises:
        ConfigParseError: the text is not valid ModelConfig text format (line and column named).
    """
    try:
        return text_format.Parse(text, mc.ModelConfig())
    except text_format.ParseError as exc:
        raise ConfigParseError(str(exc)) from None


def read_config(path: str | Path) -> mc.ModelConfig:
    """Read a config.pbtxt file (see :func:`parse_config`)."""
    return parse_config(Path(path).read_text(encoding="utf-8"))


def config_text(config: mc.ModelConfig) -> str:
    """The config.pbtxt text of a ModelConfig."""
    return text_format.MessageToString(config)


def write_config(path: str | Path, config: mc.ModelConfig) -> None:
    """Write a ModelConfig as config.pbtxt, atomically."""
    atomic_write_bytes(path, config_text(config).encode("utf-8"))


def data_type(wire: str) -> int:
    """``FP32`` -> ``mc.TYPE_FP32`` (``BYTES`` -> ``TYPE_STRING``)."""
    return mc.DataType.Value(config_type(wire))


def wire_name(value: int) -> str:
    """``mc.TYPE_STRING`` -> ``BYTES``: the wire form of a config data type."""
    return wire_type(mc.DataType.Name(value))


def batched_dims(dims: Iterable[int], max_batch_size: int) -> tuple[list[int], list[int] | None]:
    """config ``dims`` (and ``reshape`` when needed) for a tensor whose shape excludes the batch dim.

    A batch-only tensor (shape ``[N]``) has no dims left once the batch dim is dropped; Triton wants
    ``dims: [1]`` with ``reshape: {shape: []}`` for it. Without batching the batch dim is part of
    the dims, as ``-1``.
    """
    dims = [int(d) for d in dims]
    if max_batch_size == 0:
        return [-1, *dims], None
    if not dims:
        return [1], []
    return dims, None


def add_input(config: mc.ModelConfig, name: str, datatype: str, dims: Iterable[int], *, optional: bool = False) -> None:
    """Append an input, batch dim excluded from ``dims``, reshaped when batch-only."""
    shape, reshape = batched_dims(dims, config.max_batch_size)
    tensor = config.input.add(name=name, data_type=data_type(datatype), dims=shape, optional=optional)
    if reshape is not None:
        tensor.reshape.SetInParent()
        tensor.reshape.shape.extend(reshape)


def add_output(config: mc.ModelConfig, name: str, datatype: str, dims: Iterable[int]) -> None:
    """Append an output, batch dim excluded from ``dims``, reshaped when batch-only."""
    shape, reshape = batched_dims(dims, config.max_batch_size)
    tensor = config.output.add(name=name, data_type=data_type(datatype), dims=shape)
    if reshape is not None:
        tensor.reshape.SetInParent()
        tensor.reshape.shape.extend(reshape)


def pin_version(config: mc.ModelConfig, version: int) -> None:
    """An explicit version policy: serve exactly ``version``, whatever other folders exist."""
    config.version_policy.specific.versions[:] = [version]
