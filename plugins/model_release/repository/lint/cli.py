"""``model-release lint PATH [--json]``, ``--explain RULE``, ``--rules``: lint a Triton model repository from a terminal.

Everything printed goes through :func:`.findings.safe_text`: a hostile folder name cannot reach the
terminal as control characters, and long lists are summarised.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys

from .findings import safe_text
from .linter import lint_repository
from .rulebook import RULES, explain

_ORDER_SHOWN = 20  # models of the load order printed in text mode (--json has them all)


def main(argv: list[str] | None = None) -> int:
    """Lint the repository named in ``argv``; print one finding a line (or JSON).

    Returns:
        1 when there is an error, 0 otherwise (warnings alone pass); 2 when the command itself is wrong.
    """
    parser = argparse.ArgumentParser(prog="model-release lint", description="Check a Triton model repository before Triton loads it.")
    parser.add_argument("path", nargs="?", help="the model repository (one folder per model)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--explain", metavar="RULE", help="what RULE catches, what Triton does with it, in its words")
    parser.add_argument("--rules", action="store_true", help="list every rule: severity, what Triton does, what it catches")
    args = parser.parse_args(argv)
    if args.explain:
        return _explain(args.explain)
    if args.rules:
        for rule, r in RULES.items():
            print(f"{rule:28s} {r.severity:8s} {r.triton:10s} {r.catches}")
        return 0
    if not args.path:
        parser.error("give the repository's PATH (or --explain RULE, or --rules)")
    try:
        report = lint_repository(args.path)
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
