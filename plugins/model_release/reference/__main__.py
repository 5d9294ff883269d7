"""``python -m model_release.reference --write DIR`` or ``--check DIR``: the generated references (spec.md, cli.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def generated() -> dict[str, str]:
    """File name -> what the code gives."""
    from .. import cli as commands
    from . import cli, spec

    return {"spec.md": spec.render(), "cli.md": cli.render(commands.parsers(), commands.__doc__ or "")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m model_release.reference", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", type=Path, metavar="DIR", help="write the references into DIR (docs/reference)")
    mode.add_argument("--check", type=Path, metavar="DIR", help="exit 1 when a file of DIR differs from the code")
    args = parser.parse_args(argv)
    stale = []
    for name, text in generated().items():
        if args.write:
            args.write.mkdir(parents=True, exist_ok=True)
            (args.write / name).write_text(text)
        elif not (args.check / name).is_file() or (args.check / name).read_text() != text:
            stale.append(name)
    if stale:
        print(f"{', '.join(stale)} in {args.check} differ from the code: run python -m model_release.reference "
              f"--write {args.check}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
