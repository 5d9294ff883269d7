"""Lint findings and the report; text that reaches a terminal is made safe here.

Every field of a :class:`Finding` is escaped (control characters shown as ``\\n``, ``\\x1b``...,
as ``repr`` shows them) and capped in length when the finding is made, so no folder name or file
content can move the cursor, colour the terminal or fill it. :func:`listing` summarises long lists.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Iterable

from .rulebook import ERROR, WARNING

__all__ = ["ERROR", "WARNING", "Finding", "LintReport", "safe_text", "listing", "MAX_MESSAGE"]

MAX_MESSAGE = 1000  # characters of a finding's message
MAX_FIELD = 300  # characters of its model name and file
_SHOWN = 5  # items of a long list shown before "and N more"


def safe_text(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` with non-printable characters escaped repr-style, cut to about ``limit`` characters."""
    if len(text) <= limit and text.isprintable():
        return text
    out: list[str] = []
    length = 0
    for index, ch in enumerate(text):
        piece = ch if ch.isprintable() else repr(ch)[1:-1]
        if length + len(piece) > limit:
            return "".join(out) + f"... ({len(text) - index} more characters)"
        out.append(piece)
        length += len(piece)
    return "".join(out)


def listing(items: Iterable[Any], shown: int = _SHOWN) -> str:
    """``[a, b, c]``, or ``[a, b, c, d, e] and 995 more`` for a long list (items as ``repr``)."""
    items = list(items)
    head = ", ".join(repr(i) for i in items[:shown])
    more = len(items) - shown
    return f"[{head}]" + (f" and {more} more" if more > 0 else "")


@dataclass(frozen=True)
class Finding:
    """One problem: which rule, how bad, in which model and file, and what to do."""

    rule: str
    severity: str
    model: str
    file: str
    message: str

    def __post_init__(self) -> None:
        for f in fields(self):
            limit = MAX_MESSAGE if f.name == "message" else MAX_FIELD
            object.__setattr__(self, f.name, safe_text(str(getattr(self, f.name)), limit))

    def __str__(self) -> str:
        return f"{self.severity}: {self.file}: [{self.rule}] model {self.model!r}: {self.message}"

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass
class LintReport:
    """All findings on a repository, and the order to load its models in."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    load_order: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == WARNING]

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "ok": self.ok,
            "errors": [f.to_dict() for f in self.errors],
            "warnings": [f.to_dict() for f in self.warnings],
            "load_order": list(self.load_order),
            "models": list(self.models),
        }
