"""Render BLS ``model.py`` files from ``model_repository_template/`` with values only as checked literals.

A template may print a value only through the ``py`` filter, which turns a model name, tensor
name, number or list of those into a Python literal with ``repr`` after checking it against a
strict pattern; anything printed without it stops the render. Free text (labels) never reaches a
template: it goes into JSON data files that the generated code reads.
"""

from __future__ import annotations

import math
import os
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from ..errors import AssembleError

_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-.:]{0,127}$")
TEMPLATE_ENV = "MODEL_RELEASE_TEMPLATES"
#: the package the templates are installed as (pyproject.toml maps model_repository_template/ to it)
TEMPLATE_PACKAGE = "model_release.templates"


class PyLiteral(str):
    """Text that is a safe Python literal (made only by :func:`py_literal`)."""


def py_literal(value: Any) -> PyLiteral:
    """A Python literal for a name, number, bool or a list/tuple of those.

    Raises:
        AssembleError: the value is of another type, a string with characters outside
            ``[A-Za-z0-9_-.:]``, or a number that is not finite.
    """
    if isinstance(value, bool) or value is None:
        return PyLiteral(repr(value))
    if isinstance(value, int):
        return PyLiteral(repr(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise AssembleError(f"template value {value!r} is not a finite number")
        return PyLiteral(repr(value))
    if isinstance(value, str):
        if not _IDENT_RE.fullmatch(value):
            raise AssembleError(
                f"template value {value!r} is not a plain name (letters, digits, _ - . :, at most 128); "
                "rename the model or tensor"
            )
        return PyLiteral(repr(value))
    if isinstance(value, (list, tuple)):
        items = ", ".join(py_literal(v) for v in value)
        return PyLiteral(f"({items},)" if isinstance(value, tuple) and len(value) == 1 else f"({items})" if isinstance(value, tuple) else f"[{items}]")
    raise AssembleError(f"template value of type {type(value).__name__} cannot be written into code")


def _finalize(value: Any) -> str:
    if isinstance(value, PyLiteral):
        return value
    raise AssembleError(
        f"a template printed {value!r} without the 'py' filter; write {{{{ name | py }}}} so the value "
        "is checked and quoted"
    )


def template_root() -> Path:
    """``model_repository_template/``: ``$MODEL_RELEASE_TEMPLATES``, else the installed package's
    (``model_release.templates``: package data in a wheel, the clone's folder in an editable install).

    Raises:
        AssembleError: the setting names no folder, or the installed templates are not a folder on disk.
    """
    env = os.environ.get(TEMPLATE_ENV)
    if env:
        root = Path(env)
        if not root.is_dir():
            raise AssembleError(f"${TEMPLATE_ENV}={env!r} is not a folder; point it at a copy of model_repository_template/")
        return root
    try:
        installed = resources.files(TEMPLATE_PACKAGE)
    except ModuleNotFoundError:
        raise AssembleError(f"{TEMPLATE_PACKAGE} is not installed (an install made before the templates became package "
                            f"data: reinstall model-release, `make setup` in a clone); or set ${TEMPLATE_ENV}") from None
    if not isinstance(installed, Path) or not installed.is_dir():
        raise AssembleError(f"the installed templates ({TEMPLATE_PACKAGE}: {installed}) are not a folder on disk; "
                            f"set ${TEMPLATE_ENV} to a copy of model_repository_template/")
    return installed


@lru_cache(maxsize=4)
def _environment(root: str) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(root),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_finalize,
    )
    env.filters["py"] = py_literal
    return env


def render(template: str, **values: Any) -> str:
    """Render ``model_repository_template/<template>`` with ``values`` (printed only via ``| py``).

    Raises:
        AssembleError: the template is missing, uses an undefined value or prints one unchecked.
    """
    root = template_root()
    try:
        text = _environment(str(root)).get_template(template).render(**values)
    except jinja2.TemplateNotFound:
        raise AssembleError(f"template {template!r} is missing under {root}") from None
    except jinja2.UndefinedError as exc:
        raise AssembleError(f"template {template!r} uses a value the assembler does not give: {exc}") from None
    compile(text, template, "exec")  # a template bug fails here, not inside Triton
    return text
