"""``repository``: the shape of the Triton repository a release becomes (classifier, embedding, cascade, fanout, single)."""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ..safe_text import echo
from .strict import Tolerances, _Strict

#: a cascade or fanout member that is this release's own exported model
RELEASE = "release"
_MEMBER_RE = re.compile(r"[a-z][a-z0-9_]{0,30}")
_TENSOR_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


class DynamicBatching(_Strict):
    max_queue_delay_microseconds: int = Field(100, ge=0, description="How long Triton's dynamic batcher holds a "
                                                                     "request to batch it with others, in microseconds.")
    preferred_batch_size: list[int] = Field([], description="Batch sizes the batcher prefers to form ([]: any up to "
                                                            "max_batch_size).")


def _member_source(value: str) -> str:
    """``release``, ``models:/NAME@ALIAS``, ``models:/NAME/VERSION`` or an .onnx path (see :mod:`..members`)."""
    from ..intake.members import parse_member

    parse_member(value)
    return value


def _member_tolerances(block: str, members: dict[str, str], tolerances: dict[str, Tolerances]) -> None:
    """Refuse ``tolerances.KEY`` for a key that is not a registered member (only those are exported here)."""
    from ..intake.members import parse_member

    registered = sorted(k for k, v in members.items() if parse_member(v).kind == "registered")
    for key in tolerances:
        if key not in registered:
            raise ValueError(
                f"repository.{block}.tolerances.{echo(key)[1:-1]} names no registered member; the registered members: "
                f"{', '.join(registered) or 'none'}. Tolerances apply to a member given as models:/NAME@ALIAS or "
                "models:/NAME/VERSION (this release's own model uses export.tolerances)"
            )


def _tensor_name(value: str) -> str:
    if not _TENSOR_RE.fullmatch(value):
        raise ValueError(f"{echo(value)} is not a tensor name (letters, digits and _, not starting with a digit)")
    return value


class CascadeSpec(_Strict):
    """``repository.cascade``: a small model first; the large one only for rows it is unsure of.

    ``small`` and ``large`` are ``release``, a registered model (``models:/NAME@ALIAS`` or
    ``models:/NAME/VERSION``, exported and parity-checked like the release's own model, with
    ``tolerances.<member>`` when given, else ``export.tolerances``) or a path to an .onnx file
    (unregistered); one must be ``release``. A row is sure when its highest ``output`` value is at
    least ``threshold`` (in (0, 1]). Models ``<name>_small`` and ``<name>_large`` are called by the
    BLS router ``<name>``.
    """

    small: str = Field(RELEASE, description="The model asked first: release (this spec's model), models:/NAME@ALIAS, "
                                            "models:/NAME/VERSION or an .onnx path.")
    large: str = Field(description="The model asked for the rows the small one is unsure of (the same forms).")
    threshold: float = Field(gt=0, le=1, description="A row is sure when its highest output value is at least this; "
                                                     "the others go to the large model.")
    output: str = Field("probabilities", description="The members' output the router reads and the cascade serves.")
    tolerances: dict[str, Tolerances] = Field({}, description="A registered member's own export parity tolerances, by "
                                                              "member key (else export.tolerances).")

    _source = field_validator("small", "large")(_member_source)
    _tensor = field_validator("output")(_tensor_name)

    @field_validator("threshold")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("must be a finite number in (0, 1]")
        return v

    @model_validator(mode="after")
    def _one_release(self) -> "CascadeSpec":
        if RELEASE not in (self.small, self.large):
            raise ValueError("one of repository.cascade.small or .large must be 'release' (this release's model)")
        _member_tolerances("cascade", self.members(), self.tolerances)
        return self

    def members(self) -> dict[str, str]:
        return {"small": self.small, "large": self.large}


class FanoutSpec(_Strict):
    """``repository.fanout``: several models asked concurrently, one output combined elementwise.

    ``members`` maps a short key (lower-case, it becomes model ``<name>_<key>``) to ``release``, a
    registered model (``models:/NAME@ALIAS``, ``models:/NAME/VERSION``; its parity tolerances in
    ``tolerances.<key>``) or an .onnx path; ``combine`` is ``mean`` (default), ``max`` or ``min``.
    """

    members: dict[str, str] = Field(min_length=2, max_length=16, description="Member key -> release, a registered "
                                                                             "model (models:/...) or an .onnx path; "
                                                                             "every member answers every row.")
    output: str = Field("probabilities", description="The members' output that is combined and served.")
    combine: Literal["mean", "max", "min"] = Field("mean", description="How the members' outputs are combined, "
                                                                       "element by element.")
    tolerances: dict[str, Tolerances] = Field({}, description="A registered member's own export parity tolerances, by "
                                                              "member key (else export.tolerances).")

    _tensor = field_validator("output")(_tensor_name)

    @field_validator("members")
    @classmethod
    def _members(cls, v: dict[str, str]) -> dict[str, str]:
        for key, source in v.items():
            if not _MEMBER_RE.fullmatch(key):
                raise ValueError(
                    f"member key {echo(key)} must be lower-case letters, digits and _ "
                    "(at most 31, starting with a letter): it becomes part of a model name"
                )
            _member_source(source)
        if RELEASE not in v.values():
            raise ValueError("one of repository.fanout.members must be 'release' (this release's model)")
        return v

    @model_validator(mode="after")
    def _tolerance_keys(self) -> "FanoutSpec":
        _member_tolerances("fanout", self.members, self.tolerances)
        return self


_SHAPE_EXAMPLES = {
    "cascade": "{small: release, large: large.onnx, threshold: 0.9}",
    "fanout": "{members: {a: release, b: b.onnx}}",
}


class RepositorySpec(_Strict):
    shape: Literal["classifier", "cascade", "fanout", "single", "embedding"] = Field("classifier", description=(
        "The Triton repository the release becomes: classifier (ensemble: model, postprocess answering label names), "
        "embedding (the model's vectors, judged as vectors against the champion), single (the model as is), cascade, fanout."))
    output: str | None = Field(None, description=(
        "The model output the shape serves: a classifier's class scores (default the output named probabilities), an "
        "embedding model's vectors (default embedding); unnamed and absent, the model's only floating output with one "
        "axis after the batch. Checked at export before anything is converted."))
    scores: Literal["auto", "probabilities", "logits"] = Field("auto", description=(
        "What a classifier's class scores are: logits (raw scores) are served through a softmax in the postprocess and "
        "judged as probabilities; auto decides at export from the native answers (rows in [0, 1] summing to 1 are "
        "probabilities, anything else raw scores)."))
    max_batch_size: int = Field(64, ge=0, le=1 << 20, description="The most rows one request may carry (Triton's "
                                                                  "max_batch_size; 0: the model takes no batch axis).")
    instances: int = Field(1, ge=1, le=64, description="Instances of each leaf model Triton runs side by side.")
    dynamic_batching: DynamicBatching | None = Field(DynamicBatching(), description="Triton's dynamic batcher on the "
                                                                                   "leaf models; null: off.")
    labels: list[str] | None = Field(None, description=(
        "The class names in class order, one per class of the model: the classifier's served label, and for cascade "
        "and fan-out the names of their served scores' classes, so golden.target may give the ground truth in names"))
    top_k: int = Field(1, ge=1, description="How many label names, best first, a classifier's label output holds.")
    preprocess: bool = Field(False, description="Put a python preprocess step (the template's) before the model in "
                                                "the ensemble.")
    model_version: int | None = Field(None, ge=1, description="The Triton version folder the release's models get; "
                                                              "null: the store's history decides (one past the last).")
    cascade: CascadeSpec | None = Field(None, description="The cascade shape's members and router (shape: cascade).")
    fanout: FanoutSpec | None = Field(None, description="The fan-out shape's members and how they combine "
                                                        "(shape: fanout).")

    @model_validator(mode="after")
    def _head_for_shape(self) -> "RepositorySpec":
        if self.scores != "auto" and self.shape != "classifier":
            raise ValueError(f"repository.scores is {self.scores!r} but repository.shape is {self.shape!r}; class scores are "
                             "served by the classifier shape: set shape: classifier or remove repository.scores")
        if self.output is not None and self.shape not in ("classifier", "embedding"):
            raise ValueError(f"repository.output names {echo(self.output)} but repository.shape {self.shape!r} serves every "
                             "output; it picks the output of the classifier and embedding shapes")
        return self

    @model_validator(mode="after")
    def _block_for_shape(self) -> "RepositorySpec":
        for block in ("cascade", "fanout"):
            given = getattr(self, block) is not None
            if self.shape == block and not given:
                raise ValueError(
                    f"repository.shape is {block!r} but repository.{block} is missing; add e.g. {block}: {_SHAPE_EXAMPLES[block]}"
                )
            if given and self.shape != block:
                raise ValueError(
                    f"repository.{block} is given but repository.shape is {self.shape!r}; set shape: {block} or remove the block"
                )
        return self

