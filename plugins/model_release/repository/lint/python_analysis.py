"""What the linter reads statically from a python-backend model.py (it never imports nor compiles it).

:func:`analyze` walks the parsed tree once. It finds the ``TritonPythonModel`` class and its
``execute``, ``return``/``yield``/``await`` outside a function, ``await`` outside an ``async def``,
names that are used but never bound or imported (told apart by whether the code using them runs
when Triton loads the model: module level, class bodies, ``initialize``), and every BLS call
(``InferenceRequest(model_name=...)``) with its target when the name can be known without running
the code: a string literal, a module-level string constant, a loop over a module-level tuple of
them, or a parameter of a module function whose every call passes one of those.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field
from typing import Any, Callable

from .autocomplete_read import Completion, read_completion

_BUILTINS = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__", "__builtins__", "__loader__"}


@dataclass
class BlsCall:
    """One ``InferenceRequest(...)`` in model.py."""

    line: int
    targets: tuple[str, ...] | None  # None: the model name is computed at run time
    outputs: tuple[str, ...] | None  # requested_output_names when literal
    expression: str


@dataclass
class PythonAnalysis:
    """The facts the linter's python rules need about one model.py."""

    syntax_error: str | None = None
    has_class: bool = False
    execute_line: int | None = None
    execute_async: bool = False
    awaits_in_sync: list[tuple[str, int]] = field(default_factory=list)  # (function, line)
    undefined: list[tuple[str, int]] = field(default_factory=list)  # (name, first line), used per request
    undefined_at_load: list[tuple[str, int]] = field(default_factory=list)  # used where model.py runs at load
    bls_calls: list[BlsCall] = field(default_factory=list)
    blocking_exec: int | None = None  # line of a blocking .exec() call
    execute_returns_value: int | None = None  # line of a `return <value>` in execute
    execute_returns: bool = False
    execute_is_stub: bool = False  # execute's body is only pass, ... or a docstring (a placeholder)
    completion: Completion | None = None  # what auto_complete_config sets (None: there is none)


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
#: TritonPythonModel methods the python backend calls while loading the model
_LOAD_METHODS = frozenset({"initialize", "auto_complete_config"})


@dataclass
class _Walk:
    """What one pass over the tree collects: each node's parent, and the facts the rules read."""

    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    calls: list[ast.Call] = field(default_factory=list)
    bound: set[str] = field(default_factory=set)  # every name bound anywhere (flat: scopes are not told apart)
    assigned: dict[str, int] = field(default_factory=dict)  # name -> how many times it is stored to
    loads: list[tuple[ast.Name, ast.AST | None]] = field(default_factory=list)  # (name read, enclosing function)
    awaits: list[tuple[ast.AST, ast.AST | None]] = field(default_factory=list)  # (await/async for/with, function)
    returns: list[tuple[ast.Return, ast.AST | None]] = field(default_factory=list)
    outside: list[tuple[str, int]] = field(default_factory=list)  # (keyword, line) of return/yield outside a function


def _walk(tree: ast.Module) -> _Walk:
    """Every node once, breadth first, with the function (or lambda) enclosing it."""
    w = _Walk()
    queue: list[tuple[ast.AST, ast.AST | None]] = [(tree, None)]
    i = 0
    while i < len(queue):
        node, func = queue[i]
        i += 1
        inner = node if isinstance(node, _FUNCTIONS) else func
        for child in _children(node):
            w.parents[child] = node
            queue.append((child, inner))
        kind = type(node)
        if kind is ast.Name:
            if type(node.ctx) is ast.Load:
                w.loads.append((node, func))
            else:
                w.bound.add(node.id)
                w.assigned[node.id] = w.assigned.get(node.id, 0) + 1
        elif kind is ast.Call:
            w.calls.append(node)
        else:
            handler = _HANDLERS.get(kind)
            if handler is not None:
                handler(node, func, w)
    return w


def _children(node: ast.AST) -> list[ast.AST]:
    """``ast.iter_child_nodes`` as a list (its generator costs more than the rest of the walk)."""
    out: list[ast.AST] = []
    for name in node._fields:
        value = getattr(node, name, None)
        if type(value) is list:
            out.extend(item for item in value if isinstance(item, ast.AST))
        elif isinstance(value, ast.AST):
            out.append(value)
    return out


_Handler = Callable[[Any, "ast.AST | None", _Walk], None]


def _bind(field_name: str) -> _Handler:
    """A handler recording the name(s) a node binds in its ``field_name``."""
    def handler(node: Any, func: ast.AST | None, w: _Walk) -> None:
        value = getattr(node, field_name)
        if isinstance(value, str):
            w.bound.add(value)
        elif value:
            w.bound.update(value)
    return handler


def _imports(node: Any, func: ast.AST | None, w: _Walk) -> None:
    for alias in node.names:
        if alias.name == "*":
            w.bound.add("*")
        w.bound.add(alias.asname or alias.name.split(".")[0])


def _yields(node: Any, func: ast.AST | None, w: _Walk) -> None:
    if func is None:
        w.outside.append(("yield", node.lineno))


def _awaits(node: Any, func: ast.AST | None, w: _Walk) -> None:
    w.awaits.append((node, func))


def _returns(node: Any, func: ast.AST | None, w: _Walk) -> None:
    w.returns.append((node, func))


#: node type -> what :func:`_walk` records for it, beside names and calls (other nodes: nothing)
_HANDLERS: dict[type, _Handler] = {
    ast.FunctionDef: _bind("name"), ast.AsyncFunctionDef: _bind("name"), ast.ClassDef: _bind("name"),
    ast.arg: _bind("arg"), ast.ExceptHandler: _bind("name"), ast.Global: _bind("names"), ast.Nonlocal: _bind("names"),
    ast.MatchAs: _bind("name"), ast.MatchStar: _bind("name"), ast.MatchMapping: _bind("rest"),
    ast.Import: _imports, ast.ImportFrom: _imports,
    ast.Await: _awaits, ast.AsyncFor: _awaits, ast.AsyncWith: _awaits,
    ast.Return: _returns, ast.Yield: _yields, ast.YieldFrom: _yields,
}


class _Resolver:
    """Resolve the model name passed to an InferenceRequest to literal strings, where that is possible.

    A name is looked up where it is used: the nearest enclosing loop or comprehension binding it,
    else the enclosing module-level function's parameter (resolved at every call of the function),
    else a module-level constant assigned exactly once.
    """

    def __init__(self, tree: ast.Module, walk: _Walk) -> None:
        self.parents = walk.parents
        assigned = walk.assigned
        self.constants: dict[str, tuple[str, ...]] = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                value = _literal(node.value)
                if value is not None and assigned.get(node.targets[0].id) == 1:
                    self.constants[node.targets[0].id] = value
        self.functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.calls: dict[str, list[ast.Call]] = {}
        for node in walk.calls:
            if isinstance(node.func, ast.Name) and node.func.id in self.functions:
                self.calls.setdefault(node.func.id, []).append(node)

    def names(self, node: ast.expr | None, depth: int = 0) -> tuple[str, ...] | None:
        """The strings ``node`` can be (a list: its elements), or None when only known at run time."""
        if node is None or depth > 8:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return (node.value,)
        if isinstance(node, (ast.Tuple, ast.List)):
            return _concat([self.names(element, depth + 1) for element in node.elts])
        if not isinstance(node, ast.Name):
            return None
        scope: ast.AST | None = node
        while scope is not None:
            scope = self.parents.get(scope)
            if isinstance(scope, (ast.For, ast.AsyncFor)) and _binds(scope.target, node.id):
                return self.names(scope.iter, depth + 1)
            if isinstance(scope, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
                for generator in scope.generators:
                    if _binds(generator.target, node.id):
                        return self.names(generator.iter, depth + 1)
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                params = [a.arg for a in scope.args.posonlyargs + scope.args.args]
                if node.id in params:
                    return self._argument(scope, params.index(node.id), node.id, depth)
        return self.constants.get(node.id)

    def _argument(self, func: ast.AST, position: int, name: str, depth: int) -> tuple[str, ...] | None:
        calls = self.calls.get(getattr(func, "name", ""), []) if self.functions.get(getattr(func, "name", "")) is func else []
        if not calls:
            return None
        values = []
        for call in calls:
            arg = next((k.value for k in call.keywords if k.arg == name), None)
            if arg is None and position < len(call.args):
                arg = call.args[position]
            values.append(self.names(arg, depth + 1))
        if any(v is None for v in values):
            return None
        return tuple(dict.fromkeys(n for v in values for n in v))  # type: ignore[union-attr]


def _binds(target: ast.AST, name: str) -> bool:
    return isinstance(target, ast.Name) and target.id == name


def _literal(node: ast.expr) -> tuple[str, ...] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return (node.value,)
    if isinstance(node, (ast.Tuple, ast.List)) and node.elts and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    ):
        return tuple(e.value for e in node.elts)  # type: ignore[attr-defined]
    return None


def _concat(groups: list[tuple[str, ...] | None]) -> tuple[str, ...] | None:
    if any(group is None for group in groups):
        return None
    return tuple(name for group in groups for name in group)  # type: ignore[union-attr]


def _argument(call: ast.Call, keyword: str, position: int) -> ast.expr | None:
    """An argument of ``InferenceRequest(model_name, inputs, requested_output_names, ...)``."""
    value = next((k.value for k in call.keywords if k.arg == keyword), None)
    if value is None and position < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args):
        value = call.args[position]
    return value


def _is_inference_request(call: ast.Call) -> bool:
    func = call.func
    return (isinstance(func, ast.Attribute) and func.attr == "InferenceRequest") or (
        isinstance(func, ast.Name) and func.id == "InferenceRequest"
    )


def analyze(source: str) -> PythonAnalysis:
    """Read one model.py statically (parsed, never compiled nor run).

    Args:
        source: the file's text.

    Returns:
        The facts the python lint rules check (a syntax error, or code too deeply nested for the
        Python parser, stops the rest).
    """
    result = PythonAnalysis()
    try:
        _analyze(source, result)
    except SyntaxError as exc:
        result.syntax_error = f"line {exc.lineno}: {exc.msg}"
    except (RecursionError, MemoryError) as exc:
        result.syntax_error = f"too deeply nested for the Python compiler ({type(exc).__name__})"
    return result


def _analyze(source: str, result: PythonAnalysis) -> None:
    tree = ast.parse(source)
    result.completion = read_completion(tree)
    walk = _walk(tree)
    outside = walk.outside + [("return", r.lineno) for r, func in walk.returns if func is None]
    outside += [("await", a.lineno) for a, func in walk.awaits if func is None]
    if outside:  # what the compiler, not the parser, refuses; the most common of those
        keyword, line = min(outside, key=lambda item: item[1])
        result.syntax_error = f"line {line}: '{keyword}' outside function"
        return
    execute = _read_class(tree, result)
    _read_functions(walk, execute, result)
    _read_names(walk, result)
    _read_bls(tree, walk, result)


def _read_class(tree: ast.Module, result: PythonAnalysis) -> ast.AST | None:
    """TritonPythonModel and its execute (returned)."""
    model_class = next(
        (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TritonPythonModel"), None
    )
    if model_class is None:
        return None
    result.has_class = True
    execute = next(
        (n for n in model_class.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "execute"),
        None,
    )
    if execute is not None:
        result.execute_line = execute.lineno
        result.execute_async = isinstance(execute, ast.AsyncFunctionDef)
        result.execute_is_stub = all(_is_placeholder(statement) for statement in execute.body)
    return execute


def _is_placeholder(statement: ast.stmt) -> bool:
    """``pass``, ``...`` or a bare string (a docstring): a statement that does nothing."""
    if isinstance(statement, ast.Pass):
        return True
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) and (
        statement.value.value is Ellipsis or isinstance(statement.value.value, str))


def _read_functions(walk: _Walk, execute: ast.AST | None, result: PythonAnalysis) -> None:
    """Awaits outside async functions (one per function); execute's returns."""
    flagged: set[ast.AST] = set()
    for node, func in walk.awaits:
        if isinstance(func, (ast.FunctionDef, ast.Lambda)) and func not in flagged:
            flagged.add(func)
            result.awaits_in_sync.append((getattr(func, "name", "<lambda>"), node.lineno))
    result.awaits_in_sync.sort(key=lambda item: item[1])
    for node, func in walk.returns:
        if execute is not None and func is execute:
            result.execute_returns = True
            if node.value is not None and not (isinstance(node.value, ast.Constant) and node.value.value is None):
                result.execute_returns_value = result.execute_returns_value or node.lineno


def _read_names(walk: _Walk, result: PythonAnalysis) -> None:
    """Names used but never bound, split by whether the code using them runs at load or per request."""
    if "*" in walk.bound:
        return
    first: dict[str, int] = {}
    at_load: set[str] = set()
    for node, func in walk.loads:
        if node.id in walk.bound or node.id in _BUILTINS:
            continue
        first[node.id] = min(first.get(node.id, node.lineno), node.lineno)
        if func is None or getattr(func, "name", "") in _LOAD_METHODS:
            at_load.add(node.id)
    for name, line in sorted(first.items(), key=lambda item: item[1]):
        (result.undefined_at_load if name in at_load else result.undefined).append((name, line))


def _read_bls(tree: ast.Module, walk: _Walk, result: PythonAnalysis) -> None:
    """Every InferenceRequest with its target(s) and requested outputs; the first blocking exec()."""
    requests = [call for call in walk.calls if _is_inference_request(call)]
    resolver = _Resolver(tree, walk) if requests else None
    for node in requests:
        assert resolver is not None
        model_arg = _argument(node, "model_name", 0)
        outputs_arg = _argument(node, "requested_output_names", 2)
        outputs = resolver.names(outputs_arg) if outputs_arg is not None else None
        result.bls_calls.append(
            BlsCall(node.lineno, resolver.names(model_arg), outputs, ast.unparse(model_arg) if model_arg is not None else "?")
        )
    blocking = [c.lineno for c in walk.calls if isinstance(c.func, ast.Attribute) and c.func.attr == "exec"]
    result.blocking_exec = min(blocking) if blocking else None
    result.bls_calls.sort(key=lambda c: c.line)
