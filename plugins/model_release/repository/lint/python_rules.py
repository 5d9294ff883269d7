"""Rules on python-backend models: their model.py (read statically, never imported) and BLS calls.

What the python backend refuses at load (the import of model.py, ``TritonPythonModel()``,
``initialize``) and what only fails once requests come (``execute``, BLS calls) are told apart:
see :mod:`.rulebook`.
"""

from __future__ import annotations

import hashlib

from .findings import listing
from .file_rules import SOURCE_LIMIT, Refused, read_capped
from .python_analysis import BlsCall, PythonAnalysis, analyze
from .model_info import Add, ModelInfo


class PythonReader:
    """Reads each served model.py once; identical sources are analysed once (by digest)."""

    def __init__(self, add: Add) -> None:
        self.add = add
        self._analyses: dict[bytes, PythonAnalysis] = {}

    def read(self, info: ModelInfo) -> None:
        """Analyse the model.py of every served version into ``info.python``; BLS targets into ``info.deps``."""
        assert info.config is not None
        filename = info.config.default_model_filename or "model.py"
        for version in info.served:
            folder = info.folders.get(version)
            path = folder / filename if folder is not None else None
            if path is None or not path.exists() and not path.is_symlink():
                continue  # model-file-missing or a version finding says so
            try:
                source = read_capped(path, SOURCE_LIMIT)
            except Refused as refused:
                rule = "model-file-missing" if refused.rule == "config-not-a-file" else refused.rule
                self.add(rule, info.name, f"{info.name}/{version}/{filename}", f"{filename} {refused.reason}")
                continue
            key = hashlib.sha1(source).digest()
            if key not in self._analyses:
                self._analyses[key] = analyze(source.decode("utf-8", errors="replace"))
            info.python[version] = self._analyses[key]
            for call in self._analyses[key].bls_calls:
                info.deps.update(call.targets or ())


def check_python(info: ModelInfo, models: dict[str, ModelInfo], add: Add) -> None:
    """The python rules on every analysed version of ``info``."""
    assert info.config is not None
    for version, a in info.python.items():
        file = f"{info.name}/{version}/{info.config.default_model_filename or 'model.py'}"
        if a.syntax_error:
            add("python-syntax", info.name, file,
                f"does not compile ({a.syntax_error}), so the python backend cannot import it; fix the code")
            continue
        _structure(info, file, a, add)
        _names(info, file, a, add)
        for call in a.bls_calls:
            _bls_call(info, models, file, call, add)


def _structure(info: ModelInfo, file: str, a: PythonAnalysis, add: Add) -> None:
    if not a.has_class:
        add("python-no-model-class", info.name, file,
            "defines no class TritonPythonModel, which the python backend instantiates at load; add it")
    elif a.execute_line is None:
        add("python-no-execute", info.name, file,
            "TritonPythonModel has no execute(self, requests) method; Triton loads the model but fails every "
            "request: add one")
    for func, line in a.awaits_in_sync:
        add("python-await-in-sync", info.name, file,
            f"line {line}: await in {func}(), which is not async, so model.py does not compile (\"'await' outside "
            f"async function\"); declare it 'async def {func}' (Triton supports async def execute)")
    if a.execute_line is None:
        return
    if info.decoupled and a.execute_returns_value:
        add("decoupled-returns", info.name, file,
            f"line {a.execute_returns_value}: the model is decoupled but execute returns a value; "
            "send responses through request.get_response_sender() and return None")
    elif not info.decoupled and a.execute_is_stub:
        add("python-execute-stub", info.name, file,
            f"line {a.execute_line}: execute is a placeholder (pass, ... or a docstring): Triton loads the model, "
            "and every request to it fails; fine for a model only loaded (as Triton's own QA models are), "
            "otherwise return one InferenceResponse per request")
    elif not info.decoupled and not a.execute_returns:
        add("python-no-responses", info.name, file,
            f"line {a.execute_line}: execute never returns; return one InferenceResponse per "
            "request (or make the model decoupled)")


def _names(info: ModelInfo, file: str, a: PythonAnalysis, add: Add) -> None:
    for name, line in a.undefined_at_load:
        add("python-undefined-at-load", info.name, file,
            f"line {line}: name {name!r} is never defined or imported, and that code runs when Triton loads the "
            "model (module level, the class body or initialize), so the load fails with NameError; import or define it")
    for name, line in a.undefined:
        add("python-undefined-name", info.name, file,
            f"line {line}: name {name!r} is used but never defined or imported; requests reaching it fail with "
            "NameError: import or define it")


def _bls_call(info: ModelInfo, models: dict[str, ModelInfo], file: str, call: BlsCall, add: Add) -> None:
    if call.targets is None:
        add("bls-target-dynamic", info.name, file,
            f"line {call.line}: model_name={call.expression} is computed at run time, so the linter cannot "
            "check the target or its load order; load that model before this one")
        return
    for target in call.targets:
        if target == info.name:
            add("bls-self-call", info.name, file,
                f"line {call.line}: the model calls itself through BLS, which deadlocks once its instances "
                "are all waiting on themselves; call another model")
            continue
        other = models.get(target)
        if other is None:
            add("bls-target-missing", info.name, file,
                f"line {call.line}: BLS call to model {target!r}, which is not in the repository "
                f"(models: {listing(sorted(models))}); add it or fix the name")
            continue
        if other.config is not None and call.outputs is not None:
            known = {t.name for t in other.config.output}
            unknown = [o for o in call.outputs if o not in known]
            if unknown:
                add("bls-output-unknown", info.name, file,
                    f"line {call.line}: requests outputs {listing(unknown)} of {target!r}, which has "
                    f"{listing(sorted(known))}; request outputs it has")
