"""The CLI reference (``docs/reference/cli.md``), generated from every command's parser.

Each command (:data:`model_release.cli.PARSERS`, handed in by ``python -m model_release.reference``, an
entry point: no room imports the CLI above it): what it does, its usage line, and each flag with
its default and help, the deprecated spellings left out. The grammar the flags follow is
:mod:`model_release.flags`; the exit codes are the top-level help's.
"""

from __future__ import annotations

import argparse
import os

from .. import flags


def _default(action: argparse.Action) -> str:
    if action.required:
        return "required"
    concept = flags.CONCEPTS.get(action.dest)
    if concept is not None and concept.env:
        return f"${concept.env}"
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):  # noqa: SLF001
        return "off" if isinstance(action, argparse._StoreTrueAction) else "on"  # noqa: SLF001
    value = action.default
    if value is None or value is argparse.SUPPRESS:
        return "-"
    if isinstance(value, str) and os.path.isabs(value):  # a machine's own path is no default to document
        return "-"
    return f"`{value}`"


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = parser._get_formatter()  # noqa: SLF001 - argparse's own, for the usage line without a terminal's width
    formatter._width = 100  # noqa: SLF001
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")  # noqa: SLF001
    return " ".join(formatter.format_help().split())


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def render(parsers: dict[str, argparse.ArgumentParser], top: str) -> str:
    """The whole CLI reference as Markdown, from every command's parser and the top-level help ``top``
    (:func:`model_release.cli.parsers` and the CLI's docstring: the entry point hands them in)."""
    exit_codes = " ".join(top.split("Exit codes", 1)[1].split("Flags are one grammar", 1)[0].split())
    lines = ["# The `model-release` command line: every command and flag", "",
             "Generated from the commands' parsers by `python -m model_release.reference --write docs/reference`;",
             "do not edit by hand. The flags follow one grammar (`plugins/model_release/flags.py`): `--store`,",
             "`--channel` (default `production`), `--release`, `--tracking-uri`, `--mlflow-alias`, and `--json` on",
             "every read. A renamed flag keeps its old spelling for one release, with a warning.", "",
             f"Exit codes{exit_codes}", "", "`--debug` anywhere on a command line adds the traceback to an error;",
             "`model-release --version` prints the installed version.", ""]
    for words, parser in parsers.items():
        if words == "rollback":
            lines += ["", "## `model-release rollback`", "", "The same as `model-release store rollback`.", ""]
            continue
        lines += ["", f"## `model-release {words}`", "", _cell(parser.description or ""), "",
                  f"`{_usage(parser)}`", ""]
        shown = [a for a in parser._actions if a.help is not argparse.SUPPRESS and a.dest != "help"]  # noqa: SLF001
        if shown:
            lines += ["| argument | default | what it does |", "| --- | --- | --- |"]
        for action in shown:
            name = ", ".join(action.option_strings) or (action.metavar or action.dest)
            if action.option_strings and action.nargs != 0 and action.metavar:
                name += f" {action.metavar}"
            lines.append(f"| `{name}` | {_default(action)} | {_cell(action.help or '')} |")
    return "\n".join(lines).replace("\n\n\n", "\n\n") + "\n"
