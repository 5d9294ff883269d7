"""The hardened reading of a spec-like file: a bounded, UTF-8-checked read and a YAML loader that refuses
duplicate keys, deep nesting and alias bombs before anything is built from the document.

:func:`read_bounded_text` is also how ``model-release report`` reads a report.json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..errors import SpecError, UserError
from ..safe_text import echo

#: a release spec is a page of YAML: larger files are refused before they are parsed
MAX_SPEC_BYTES = 1 << 20
#: how deeply a spec may nest (the deepest real spec nests 5 levels)
MAX_SPEC_DEPTH = 32
#: how many values a spec may hold once its YAML aliases are expanded (an alias "bomb" of a few
#: hundred bytes expands to billions)
MAX_SPEC_NODES = 200_000


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit > 1 << 20 else f"{limit >> 10} KiB"


def read_bounded_text(path: Path, shown: str, *, limit: int, kind: str, advice: str,
                      error: type[UserError] = UserError) -> str:
    """The text of the regular file ``path``, read at most ``limit`` bytes, refused unless it is UTF-8 text.

    Args:
        path: the file to read.
        shown: how to name it in a message (already escaped, e.g. ``release spec 'a.yaml'``).
        limit: the most bytes it may hold.
        kind: what it should be, for messages (``a release spec``, ``a canary report``).
        advice: what to do instead, for messages (``pass a YAML file such as releases/iris.yaml``).
        error: the :class:`UserError` class raised.

    Raises:
        UserError: (``error``) it is missing, not a file, unreadable, larger than ``limit``, not
            UTF-8 or holds NUL bytes; a UTF-8 byte-order mark is dropped.
    """
    if not path.exists():
        raise error(f"{shown} does not exist; {advice}")
    if not path.is_file():
        raise error(f"{shown} is not a file; {advice}")
    try:
        with open(path, "rb") as f:
            raw = f.read(limit + 1)
    except OSError as exc:
        raise error(f"{shown} cannot be read ({exc.strerror or type(exc).__name__}); "
                    "check the path and its permissions") from None
    if len(raw) > limit:
        raise error(f"{shown} is larger than {_size(limit)}, far more than {kind}: check that this is the right file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{shown} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}), so not {kind}; "
                    f"save it as UTF-8 or {advice}") from None
    if "\x00" in text:
        raise error(f"{shown} is a binary file (it holds NUL bytes), not {kind}; {advice}")
    return text


def read_spec_text(path: Path, shown: str) -> str:
    """A release spec file's text (see :func:`read_bounded_text`), refused as a :class:`SpecError`."""
    return read_bounded_text(path, f"release spec {shown}", limit=MAX_SPEC_BYTES, kind="a release spec (a page of YAML)",
                             advice="pass a YAML file such as releases/iris.yaml", error=SpecError)


class _SpecLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing duplicate keys and nesting deeper than :data:`MAX_SPEC_DEPTH`."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_SPEC_DEPTH:
                mark = self.peek_event().start_mark
                raise _SpecShapeError(f"it nests deeper than {MAX_SPEC_DEPTH} levels (at line {mark.line + 1})")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:
                    continue  # an unhashable key: the base class refuses it
                if first is None:
                    seen[key] = key_node.start_mark.line
                else:
                    lines = sorted({first + 1, key_node.start_mark.line + 1})
                    raise _SpecShapeError(
                        f"key {echo(key)} is given twice in one mapping (line {' and '.join(map(str, lines))}); "
                        "YAML would silently keep the last one: remove one of them"
                    )
        return super().construct_mapping(node, deep=deep)


class _SpecShapeError(Exception):
    """The YAML is well-formed but not a spec's shape: duplicate keys, too deep, too large."""


def _expanded_size(root: Any) -> None:
    """Refuse a composed YAML graph that is recursive, or too deep or too large once aliases expand.

    Aliases share nodes, so sizes are counted once per node (memoised) and never by expanding.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = [c for pair in node.value for c in pair] if isinstance(node, yaml.MappingNode) else (
            list(node.value) if isinstance(node, yaml.SequenceNode) else [])
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            if size[key] > MAX_SPEC_NODES:
                raise _SpecShapeError(f"its aliases expand to more than {MAX_SPEC_NODES} values (an alias bomb?)")
            if depth[key] > MAX_SPEC_DEPTH:
                raise _SpecShapeError(f"its aliases expand to nesting deeper than {MAX_SPEC_DEPTH} levels")
            continue
        if key in size:
            continue
        if key in on_path:
            raise _SpecShapeError(f"an alias refers to a mapping or list that contains it (line {node.start_mark.line + 1})")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)


def parse_yaml(text: str, what: str) -> Any:
    """Parse one YAML document of spec-like input safely (see :func:`load_spec` for what is refused).

    Raises:
        SpecError: ``what`` (a phrase naming the input) is not valid YAML or not a spec's shape.
    """
    loader = _SpecLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node)
        return loader.construct_document(node)
    except _SpecShapeError as exc:
        raise SpecError(f"{what} is refused: {exc}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = ", ".join(p for p in (exc.context, exc.problem) if p)
        raise SpecError(f"{what} is not valid YAML: {problem}{at}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{what} is not valid YAML: {exc}") from None
    except RecursionError:
        raise SpecError(f"{what} is refused: it nests too deeply to read") from None
    finally:
        loader.dispose()
