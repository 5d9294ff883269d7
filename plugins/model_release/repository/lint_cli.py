"""``model-release lint PATH [--json]``: lint a Triton model repository from a terminal."""

from __future__ import annotations

import argparse
import json
import sys

from .lint import lint_repository


def main(argv: list[str] | None = None) -> int:
    """Lint the repository named in ``argv``; print one finding a line (or JSON).

    Returns:
        1 when there is an error, 0 otherwise (warnings alone pass).
    """
    parser = argparse.ArgumentParser(prog="model-release lint", description="Check a Triton model repository before Triton loads it.")
    parser.add_argument("path", help="the model repository (one folder per model)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = lint_repository(args.path)
    if args.json:
        json.dump(report.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for finding in report.findings:
            print(finding)
        verdict = "ok" if report.ok else "FAILED"
        print(f"{verdict}: {len(report.models)} models, {len(report.errors)} errors, {len(report.warnings)} warnings; "
              f"load order: {', '.join(report.load_order) or '-'}")
    return 0 if report.ok else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
