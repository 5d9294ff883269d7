"""The spec reference (``docs/reference/spec.md``), generated from the spec's own models.

Every field of :class:`~model_release.spec.ReleaseSpec`, section by section: its dotted path, type,
default, allowed values (a choice, a range, a length) and the one-line reason its
``Field(description=...)`` gives. A test fails when a field has no description or when the committed
file differs from what :func:`render` writes; a spec error names the field's anchor
(:func:`model_release.spec.release.reference_link`).
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ..spec.release import anchor

#: a path part standing for a key the user chooses (an output's name, a member's name)
KEY = "<name>"


@dataclass(frozen=True)
class Row:
    """One field of the reference."""

    path: str  # canary.load.batch_rows
    type: str
    default: str
    allowed: str
    description: str


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The spec models an annotation holds (``X``, ``X | None``, ``dict[str, X]``, ``list[X]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += _models_in(arg)
    return found


def _type_text(annotation: Any) -> str:
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type):
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            annotation.__name__, "mapping" if issubclass(annotation, BaseModel) else annotation.__name__)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return "choice"
    if origin in (types.UnionType, typing.Union):
        return " or ".join(dict.fromkeys(_type_text(a) for a in args))
    if origin in (list, tuple, set, frozenset):
        return f"list of {_type_text(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping of {_type_text(args[1])}" if len(args) == 2 else "mapping"
    return str(annotation).replace("typing.", "")


def _literals(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) is Literal:
        return list(typing.get_args(annotation))
    return [v for a in typing.get_args(annotation) for v in _literals(a)]


_BOUNDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"), ("min_length", "at least {} long"),
           ("max_length", "at most {} long"))


def _allowed(field: FieldInfo) -> str:
    parts = [", ".join(json.dumps(v) for v in _literals(field.annotation))] if _literals(field.annotation) else []
    for meta in field.metadata:
        for attr, text in _BOUNDS:
            value = getattr(meta, attr, None)
            if value is not None:
                parts.append(text.format(value) if "{}" in text else f"{text} {value}")
    return "; ".join(p for p in parts if p)


def _default(field: FieldInfo, value: Any = PydanticUndefined) -> str:
    """The default as the spec gets it: ``value`` where the enclosing section's default sets this field."""
    if value is PydanticUndefined:
        if field.is_required():
            return "required"
        value = field.get_default(call_default_factory=True)
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        return "(section)"
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)


def rows(model: type[BaseModel], prefix: str = "", section: BaseModel | None = None) -> list[Row]:
    """Every field of ``model`` and of the sections below it, in declaration order, depth first.

    ``section`` is the section's own default, where it is not the model's (the watch's ``error_rate`` is a
    WatchLimit with an absolute ceiling of its own): its values are the defaults shown below it.
    """
    from ..spec.release import RECORDED_ONLY

    out: list[Row] = []
    for name, field in model.model_fields.items():
        if not prefix and name in RECORDED_ONLY:  # set by model-release, refused in a spec
            continue
        path = f"{prefix}{name}"
        value = getattr(section, name) if section is not None else PydanticUndefined
        out.append(Row(path, _type_text(field.annotation), _default(field, value), _allowed(field),
                       " ".join((field.description or "").split())))
        keyed = typing.get_origin(field.annotation) is dict or any(
            typing.get_origin(a) is dict for a in typing.get_args(field.annotation))
        if value is PydanticUndefined and not field.is_required():
            value = field.get_default(call_default_factory=True)
        for sub in dict.fromkeys(m for m in _models_in(field.annotation) if m.model_fields):
            own = value if isinstance(value, sub) and not keyed else None
            out += rows(sub, f"{path}.{KEY}." if keyed else f"{path}.", own)
    extra = _extra_model(model)
    if extra is not None:  # keys the user names (an output's tolerance)
        out += rows(extra, f"{prefix}{getattr(model, '__reference_key__', KEY)}.")
    return out


def _extra_model(model: type[BaseModel]) -> type[BaseModel] | None:
    """The model of a section's user-named keys (``Tolerances``' outputs: a Tolerance), where it allows them."""
    if model.model_config.get("extra") != "allow":
        return None
    extra = typing.get_type_hints(model).get("__pydantic_extra__")
    models = _models_in(extra) if extra is not None else []
    return models[0] if models else None


def undocumented(model: type[BaseModel] | None = None) -> list[str]:
    """The fields with no description (the reference test lists them)."""
    return [r.path for r in rows(model or _spec()) if not r.description]


def _spec() -> type[BaseModel]:
    from ..spec import ReleaseSpec

    return ReleaseSpec


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or "-"


def render(model: type[BaseModel] | None = None) -> str:
    """The whole reference as Markdown."""
    model = model or _spec()
    all_rows = rows(model)
    lines = [
        "# The release spec: every field",
        "",
        "Generated from the spec's models (`plugins/model_release/spec/`) by",
        "`python -m model_release.reference --write docs/reference`; do not edit by hand.",
        "A spec is YAML; a field not listed here is refused with its name. `<name>` stands for a key you choose",
        "(an output's name, a member's key). Example: [`releases/iris.yaml`](../../releases/iris.yaml).",
        "",
    ]
    section = None
    for row in all_rows:
        top = row.path.split(".", 1)[0]
        if top != section:
            section = top
            lines += ["", f"## {top}", "", "| field | type | default | allowed | what it does |",
                      "| --- | --- | --- | --- | --- |"]
        lines.append(f"| <a id=\"{anchor(row.path)}\"></a>`{row.path}` | {_cell(row.type)} | `{_cell(row.default)}` | "
                     f"{_cell(row.allowed)} | {_cell(row.description)} |")
    return "\n".join(lines).replace("\n\n\n", "\n\n") + "\n"
