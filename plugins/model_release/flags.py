"""The CLI's one grammar: one parser class, one flag per concept, the same default everywhere.

Every ``model-release`` command builds its parser from here, so a concept is spelled and defaulted
the same way on every command (``tests/test_cli_grammar.py`` checks each parser against
:data:`CONCEPTS`, and ``docs/reference/cli.md`` is generated from the same parsers):

==================  ========================  =================================================
concept             flag                      default
==================  ========================  =================================================
model store         ``--store URI``           ``$MODEL_RELEASE_STORE``
channel             ``--channel C``           ``production``
release             ``--release ID``          (per command: the pointer's, a new id, required)
MLflow              ``--tracking-uri URI``    ``$MLFLOW_TRACKING_URI``
registry alias      ``--mlflow-alias A``      ``production`` (the alias that follows a channel)
JSON output         ``--json``                JSON when stdout is not a terminal
==================  ========================  =================================================

A flag renamed here keeps its old spelling for one release as a hidden alias that still works and
warns on stderr (:class:`Deprecated`): ``--release-id``, ``--to`` and a positional release id
became ``--release``; ``--mlflow-tracking-uri`` became ``--tracking-uri``; ``store rollback
--alias`` became ``--mlflow-alias``.

A usage error is a :class:`~model_release.errors.UserError`: one line and exit 2, as every bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from typing import Any, NoReturn

from .errors import UserError


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error raised as a one-line :class:`UserError` (exit 2) instead of usage text."""

    def error(self, message: str) -> NoReturn:
        raise UserError(f"{message}; see {self.prog} --help")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """argparse's, then the required flags that an old spelling may give (argparse counts only the new one)."""
        parsed, extras = super().parse_known_args(args, namespace)
        for action in self._actions:
            if getattr(action, "required_concept", False) and getattr(parsed, action.dest, None) is None:
                self.error(f"the following arguments are required: {action.option_strings[0]}")
        return parsed, extras


@dataclass(frozen=True)
class Concept:
    """How one concept is written on every command."""

    flag: str
    help: str
    metavar: str | None = None
    env: str | None = None  # its default comes from this variable
    default: Any = None
    extra: dict[str, Any] = field(default_factory=dict)  # more add_argument keywords (action=...)

    def default_value(self) -> Any:
        return os.environ.get(self.env) if self.env else self.default


CONCEPTS: dict[str, Concept] = {
    "store": Concept("--store", "the model store: s3://BUCKET[/PREFIX] or file:///PATH (default $MODEL_RELEASE_STORE)",
                     "URI", env="MODEL_RELEASE_STORE"),
    "channel": Concept("--channel", "the channel, e.g. production (default production)", "C", default="production"),
    "release": Concept("--release", "a release id, as `model-release store releases` lists them", "ID"),
    "tracking_uri": Concept("--tracking-uri", "the MLflow tracking URI (default $MLFLOW_TRACKING_URI)", "URI",
                            env="MLFLOW_TRACKING_URI"),
    "mlflow_alias": Concept("--mlflow-alias", "the MLflow alias that follows the channel (default production)", "A",
                            default="production"),
    "json": Concept("--json", "print JSON (what is printed anyway when stdout is not a terminal)",
                    extra={"action": "store_true"}),
}

#: old spelling -> the concept it now spells (hidden, working, warned about; removed in the next release)
DEPRECATED: dict[str, str] = {
    "--release-id": "release", "--to": "release", "--mlflow-tracking-uri": "tracking_uri", "--alias": "mlflow_alias",
}


class Deprecated(argparse.Action):
    """An old spelling of a flag: stores into the new flag's destination and says so on stderr."""

    def __init__(self, option_strings: list[str], dest: str, new: str = "", **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"{parser.prog}: {option_string} is deprecated and goes in the next release; use {self.new}",
              file=sys.stderr)
        setattr(namespace, self.dest, values)


def add(parser: argparse.ArgumentParser, concept: str, *, required: bool = False, help: str | None = None,
        default: Any = None, old: tuple[str, ...] = ()) -> argparse.Action:
    """Add ``concept``'s flag to ``parser`` as :data:`CONCEPTS` spells it.

    Args:
        parser: the command's parser.
        concept: a key of :data:`CONCEPTS`.
        required: the command cannot run without it (no default then).
        help: what it means for this command, when more than the concept's own help.
        default: a default of this command's own where the concept has none (a release id: None means the
            pointer's, or a new one; the help says which).
        old: earlier spellings on this command (keys of :data:`DEPRECATED`), kept as hidden warned aliases.
    """
    c = CONCEPTS[concept]
    dest = concept
    kwargs = dict(c.extra)
    if "action" not in kwargs:
        kwargs.update(metavar=c.metavar)
        if not required:
            kwargs["default"] = default if default is not None else c.default_value()
    # a required flag with old spellings is checked after parsing (Parser.parse_known_args), since either may give it
    action = parser.add_argument(c.flag, dest=dest, required=required and not old, help=help or c.help, **kwargs)
    action.required_concept = required and bool(old)  # type: ignore[attr-defined]
    for spelling in old:
        if DEPRECATED.get(spelling) != concept:
            raise ValueError(f"{spelling} is not an old spelling of {c.flag}")
        parser.add_argument(spelling, dest=dest, action=Deprecated, new=c.flag, help=argparse.SUPPRESS)
    return action


def wants_json(args: argparse.Namespace) -> bool:
    """Print JSON: asked for, or stdout is not a terminal (a pipe, a file, a test)."""
    return bool(getattr(args, "json", False)) or not sys.stdout.isatty()
