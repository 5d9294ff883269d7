"""The shell commands of one README section, as written, and what each one says it prints.

Every fenced ```` ```bash ```` block of the section counts; other blocks (``text``, ``yaml``) do
not. A command is one line, or several joined by a trailing backslash, or a here-document up to
its terminator. Its trailing comment (after two spaces and ``#``) describes what it prints: each
fragment in backticks there must appear in its output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_FENCE = re.compile(r"^```(\S*)\s*$")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
_COMMENT = re.compile(r"\s{2,}#\s")


@dataclass
class Command:
    text: str
    line: int  # 1-based line number in the README
    expect: list[str] = field(default_factory=list)

    @property
    def first_line(self) -> str:
        return self.text.splitlines()[0]


def section(markdown: str, title: str) -> tuple[str, int]:
    """The text of the ``## title`` section (up to the next ``## ``), and the line it starts on."""
    lines = markdown.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == f"## {title}":
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("## ")), len(lines))
            return "\n".join(lines[i:end]), i + 1
    raise LookupError(f"the README has no section '## {title}'")


def _expectations(last_line: str) -> list[str]:
    match = _COMMENT.search(last_line)
    return re.findall(r"`([^`]+)`", last_line[match.end():]) if match else []


def commands(readme: Path, title: str = "Using it") -> list[Command]:
    """Every command of the section's bash blocks, in order."""
    text, start = section(readme.read_text(), title)
    found: list[Command] = []
    lang: str | None = None
    pending: list[str] = []
    pending_line = 0
    terminator: str | None = None
    for offset, line in enumerate(text.splitlines()):
        number = start + offset
        fence = _FENCE.match(line)
        if fence and terminator is None:
            if lang is not None and pending:
                raise ValueError(f"README line {number}: a bash block ends inside a command: {pending[0]!r}")
            lang = None if lang is not None else fence.group(1)
            continue
        if lang != "bash":
            continue
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue  # blank lines and whole-line comments between commands
        if not pending:
            pending_line = number
        pending.append(line)
        if terminator is not None:
            if line.strip() == terminator:
                terminator = None
            else:
                continue
        elif (heredoc := _HEREDOC.search(line)) and not line.rstrip().endswith("\\"):
            terminator = heredoc.group(2)
            continue
        if line.rstrip().endswith("\\") or terminator is not None:
            continue
        # a here-document's comment is on its first line (after <<'EOF'); any other command's on its last
        said = pending[0] if _HEREDOC.search(pending[0]) else pending[-1]
        found.append(Command("\n".join(pending), pending_line, _expectations(said)))
        pending = []
    if pending:
        raise ValueError(f"README line {pending_line}: the section ends inside a command: {pending[0]!r}")
    return found


def script(cmds: list[Command], out: Path) -> str:
    """A bash script that runs ``cmds`` in one shell, in order, and stops at the first that fails.

    Command ``i``'s output (stdout and stderr) goes to ``out/i.out``, its exit code to ``out/i.rc``
    and its start and end times to ``out/i.time``. One shell, so ``source`` and variables carry over.
    """
    parts = ["set +e"]
    for i, cmd in enumerate(cmds):
        parts += [
            f"date +%s.%N > {out}/{i}.time",
            "{",
            cmd.text,
            f"}} > {out}/{i}.out 2>&1 < /dev/null",
            f"rc=$?; echo $rc > {out}/{i}.rc; date +%s.%N >> {out}/{i}.time",
            'if [ "$rc" -ne 0 ]; then exit "$rc"; fi',
        ]
    return "\n".join(parts) + "\n"
