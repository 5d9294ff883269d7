"""What a python model's ``auto_complete_config`` sets, read statically from model.py (never run).

The python backend calls ``TritonPythonModel.auto_complete_config(config)`` at load (unless the
server runs with ``--disable-auto-complete-config``) on a ``pb_utils.ModelConfig`` holding
config.pbtxt, and uses what it returns as the model's config. :func:`read_completion` reads the
calls on that argument in the order they run (``set_max_batch_size``, ``set_dynamic_batching``,
``add_input``, ``add_output``, ``set_model_transaction_policy``) where their arguments are
literals, or names bound once to literals (``dict(decoupled=True)`` included), also through a
``for`` loop over a literal list. A call inside a branch, a loop over something else, an
argument computed at run time: the completion is *unread*, and says where.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

#: ModelConfig's methods in python_backend (as_dict only reads)
METHODS = frozenset({"as_dict", "set_max_batch_size", "set_dynamic_batching", "add_input", "add_output",
                     "set_model_transaction_policy"})
_UNKNOWN = object()  # a name bound to something that is not a literal


@dataclass(frozen=True)
class Call:
    """One call on the config argument: the method, its literal argument (None: none) and its line."""

    method: str
    argument: Any
    line: int


@dataclass
class Completion:
    """What ``auto_complete_config`` does, as far as the file tells."""

    line: int  # where auto_complete_config is defined
    calls: list[Call] = field(default_factory=list)
    unread: str = ""  # why the calls cannot all be known statically (empty: they can)
    invalid: str = ""  # why Triton's call of the function fails whatever the config (empty: it does not)


def read_completion(tree: ast.Module) -> Completion | None:
    """The completion of a parsed model.py; None when TritonPythonModel has no auto_complete_config."""
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TritonPythonModel"), None)
    func = None
    if model is not None:
        func = next((n for n in model.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and n.name == "auto_complete_config"), None)
    if func is None:
        return None
    done = Completion(func.lineno)
    param = _parameter(func, done)
    if param is None:
        return done
    env: dict[str, Any] = {}
    returned = _statements(func.body, param, env, done)
    if not returned and not done.unread and not done.invalid:
        if any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(func)):
            done.unread = "it returns from inside a branch or a loop"
        else:
            done.invalid = ("it does not return its argument, so Triton gets None (\"auto_complete_config function "
                            "in model '...' must return a valid pb.ModelConfig object\"); end it with return "
                            f"{param}")
    return done


def _parameter(func: ast.FunctionDef | ast.AsyncFunctionDef, done: Completion) -> str | None:
    """The name the config arrives under: Triton calls it on the class, ``TritonPythonModel.auto_complete_config(config)``."""
    if isinstance(func, ast.AsyncFunctionDef):
        done.invalid = "it is async def, so Triton gets a coroutine, not the config; make it a plain def"
        return None
    decorators = {d.id if isinstance(d, ast.Name) else ast.unparse(d) for d in func.decorator_list}
    if func.args.vararg or func.args.kwonlyargs:
        done.unread = "its arguments are not one plain parameter"
        return None
    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    required = len(params) - len(func.args.defaults)
    skip = 1 if "classmethod" in decorators else 0
    if decorators - {"staticmethod", "classmethod"}:
        done.unread = f"it is decorated ({', '.join(sorted(decorators))})"
        return None
    if required - skip > 1 or len(params) <= skip:
        done.invalid = (f"Triton calls it on the class with one argument, but it takes {_arguments(params)}; "
                        "declare it @staticmethod def auto_complete_config(auto_complete_model_config)")
        return None
    return params[skip]


def _arguments(params: list[str]) -> str:
    return f"({', '.join(params)})" if params else "no arguments"


def _statements(body: list[ast.stmt], param: str, env: dict[str, Any], done: Completion) -> bool:
    """Read ``body`` in order into ``done``; True once it has returned the config."""
    for stmt in body:
        if done.unread or done.invalid:
            return False
        if isinstance(stmt, ast.Return):
            if isinstance(stmt.value, ast.Name) and stmt.value.id == param:
                return True
            done.unread = f"line {stmt.lineno}: it returns something other than its argument {param!r}"
            return False
        if isinstance(stmt, ast.Expr) and _call_on(stmt.value, param):
            _record(stmt.value, env, done, None)
        elif isinstance(stmt, ast.For) and not stmt.orelse and _loop(stmt, param, env, done):
            continue
        elif _uses(stmt, param):
            rebinds = any(_uses(t, param) for t in getattr(stmt, "targets", []))
            if isinstance(stmt, ast.Assign) and not rebinds and _reads_only(stmt.value, param):
                _bind(stmt, env)
                continue
            kind = type(stmt).__name__.lower()
            done.unread = f"line {stmt.lineno}: the config is used inside {'an' if kind[0] in 'aeiou' else 'a'} {kind}"
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)) or _stores(stmt):
            _bind(stmt, env)
    return False


def _call_on(node: ast.expr, param: str) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == param)


def _record(call: ast.Call, env: dict[str, Any], done: Completion, loop: tuple[str, Any] | None) -> None:
    method = call.func.attr  # type: ignore[attr-defined]
    if method not in METHODS:
        done.invalid = (f"line {call.lineno}: pb_utils.ModelConfig has no method {method!r} (it has "
                        f"{', '.join(sorted(METHODS))}), so the call fails with AttributeError; fix the name")
        return
    if call.keywords or len(call.args) > 1 or any(isinstance(a, ast.Starred) for a in call.args):
        done.unread = f"line {call.lineno}: {method} is called with arguments the linter does not read"
        return
    argument = None
    if call.args:
        argument = _value(call.args[0], env, loop)
        if argument is _UNKNOWN:
            done.unread = f"line {call.lineno}: the argument of {method} is computed at run time"
            return
    done.calls.append(Call(method, argument, call.lineno))


def _loop(stmt: ast.For, param: str, env: dict[str, Any], done: Completion) -> bool:
    """``for x in <literal list>: param.add_input(x)`` unrolled; False when the loop is not of that form."""
    items = _value(stmt.iter, env, None)
    if not isinstance(stmt.target, ast.Name) or not isinstance(items, (list, tuple)):
        return False
    calls = [s.value for s in stmt.body if isinstance(s, ast.Expr) and _call_on(s.value, param)]
    if len(calls) != len(stmt.body):
        return False
    for item in items:
        for call in calls:
            _record(call, env, done, (stmt.target.id, item))  # type: ignore[arg-type]
    return True


def _value(node: ast.expr, env: dict[str, Any], loop: tuple[str, Any] | None) -> Any:
    """The literal ``node`` is (names looked up in ``env``), or _UNKNOWN."""
    if isinstance(node, ast.Name):
        if loop is not None and node.id == loop[0]:
            return loop[1]
        return env.get(node.id, _UNKNOWN)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        values = {k.arg: _value(k.value, env, loop) for k in node.keywords if k.arg}
        ok = len(values) == len(node.keywords) and _UNKNOWN not in values.values()
        return values if ok else _UNKNOWN
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_value(e, env, loop) for e in node.elts]
        return _UNKNOWN if any(i is _UNKNOWN for i in items) else (items if isinstance(node, ast.List) else tuple(items))
    if isinstance(node, ast.Dict) and None not in node.keys:
        keys = [_value(k, env, loop) for k in node.keys]  # type: ignore[arg-type]
        values = [_value(v, env, loop) for v in node.values]
        if _UNKNOWN in keys or any(v is _UNKNOWN for v in values):
            return _UNKNOWN
        try:
            return dict(zip(keys, values))
        except TypeError:
            return _UNKNOWN
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _UNKNOWN


def _uses(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _reads_only(value: ast.expr, param: str) -> bool:
    """``x = config.as_dict()`` (or other reads): the config is not changed."""
    calls = [n for n in ast.walk(value) if _call_on(n, param)]  # type: ignore[arg-type]
    return all(c.func.attr == "as_dict" for c in calls) and not any(  # type: ignore[attr-defined]
        isinstance(n, ast.Name) and n.id == param for n in ast.walk(value) if not _in(n, calls))


def _in(node: ast.AST, calls: list[ast.Call]) -> bool:
    return any(node is c.func.value for c in calls)  # type: ignore[attr-defined]


def _stores(stmt: ast.stmt) -> bool:
    return any(isinstance(n, (ast.Name, ast.Subscript, ast.Attribute)) and isinstance(getattr(n, "ctx", None), ast.Store)
               for n in ast.walk(stmt))


def _bind(stmt: ast.stmt, env: dict[str, Any]) -> None:
    """Names ``stmt`` binds: a literal for a plain ``name = literal`` seen first, else unknown from here on."""
    simple = isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
    if simple and stmt.targets[0].id not in env:  # type: ignore[union-attr,attr-defined]
        env[stmt.targets[0].id] = _value(stmt.value, env, None)  # type: ignore[union-attr,attr-defined]
        return
    for node in ast.walk(stmt):
        target = node.value if isinstance(node, (ast.Subscript, ast.Attribute)) else node
        if isinstance(target, ast.Name) and isinstance(getattr(node, "ctx", None), ast.Store):
            env[target.id] = _UNKNOWN
