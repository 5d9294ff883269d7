"""``model-release lint PATH [--json]``, ``--explain RULE``, ``--rules``: lint a Triton model repository from a terminal.

Everything printed goes through :func:`.findings.safe_text`: a hostile folder name cannot reach the
terminal as control characters, and long lists are summarised.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

from ... import flags
from ...errors import UserError
from ...flags import Parser
from .findings import safe_text
from .linter import lint_repository
from .rulebook import RULES, explain

_ORDER_SHOWN = 20  # models of the load order printed in text mode (--json has them all)


def parser() -> argparse.ArgumentParser:
    """``model-release lint``'s parser (the CLI grammar of :mod:`model_release.flags`)."""
    p = Parser(prog="model-release lint", description="Check a Triton model repository before Triton loads it.")
    p.add_argument("path", nargs="?", help="the model repository (one folder per model)")
    flags.add(p, "json", help="print the report as JSON")
    p.add_argument("--explain", metavar="RULE", help="what RULE catches, what Triton does with it, in its words")
    p.add_argument("--rules", action="store_true", help="list every rule: severity, what Triton does, what it catches")
    p.add_argument("--disable-auto-complete-config", action="store_true",
                   help="lint for a server started with this flag: no backend completes a config (model.py's "
                        "auto_complete_config, tensors from an ONNX file or a plan), so config.pbtxt must be whole")
    p.add_argument("--strict-model-config", choices=("true", "false"), default="false",
                   help="Triton's older spelling: true is --disable-auto-complete-config")
    return p


def main(argv: list[str] | None = None) -> int:
    """Lint the repository named in ``argv``; print one finding a line (or JSON).

    Returns:
        1 when there is an error, 0 otherwise (warnings alone pass); 2 when the command itself is wrong.
    """
    try:
        return _main(argv)
    except UserError as exc:
        print(f"model-release lint: {exc}", file=sys.stderr)
        return 2


def _main(argv: list[str] | None) -> int:
    args = parser().parse_args(argv)
    if args.explain:
        return _explain(args.explain)
    if args.rules:
        for rule, r in RULES.items():
            print(f"{rule:28s} {r.severity:8s} {r.triton:10s} {r.catches}")
        return 0
    if args.path is None:
        raise UserError("give the repository's PATH (or --explain RULE, or --rules); see model-release lint --help")
    problem = _not_a_repository(args.path)
    if problem:
        print(f"model-release lint: {problem}", file=sys.stderr)
        return 2
    try:
        auto_complete = not args.disable_auto_complete_config and args.strict_model_config == "false"
        report = lint_repository(args.path, auto_complete=auto_complete)
    except OSError as exc:  # the linter reports what it can read; anything else is one line, never a traceback
        print(f"model-release lint: cannot read {safe_text(repr(args.path), 300)}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(report.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for finding in report.findings:
            print(finding)
        verdict = "ok" if report.ok else "FAILED"
        print(f"{verdict}: {len(report.models)} models, {len(report.errors)} errors, {len(report.warnings)} warnings; "
              f"load order: {_order(report.load_order)}")
    return 0 if report.ok else 1


def _not_a_repository(raw: str) -> str:
    """Why ``raw`` cannot be linted as a repository (missing, not a folder, no model folder in it), or ``""``."""
    path, shown = Path(raw), safe_text(repr(raw), 200)
    advice = "give the model repository's folder (one folder per model, each with config.pbtxt and version folders)"
    if raw and not path.exists():
        return f"repository path {shown} does not exist; {advice}"
    if not raw or not path.is_dir():
        return f"repository path {shown} is not a folder; {advice}"
    try:
        folders = [p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")]
    except OSError as exc:
        return f"cannot read {shown}: {exc.strerror or exc}"
    if not folders:
        return f"repository path {shown} holds no model folder, so there is nothing to check; {advice}"
    return ""


def _order(names: list[str]) -> str:
    shown = ", ".join(safe_text(n, 100) for n in names[:_ORDER_SHOWN]) or "-"
    more = len(names) - _ORDER_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def _explain(rule: str) -> int:
    if rule in RULES:
        print(explain(rule))
        return 0
    close = difflib.get_close_matches(rule, list(RULES), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else "; `model-release lint --rules` lists them"
    print(f"model-release lint: no rule {safe_text(repr(rule), 100)}{hint}", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
