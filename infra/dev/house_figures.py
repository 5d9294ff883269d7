"""Figures of the package's shape, for notes on a renovation: modules and lines per folder,
functions over 60 lines, modules over 400 lines.

    python3 infra/dev/house_figures.py [plugins/model_release]

Lines are physical lines of each .py file; a function's length is its AST span (decorators excluded).
"""
from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else "plugins/model_release")
    per_folder: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    long_functions: list[tuple[int, str]] = []
    long_modules: list[tuple[int, str]] = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        lines = len(text.splitlines())
        folder = str(path.parent.relative_to(root.parent))
        per_folder[folder][0] += 1
        per_folder[folder][1] += lines
        if lines > 400:
            long_modules.append((lines, str(path)))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                span = node.end_lineno - node.lineno + 1
                if span > 60:
                    long_functions.append((span, f"{path}:{node.lineno} {node.name}"))
    total = [0, 0]
    print("modules  lines  folder")
    for folder, (modules, lines) in sorted(per_folder.items()):
        total[0] += modules
        total[1] += lines
        print(f"{modules:7d} {lines:6d}  {folder}")
    print(f"{total[0]:7d} {total[1]:6d}  (all)")
    print(f"\nfunctions over 60 lines: {len(long_functions)}")
    for span, where in sorted(long_functions, reverse=True):
        print(f"  {span:4d}  {where}")
    print(f"\nmodules over 400 lines: {len(long_modules)}")
    for lines, where in sorted(long_modules, reverse=True):
        print(f"  {lines:4d}  {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
