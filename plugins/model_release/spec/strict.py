"""The strict base every spec section builds on, and the output tolerances export, TensorRT and the canary share."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator


def _takes_number(annotation: Any) -> bool:
    """Whether a field's type is a number (``int``, ``float``, or one of them or None)."""
    if annotation in (int, float):
        return True
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return any(a in (int, float) for a in typing.get_args(annotation))
    return False


class _Strict(BaseModel):
    # NaN and infinity are never a sensible setting (an infinite tolerance passes everything)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        """YAML reads ``true`` as a boolean, which pydantic would take as 1: refuse it where a number goes."""
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and _takes_number(field.annotation):
            raise ValueError(f"{str(value).lower()} is a boolean, not a number; give a number")
        return value


class Tolerance(_Strict):
    atol: float = Field(1e-5, ge=0, description="Absolute tolerance: an element fails only when it differs by more "
                                                "than this and by more than rtol.")
    rtol: float = Field(1e-4, ge=0, description="Relative tolerance, to the reference's value.")


class Tolerances(_Strict):
    """Per-output tolerances; ``default`` applies to outputs not named.

    Every other key names an output (its Triton name or its name in the model) and maps to
    ``{atol, rtol}``; a key that names no output of the model is refused at export.
    """

    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)
    #: how the spec reference names the keys the user gives (spec/reference.py)
    __reference_key__ = "<output>"
    __pydantic_extra__: dict[str, Tolerance] = Field(init=False)  # type: ignore[assignment]
    default: Tolerance = Field(Tolerance(), description="The tolerance of every output not named; another key names an "
                                                        "output (its Triton name or its name in the model).")

    def for_output(self, name: str) -> Tolerance:
        return (self.model_extra or {}).get(name, self.default)

    def named(self) -> dict[str, Tolerance]:
        return dict(self.model_extra or {})

