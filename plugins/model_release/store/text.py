"""What ``model-release store ...`` prints at a terminal: a few lines per answer (``--json`` prints the documents).

Each function takes the JSON document the command would print and returns lines a person reads;
every value passes through :func:`~model_release.safe_text.echo`-style escaping, as store contents
are written by others.
"""

from __future__ import annotations

from typing import Any

from ..safe_text import one_line


def _s(value: Any) -> str:
    return one_line(str(value)) if value is not None else "-"


def _history(entries: list[dict[str, Any]]) -> list[str]:
    if not entries:
        return ["no move yet: nothing was promoted to this channel"]
    lines = [f"{'seq':>4}  {'when (UTC)':20}  {'action':8}  {'release':40}  by"]
    for e in entries:
        lines.append(f"{e.get('seq', ''):>4}  {_s(e.get('updated_at'))[:19]:20}  {_s(e.get('action')):8}  "
                     f"{_s(e.get('release_id')):40}  {_s(e.get('updated_by'))}")
    return lines


def _releases(items: list[dict[str, Any]]) -> list[str]:
    if not items:
        return ["no release in this store"]
    lines = [f"{'release':40}  {'complete':8}  {'objects':>7}  channels"]
    for r in items:
        state = "yes" if r.get("complete") else "missing" if r.get("exists") is False else "no"
        lines.append(f"{_s(r.get('release_id')):40}  {state:8}  {r.get('objects', 0):>7}  "
                     f"{', '.join(_s(c) for c in r.get('channels') or []) or '-'}")
    return lines


def _verify(report: dict[str, Any]) -> list[str]:
    head = (f"release {_s(report.get('release_id'))}: "
            + ("verified" if report.get("ok") else "DOES NOT VERIFY")
            + f", {report.get('objects', 0)} objects, {report.get('bytes', 0)} bytes")
    problems = report.get("problems") or {}
    return [head] + [f"  {_s(k)}: {_s(v)}" for k, v in sorted(problems.items())]


def _moved(doc: dict[str, Any]) -> list[str]:
    line = (f"channel {_s(doc.get('channel'))}: {_s(doc.get('from_release'))} -> {_s(doc.get('to_release'))} "
            f"(move {doc.get('seq')})")
    alias = doc.get("mlflow_alias")
    return [line] + ([f"MLflow alias: {_s(alias)}"] if alias else [])


def _retention(doc: dict[str, Any]) -> list[str]:
    deleted = doc.get("deleted") or []
    verb = "would delete" if doc.get("dry_run") else "deleted"
    return [f"{verb} {len(deleted)} release(s)" + (":" if deleted else "")] + [f"  {_s(r)}" for r in deleted]


TEXT = {"history": _history, "releases": _releases, "verify": _verify, "rollback": _moved,
        "repair-pointer": _moved, "retention": _retention, "page": lambda d: [f"page: {_s(d.get('page'))}"]}


def text(command: str, doc: Any) -> str:
    """The lines ``command`` prints at a terminal for its JSON document ``doc``."""
    return "\n".join(TEXT[command](doc))
