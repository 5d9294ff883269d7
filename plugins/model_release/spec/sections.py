"""The spec's sections other than the repository and the canary: model, golden, export, tensorrt, promote."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from .. import names
from ..safe_text import echo
from .strict import Tolerance, Tolerances, _Strict

#: the highest model version the registry stores (MLflow keeps versions as 32-bit integers)
MAX_MODEL_VERSION = 2**31 - 1


class ModelRef(_Strict):
    name: str = Field(description="The registered model's name in the MLflow registry (MLflow's own naming rules).")
    alias: str | None = Field(None, description="The alias to release (e.g. candidate), resolved once to one version "
                                                "at the start of the run; give this or version.")
    version: int | None = Field(None, ge=1, le=MAX_MODEL_VERSION,
                                description="A fixed model version to release instead of an alias; give this or alias.")

    @field_validator("name")
    @classmethod
    def _registered_name(cls, v: str) -> str:
        if not names.is_registered_model(v):
            raise ValueError(f"{echo(v)} is not a registered model name: {names.REGISTERED_MODEL_RULE}")
        return v

    @field_validator("alias")
    @classmethod
    def _alias(cls, v: str | None) -> str | None:
        if v is not None and not names.is_alias(v):
            raise ValueError(f"{echo(v)} is not a valid MLflow alias (letters, digits, _ and -, starting with a letter "
                             "or _), for example candidate")
        return v

    @model_validator(mode="after")
    def _one_of(self) -> "ModelRef":
        if (self.alias is None) == (self.version is None):
            raise ValueError("give exactly one of model.alias (e.g. candidate) or model.version (e.g. 3)")
        return self

    @property
    def uri(self) -> str:
        return f"models:/{self.name}@{self.alias}" if self.alias else f"models:/{self.name}/{self.version}"


#: golden.min_rows when the spec gives none: fewer rows than this judge nothing
DEFAULT_MIN_GOLDEN_ROWS = 100
#: at most this many golden.slices columns (each one's gates share the canary's confidence)
MAX_SLICE_COLUMNS = 8


class GoldenSpec(_Strict):
    """``golden``: the rows every gate replays.

    ``source`` is ``input_example`` (the rows logged with the model) or ``file`` (``path``: an
    .npz or .parquet file relative to the spec); at most ``rows`` rows are used, read
    ``batch_rows`` at a time. ``target`` names the file's ground-truth column (class values or
    label names for a classifier, numbers for a regressor); without it the quality gates are
    skipped and the report says so. A golden set of fewer than ``min_rows`` rows (default 100)
    is refused; lowering it is recorded in the report. NaN or infinite inputs are refused unless
    ``allow_nonfinite_inputs`` is true (for models that take missing values). ``slices`` names
    categorical columns of the golden file (strings or integers, besides the inputs and the
    target): a classifier's accuracy and negative-flip gates are run again on the rows of each of
    their values (a slice of fewer than ``canary.classes.min_support`` rows is listed, not gated).
    """

    source: Literal["input_example", "file"] = Field(
        "input_example", description="Where the golden rows come from: the input example logged with the model, or "
                                     "a file (path); only a file can hold ground truth.")
    path: str | None = Field(None, description="The golden file (.npz or .parquet), relative to the spec; keys are the "
                                               "model's Triton input names, plus the target and slice columns.")
    rows: int = Field(4096, ge=1, description="At most this many golden rows are replayed (the file is cut, not sampled).")
    batch_rows: int = Field(1024, ge=1, description="Rows read, checked and replayed at a time: memory follows this, "
                                                    "not the file's size.")
    target: str | None = Field(None, min_length=1, description="The golden file's ground-truth column (class values or "
                                                               "label names, numbers for a regressor); without it the "
                                                               "quality gates are skipped and the report says so.")
    min_rows: int = Field(DEFAULT_MIN_GOLDEN_ROWS, ge=1, description="Fewer golden rows are refused before anything is "
                                                                      "converted; a lower value is recorded in the report.")
    allow_nonfinite_inputs: bool = Field(False, description="Accept NaN or infinite golden inputs, for models that "
                                                            "take missing values (tree ensembles); refused otherwise.")
    slices: list[str] = Field([], max_length=MAX_SLICE_COLUMNS,
                              description="Categorical columns of the golden file whose values are gated one by one "
                                          "(a classifier's accuracy and negative flips per slice); needs target.")

    @model_validator(mode="after")
    def _path_when_file(self) -> "GoldenSpec":
        if self.source == "file" and not self.path:
            raise ValueError("golden.path is required when golden.source is 'file' (an .npz or .parquet file)")
        if self.path and not self.path.endswith((".npz", ".parquet")):
            raise ValueError(f"golden.path {echo(self.path)} must end in .npz or .parquet")
        if self.path and "\x00" in self.path:
            raise ValueError(f"golden.path {echo(self.path)} holds a NUL character")
        if self.target is not None and self.source != "file":
            raise ValueError(
                f"golden.target {echo(self.target)} names a ground-truth column, which only a golden file has; "
                "set golden.source: file and golden.path (an .npz or .parquet file holding the inputs and the target)"
            )
        self._check_slices()
        if self.min_rows > self.rows:
            raise ValueError(f"golden.min_rows {self.min_rows} exceeds golden.rows {self.rows}; raise golden.rows")
        return self

    def _check_slices(self) -> None:
        for column in self.slices:
            if not column or "\x00" in column:
                raise ValueError(f"golden.slices: {echo(column)} is not a column name; name categorical columns of the golden file")
        if self.slices and self.target is None:
            raise ValueError(
                f"golden.slices {self.slices} gate each slice against the ground truth, which this spec lacks; "
                "set golden.target (the golden file's ground-truth column) or remove golden.slices"
            )
        if self.target in self.slices:
            raise ValueError(f"golden.slices names the target column {echo(self.target)}; name other columns of the golden file")
        repeated = sorted({c for c in self.slices if self.slices.count(c) > 1})
        if repeated:
            raise ValueError(f"golden.slices names {', '.join(map(echo, repeated))} more than once; name each column once")


class ExportSpec(_Strict):
    """``export``: the conversion to ONNX and its parity gate.

    ``opset`` is honoured or refused: a file above it is refused (a runtime pinned to that opset may
    not load it) unless ``allow_other_opset``; one below it is shipped and recorded. Every axis the
    MLflow signature declares -1 (and every axis ``dynamic_axes`` names) is exported variable and
    checked at two or more lengths (:mod:`model_release.export.lengths`).
    """

    opset: int = Field(17, ge=9, le=23, description=(
        "The ONNX opset the exported file must import (default domain); a file above it is refused unless "
        "allow_other_opset, so a runtime pinned to an opset never meets a newer one."))
    allow_other_opset: bool = Field(False, description=(
        "true: when the converter cannot reach export.opset (torch.onnx's torch.export exporter starts at 18), ship "
        "the opset it reached, recorded in the result and named on the export stage line, instead of refusing."))
    dynamic_axes: dict[str, list[int]] = Field({}, description=(
        "Input name -> axes (0 is the batch) exported variable besides those the MLflow signature declares -1, "
        "e.g. {input_ids: [1]}: each is exported dynamic, written -1 in config.pbtxt and checked at two or more lengths."))
    tolerances: Tolerances = Field(Tolerances(), description="Per-output parity tolerances of the ONNX model against "
                                                            "the native one on the golden rows; default for the rest.")
    min_label_agreement: float = Field(1.0, ge=0, le=1, description="The share of rows whose label outputs (integer or "
                                                                    "string classes) must equal the native model's.")
    simplify: bool = Field(False, description="Simplify the ONNX graph with onnxslim after export (the slim extra), "
                                              "checked by the same parity gate.")
    cache: bool = Field(True, description="Reuse an earlier conversion of the same model content, options and "
                                          "converter versions (its parity proven again on these golden rows).")

    @field_validator("dynamic_axes")
    @classmethod
    def _axes(cls, v: dict[str, list[int]]) -> dict[str, list[int]]:
        for name, axes in v.items():
            if not axes or any(a < 1 for a in axes) or len(set(axes)) != len(axes):
                raise ValueError(f"export.dynamic_axes.{echo(name)[1:-1]} is {axes}: give distinct axes from 1 "
                                 "(axis 0 is the batch, always variable when repository.max_batch_size > 0)")
        return v


class ShapeRange(_Strict):
    """``tensorrt.shapes.<input>``: the range of an input's non-batch dimensions in the TensorRT
    profile, each a list as long as the input's dims (the batch dimension comes from
    ``repository.max_batch_size``). Fixed dimensions repeat their size. The export stage checks
    parity at ``min`` and ``max`` of every variable dimension too, so the plan's range is proven."""

    min: list[int] = Field(description="The smallest size of each non-batch dimension the plan takes (export checks parity at it).")
    opt: list[int] = Field(description="The size of each non-batch dimension TensorRT tunes the plan for.")
    max: list[int] = Field(description="The largest size of each non-batch dimension the plan takes (export checks parity at it).")

    @model_validator(mode="after")
    def _ordered(self) -> "ShapeRange":
        if not (len(self.min) == len(self.opt) == len(self.max)):
            raise ValueError(f"min {self.min}, opt {self.opt} and max {self.max} must have the same length (the input's dims)")
        if any(d < 1 for d in self.min) or any(not (a <= b <= c) for a, b, c in zip(self.min, self.opt, self.max)):
            raise ValueError(f"need 1 <= min <= opt <= max in every dimension, got min {self.min}, opt {self.opt}, max {self.max}")
        return self


class TensorRTSpec(_Strict):
    mode: Literal["off", "prefer", "require"] = Field("off", description="off: serve the ONNX model; prefer: build a "
                                                                        "plan on a GPU worker and serve the ONNX model "
                                                                        "where none can be built (the reason recorded); "
                                                                        "require: no plan, no release.")
    precision: Literal["fp32", "fp16", "bf16", "int8"] = Field("fp16", description="The plan's precision; its parity "
                                                                                   "against the ONNX model decides.")
    tolerances: Tolerances = Field(Tolerances(default=Tolerance(atol=1e-2, rtol=1e-2)),
                                   description="Per-output parity tolerances of the plan against the ONNX model "
                                               "(looser than export's: fp16 rounds).")
    workspace_mb: int = Field(2048, ge=64, description="TensorRT's builder workspace, in MiB.")
    shapes: dict[str, ShapeRange] = Field({}, description=(
        "Input name -> the range of its non-batch dimensions in the TensorRT profile; required for every variable axis "
        "(a plan fixed at one length refuses the others), and the lengths export checks parity at."))


class PromoteSpec(_Strict):
    store: str = Field("s3://model-store/releases", description="The model store the release is uploaded to: "
                                                                "s3://BUCKET[/PREFIX] or file:///ABSOLUTE/PATH.")
    channel: str = Field("production", description="The channel whose pointer moves to the release once the canary "
                                                   "passed; its current release is the champion the canary judges against.")
    mlflow_alias: str | None = Field("production", description="The MLflow alias moved to the released version with "
                                                               "the channel (and back on rollback); null: none.")
    breaking_change: str | None = Field(None, min_length=1, description="The reason for an acknowledged interface break "
                                                                        "against the champion (an input renamed, a label "
                                                                        "set changed), recorded in the manifest; without "
                                                                        "it any break blocks.")

    @field_validator("mlflow_alias")
    @classmethod
    def _alias(cls, v: str | None) -> str | None:
        if v is not None and not names.is_alias(v):
            raise ValueError(f"promote.mlflow_alias {echo(v)} is not a valid MLflow alias (letters, digits, _ and -)")
        return v

    @field_validator("store")
    @classmethod
    def _store_uri(cls, v: str) -> str:
        if not re.fullmatch(r"(s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/[^\n]*)?|file:///[^\n]+)", v):
            raise ValueError(
                f"promote.store {echo(v)} is not a store URI; valid: s3://BUCKET[/PREFIX] or file:///ABSOLUTE/PATH"
            )
        return v.rstrip("/")

    @field_validator("channel")
    @classmethod
    def _channel(cls, v: str) -> str:
        if not names.is_name(v):
            raise ValueError(f"promote.channel {echo(v)} must be letters, digits, _ and -, starting with a letter")
        return v
