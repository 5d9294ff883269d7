"""The ``repository.cascade`` and ``repository.fanout`` blocks of a release spec.

Both name their member models by a short key; each member is either ``release`` (this release's
exported ONNX model) or a path to another ONNX file (relative to the spec file)::

    repository:
      shape: cascade
      cascade:
        small: release              # asked first: model <name>_small
        large: models/large.onnx    # asked only for rows the small one is unsure of: <name>_large
        threshold: 0.9              # a row is sure when its highest probability >= threshold
    repository:
      shape: fanout
      fanout:
        members: {lr: release, tree: models/tree.onnx}   # models <name>_lr, <name>_tree
        output: probabilities       # the output every member has and the stage combines
        combine: mean               # mean | max | min, elementwise across members

The entry model (``<name>``) is the BLS stage itself. Every member must take the same inputs.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import SpecError

RELEASE = "release"
_MEMBER_RE = re.compile(r"^[a-z][a-z0-9_]{0,30}$")
_TENSOR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _member_source(value: str, field: str) -> str:
    if value == RELEASE:
        return value
    if not value.endswith(".onnx") or "\x00" in value:
        raise ValueError(f"{field} must be 'release' or a path to an .onnx file")
    return value


class CascadeSpec(_Strict):
    """A small model first; the large one only for rows whose confidence is below ``threshold``."""

    small: str = RELEASE
    large: str
    threshold: float = Field(gt=0, le=1)
    output: str = "probabilities"

    @field_validator("small", "large")
    @classmethod
    def _source(cls, v: str, info: Any) -> str:
        return _member_source(v, f"repository.cascade.{info.field_name}")

    @field_validator("threshold")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("repository.cascade.threshold must be a finite number in (0, 1]")
        return v

    @field_validator("output")
    @classmethod
    def _tensor(cls, v: str) -> str:
        if not _TENSOR_RE.fullmatch(v):
            raise ValueError("repository.cascade.output must be a tensor name (letters, digits, _)")
        return v

    @model_validator(mode="after")
    def _one_release(self) -> "CascadeSpec":
        if RELEASE not in (self.small, self.large):
            raise ValueError("one of repository.cascade.small or .large must be 'release' (this release's model)")
        return self

    def members(self) -> dict[str, str]:
        return {"small": self.small, "large": self.large}


class FanoutSpec(_Strict):
    """Several models asked concurrently; one output of theirs combined elementwise."""

    members: dict[str, str] = Field(min_length=2, max_length=16)
    output: str = "probabilities"
    combine: Literal["mean", "max", "min"] = "mean"

    @field_validator("members")
    @classmethod
    def _members(cls, v: dict[str, str]) -> dict[str, str]:
        for key, source in v.items():
            if not _MEMBER_RE.fullmatch(key):
                raise ValueError(
                    f"repository.fanout.members key {key!r} must be lower-case letters, digits and _ "
                    "(at most 31, starting with a letter): it becomes part of a model name"
                )
            _member_source(source, f"repository.fanout.members.{key}")
        if RELEASE not in v.values():
            raise ValueError("one of repository.fanout.members must be 'release' (this release's model)")
        return v

    @field_validator("output")
    @classmethod
    def _tensor(cls, v: str) -> str:
        if not _TENSOR_RE.fullmatch(v):
            raise ValueError("repository.fanout.output must be a tensor name (letters, digits, _)")
        return v


def parse_block(shape: str, data: dict[str, Any] | None) -> CascadeSpec | FanoutSpec:
    """Validate ``repository.cascade`` or ``repository.fanout``.

    Raises:
        SpecError: the block is missing or a field is invalid (each field named).
    """
    model = {"cascade": CascadeSpec, "fanout": FanoutSpec}[shape]
    if data is None:
        example = "{small: release, large: large.onnx, threshold: 0.9}" if shape == "cascade" else "{members: {a: release, b: b.onnx}}"
        raise SpecError(f"repository.shape is {shape!r} but repository.{shape} is missing; add e.g. {shape}: {example}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in (f"repository.{shape}", *err["loc"]))
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                msg = f"unknown field; valid fields: {', '.join(model.model_fields)}"
            parts.append(f"{loc}: {msg}")
        raise SpecError("release spec is invalid: " + "; ".join(parts)) from None
