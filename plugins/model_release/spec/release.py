"""The whole release spec: :class:`ReleaseSpec`, built by :func:`load_spec` (a file) or :func:`parse_spec` (a mapping)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError, field_validator, model_validator

from .. import names
from ..errors import SpecError
from ..safe_text import echo
from .canary import CanarySpec, batch_rows_refusal, load_rows_default
from .loader import parse_yaml, read_spec_text
from .schedule import check_schedule
from .sections import ExportSpec, GoldenSpec, ModelRef, PromoteSpec, TensorRTSpec
from .serve import ServeSpec
from .shapes import RepositorySpec
from .strict import _Strict


class ReleaseSpec(_Strict):
    """A validated release spec. Build with :func:`load_spec` or :func:`parse_spec`."""

    name: str
    model: ModelRef
    #: when the spec's scheduled DAG (``model_release__<name>``) looks for a new candidate: a cron
    #: expression, an Airflow preset or a duration; None: that DAG runs only when triggered
    schedule: str | None = None
    golden: GoldenSpec = GoldenSpec()
    export: ExportSpec = ExportSpec()
    tensorrt: TensorRTSpec = TensorRTSpec()
    repository: RepositorySpec = RepositorySpec()
    canary: CanarySpec = CanarySpec()
    promote: PromoteSpec = PromoteSpec()
    serve: ServeSpec = ServeSpec()
    #: where the spec was read from (for resolving relative paths and naming it in messages);
    #: set by load_spec, not part of the YAML
    base_dir: str | None = None
    source: str | None = None

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, v: str | None) -> str | None:
        return None if v is None else check_schedule(v.strip())

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not names.is_name(v):
            raise ValueError(
                f"name {echo(v)} must start with a letter and hold only letters, digits, _ and - (at most 64): "
                "it becomes a Triton model name and a folder name"
            )
        return v

    @model_validator(mode="before")
    @classmethod
    def _load_rows_follow_the_repository(cls, data: Any) -> Any:
        return load_rows_default(data)

    @model_validator(mode="after")
    def _load_rows_fit(self) -> "ReleaseSpec":
        refusal = batch_rows_refusal(self.canary.load.batch_rows, self.repository.max_batch_size,
                                     "repository.max_batch_size", ", or raise repository.max_batch_size")
        if refusal:
            raise ValueError(refusal)
        return self

    @property
    def where(self) -> str:
        """How to name this spec in a message: its file, or its name when it came from a mapping."""
        return self.source or f"the release spec {self.name!r}"

    def resolve_path(self, path: str) -> Path:
        p = Path(path)
        return p if p.is_absolute() or self.base_dir is None else Path(self.base_dir) / p


#: how a section looks, for "must be a mapping" messages
_EXAMPLES = {"Tolerance": "{atol: 1.0e-5, rtol: 1.0e-4}"}

#: at most this many field errors are listed in one message (the count of the rest is given)
MAX_LISTED_ERRORS = 10


def _documented_path(loc: tuple[Any, ...]) -> str:
    """The deepest field of ``loc`` the reference documents under its own name (a section, for an unknown field)."""
    import typing

    model: Any = ReleaseSpec
    found: list[str] = []
    for part in loc:
        fields = getattr(model, "model_fields", {})
        if part not in fields:
            break
        found.append(str(part))
        models = [a for a in (fields[part].annotation, *typing.get_args(fields[part].annotation))
                  if isinstance(a, type) and issubclass(a, BaseModel)]
        model = models[0] if models else None
    return ".".join(found)


def _format_errors(origin: str, exc: ValidationError) -> str:
    errors = exc.errors()
    lines = []
    for err in errors[:MAX_LISTED_ERRORS]:
        loc = ".".join(str(part) for part in err["loc"]) or "(top level)"
        loc = echo(loc, 80)[1:-1]
        msg = err["msg"].removeprefix("Value error, ")
        documented = reference_link(_documented_path(err["loc"]))
        if err["type"] == "extra_forbidden":
            msg = f"unknown field '{loc}'; the valid fields are listed at {documented}"
        else:
            if err["type"] == "model_type":
                example = _EXAMPLES.get(str((err.get("ctx") or {}).get("class_name")))
                msg = f"must be a mapping such as {example}" if example else "must be a mapping of its fields"
            if "input" in err and err["type"] not in ("missing",) and not isinstance(err["input"], dict):
                got = echo(err["input"])
                if err["type"] != "value_error" or got not in msg:  # our own messages name the value already
                    msg = f"{msg} (got {got})"
        if err["type"] != "extra_forbidden":
            msg = f"{msg} [{documented}]"
        lines.append(f"{loc}: {msg}")
    if len(errors) > MAX_LISTED_ERRORS:
        lines.append(f"and {len(errors) - MAX_LISTED_ERRORS} more errors")
    return f"release spec {origin} is invalid: " + "; ".join(lines)


def parse_spec(
    data: Any, *, origin: str = "<dict>", base_dir: str | None = None, source: str | None = None,
    overrides: dict[str, Any] | None = None,
) -> ReleaseSpec:
    """Validate a spec given as a mapping, applying dotted ``overrides`` (``model.alias``) first."""
    if not isinstance(data, dict):
        raise SpecError(f"release spec {origin} must be a YAML mapping at the top level, got {type(data).__name__}")
    data = dict(data)
    for dotted, value in (overrides or {}).items():
        _set_dotted(data, dotted, value)
    for key in RECORDED_ONLY:  # set by load_spec from the file, never written in a spec
        if key in data:
            raise SpecError(f"release spec {origin} is invalid: {key}: unknown field '{key}' (model-release records "
                            f"where the spec was read from itself; remove it)")
    if base_dir is not None:
        data["base_dir"] = base_dir
    if source is not None:
        data["source"] = source
    try:
        return ReleaseSpec.model_validate(data)
    except ValidationError as exc:
        given = "; ".join(f"{k}={echo(v)}" for k, v in (overrides or {}).items())
        raise SpecError(_format_errors(origin, exc) + (f" (overridden: {given})" if given else "")) from None


#: where the spec reference lives in the project (generated by ``python -m model_release.reference``)
REFERENCE_PATH = "docs/reference/spec.md"


def anchor(path: str) -> str:
    """The reference's anchor of a dotted field path (``canary.load.batch_rows`` -> ``canary-load-batch_rows``)."""
    return path.replace(".", "-").replace("<", "").replace(">", "").lower()


def reference_link(path: str) -> str:
    """Where the reference documents ``path``: ``docs/reference/spec.md#canary-load-batch_rows`` (the top for "")."""
    return f"{REFERENCE_PATH}#{anchor(path)}" if path else REFERENCE_PATH


#: the fields load_spec sets from the spec's file; a spec that writes them is refused, a recorded one carries them
RECORDED_ONLY = ("base_dir", "source")


def spec_from_record(doc: dict[str, Any], *, origin: str) -> ReleaseSpec:
    """A spec as a release recorded it (``ReleaseSpec.model_dump()``: the manifest's ``spec``, export's
    ``spec.json``), with its relative paths resolved against the folder it was read from then."""
    data = dict(doc)
    base_dir, source = data.pop("base_dir", None), data.pop("source", None)
    return parse_spec(data, origin=origin, base_dir=base_dir if isinstance(base_dir, str) else None,
                      source=source if isinstance(source, str) else None)


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None) -> ReleaseSpec:
    """Read and validate a release spec file.

    The file must be UTF-8 YAML of at most :data:`~.loader.MAX_SPEC_BYTES`; a key given twice in one
    mapping, nesting deeper than :data:`~.loader.MAX_SPEC_DEPTH` and aliases that expand beyond
    :data:`~.loader.MAX_SPEC_NODES` values are refused before anything is built from it.

    Raises:
        SpecError: the file is missing, unreadable, not UTF-8, not YAML, or a field is invalid
            (each field named).
    """
    p = Path(path)
    where = echo(str(p), 200)
    text = read_spec_text(p, where)
    data = parse_yaml(text, f"release spec {where}")
    return parse_spec(data, origin=where, base_dir=str(p.resolve().parent), source=str(p), overrides=overrides)



def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node = data
    for key in keys[:-1]:
        child = node.get(key)
        child = dict(child) if isinstance(child, dict) else {}
        node[key] = child
        node = child
    node[keys[-1]] = value
    if dotted == "model.alias" and value is not None:
        node.pop("version", None)
    if dotted == "model.version" and value is not None:
        node.pop("alias", None)
