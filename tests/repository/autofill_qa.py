"""Triton's QA cases for python auto-complete, re-created from what each checks (not copied).

Triton's ``qa/L0_model_config`` holds ``autofill_noplatform_success/python/*`` (configs that leave
out what ``auto_complete_config`` in model.py declares; Triton must load them) and
``autofill_noplatform/python/*`` (auto-complete conflicts; Triton must refuse them). Its test.sh
lays each case out as one model folder ``models/<case>/`` (config.pbtxt beside ``1/model.py``;
eight cases take a shared model.py declaring INPUT0/INPUT1 and OUTPUT0/OUTPUT1, FP32 [4], no
batching; the others' own model.py is copied into 1/ and stays beside config.pbtxt as well), or, for
``conflicting_scheduler_ensemble``, a whole repository of three models. No
config names a backend or a platform: Triton takes python from the file name ``model.py``.

:data:`SUCCESS` and :data:`REFUSED` map each case to its repository layout (model folder ->
config.pbtxt text, model.py source) and the model whose load decides it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

FP32 = "TYPE_FP32"


def _io(kind: str, name: str, dtype: str | None = FP32, dims: list[int] | None = (4,), optional: bool = False) -> str:
    fields = [f'name: "{name}"'] if name else []
    if dtype:
        fields.append(f"data_type: {dtype}")
    if dims:
        fields.append(f"dims: [ {', '.join(str(d) for d in dims)} ]")
    if optional:
        fields.append("optional: true")
    return f"{kind} {{ {' '.join(fields)} }}"


def config(name: str | None, inputs: list[str] = (), outputs: list[str] = (), *extra: str) -> str:
    """A config.pbtxt: an optional name, tensors written with :func:`inp`/:func:`out`, more lines."""
    lines = [f'name: "{name}"'] if name else []
    return "\n".join([*lines, *inputs, *outputs, *extra]) + "\n"


def inp(name: str, dtype: str | None = FP32, dims=(4,), optional: bool = False) -> str:
    return _io("input", name, dtype, list(dims) if dims else None, optional)


def out(name: str, dtype: str | None = FP32, dims=(4,)) -> str:
    return _io("output", name, dtype, list(dims) if dims else None)


def _spec(name: str | None, dtype: str | None = FP32, dims=(4,), **more) -> str:
    """A tensor dict as model.py writes it for add_input/add_output (keys left out when None)."""
    parts = [f'"name": "{name}"'] if name else []
    if dtype:
        parts.append(f'"data_type": "{dtype}"')
    if dims:
        parts.append(f'"dims": {list(dims)}')
    parts += [f'"{key}": {value!r}' for key, value in more.items()]
    return "{" + ", ".join(parts) + "}"


STANDARD_INPUTS = [_spec("INPUT0"), _spec("INPUT1")]
STANDARD_OUTPUTS = [_spec("OUTPUT0"), _spec("OUTPUT1")]


_EXECUTE = [
    "    def execute(self, requests):",
    "        responses = []",
    "        for request in requests:",
    "            a = pb_utils.get_input_tensor_by_name(request, \"INPUT0\").as_numpy()",
    "            outputs = [pb_utils.Tensor(\"OUTPUT0\", a), pb_utils.Tensor(\"OUTPUT1\", a)]",
    "            responses.append(pb_utils.InferenceResponse(outputs))",
    "        return responses",
]
#: the placeholder Triton's own QA model.py files have where only the load is tested
_STUB_EXECUTE = [
    "    def execute(self, requests):",
    "        pass",
]
_DECOUPLED_EXECUTE = [
    "    def execute(self, requests):",
    "        for request in requests:",
    "            a = pb_utils.get_input_tensor_by_name(request, \"INPUT0\").as_numpy()",
    "            sender = request.get_response_sender()",
    "            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor(\"OUTPUT0\", a), pb_utils.Tensor(\"OUTPUT1\", a)]),",
    "                        flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)",
    "        return None",
]


def model_py(batch: int = 0, inputs: list[str] = STANDARD_INPUTS, outputs: list[str] = STANDARD_OUTPUTS,
             dynamic: bool = False, policy: str | None = None, returns: bool = True, stub: bool = False) -> str:
    """A model.py whose static auto_complete_config declares what the arguments say.

    ``stub``: execute is ``pass``, as in the QA cases whose model.py Triton only loads.
    """
    body = [f"        config.set_max_batch_size({batch})"]
    if dynamic:
        body.append("        config.set_dynamic_batching()")
    if policy is not None:
        body.append(f"        config.set_model_transaction_policy({policy})")
    body += [f"        config.add_input({spec})" for spec in inputs]
    body += [f"        config.add_output({spec})" for spec in outputs]
    if returns:
        body.append("        return config")
    return "\n".join([
        "import numpy as np",
        "import triton_python_backend_utils as pb_utils",
        "",
        "",
        "class TritonPythonModel:",
        "    @staticmethod",
        "    def auto_complete_config(config):",
        *body,
        "",
        *(_STUB_EXECUTE if stub else _DECOUPLED_EXECUTE if policy and "decoupled=True" in policy else _EXECUTE),
        "",
    ])


#: the model.py test.sh copies into eight cases: no batching, the four standard tensors
SHARED = model_py()
STANDARD_CONFIG_TENSORS = [inp("INPUT0"), inp("INPUT1"), out("OUTPUT0"), out("OUTPUT1")]


@dataclass(frozen=True)
class QaCase:
    """One QA case: the models it lays out and the one whose load decides it."""

    model: str
    models: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)  # folder -> (config, model.py)
    checks: str = ""
    beside: bool = True  # test.sh copies the case's own model.py into 1/ and leaves it beside config.pbtxt too

    def write(self, root: Path) -> Path:
        """Lay the case out under ``root`` as test.sh does; return ``root``."""
        for folder, (text, source) in self.models.items():
            (root / folder / "1").mkdir(parents=True)
            if text is not None:
                (root / folder / "config.pbtxt").write_text(text)
            if source is not None:
                (root / folder / "1" / "model.py").write_text(source)
                if self.beside:
                    (root / folder / "model.py").write_text(source)
        return root


def _one(name: str, text: str, source: str, checks: str) -> QaCase:
    return QaCase(name, {name: (text, source)}, checks, beside=source is not SHARED)


def _steps_ensemble() -> QaCase:
    step = model_py(4, [_spec("INPUT0")], [_spec("OUTPUT0")], dynamic=True, stub=True)
    ensemble = config("conflicting_scheduler_ensemble", [inp("ENSEMBLE_INPUT0")], [out("ENSEMBLE_OUTPUT0")], """
platform: "ensemble"
ensemble_scheduling { step [
  { model_name: "ensemble_first_step" model_version: 1
    input_map { key: "INPUT0" value: "ENSEMBLE_INPUT0" } output_map { key: "OUTPUT0" value: "temp_output_0" } },
  { model_name: "ensemble_second_step" model_version: 1
    input_map { key: "INPUT0" value: "temp_output_0" } output_map { key: "OUTPUT0" value: "ENSEMBLE_OUTPUT0" } }
] }""")
    models = {"conflicting_scheduler_ensemble": (ensemble, step)}  # its model.py is ignored: it is an ensemble
    for name in ("ensemble_first_step", "ensemble_second_step"):
        models[name] = (config(name, [inp("INPUT0")], [out("OUTPUT0")]), step)
    return QaCase("conflicting_scheduler_ensemble", models,
                  "steps whose model.py turns on dynamic batching, under an ensemble that has none")


def _success() -> dict[str, QaCase]:
    std = STANDARD_CONFIG_TENSORS
    cases = [
        _one("dynamic_batching", config("dynamic_batching", std[:2], std[2:]), model_py(4, dynamic=True, stub=True),
             "batch size and dynamic batching come from model.py"),
        _one("dynamic_batching_no_op", config("dynamic_batching_no_op", std[:2], std[2:], "max_batch_size: 4",
                                              "dynamic_batching { preferred_batch_size: [ 4 ] }"),
             model_py(4, dynamic=True, stub=True), "model.py asks for what the config already has"),
        _one("empty_config", "", SHARED, "an empty config.pbtxt: everything from model.py"),
        _one("incomplete_input", config("incomplete_input", [inp("INPUT1")]),
             model_py(0, [_spec("INPUT0")], STANDARD_OUTPUTS, stub=True), "one input in the config, the other and the outputs from model.py"),
        _one("incomplete_output", config("incomplete_output", [], [out("OUTPUT0", dims=None), out("OUTPUT1", dtype=None)]),
             SHARED, "outputs without dims or data_type, completed from model.py"),
        _one("model_transaction_policy", config(None, std[:2], std[2:]), model_py(4, policy="dict(decoupled=True)"),
             "model.py makes the model decoupled"),
        _one("model_transaction_policy_decoupled_false", config(None, std[:2], std[2:]),
             model_py(4, policy="dict(decoupled=False)", stub=True), "model.py sets decoupled false"),
        _one("model_transaction_policy_no_op", config(None, std[:2], std[2:], "model_transaction_policy { decoupled: true }"),
             model_py(4, policy="dict(decoupled=True)"), "model.py sets decoupled as the config does"),
        _one("optional_input", config(None, [inp("INPUT1")]),
             model_py(0, [_spec("INPUT0", optional=True)], STANDARD_OUTPUTS, stub=True), "an optional input from model.py"),
        _one("unknown_input", config("unknown_input", [inp("INPUT0"), inp("INPUT_UNKNOWN")], std[2:]), SHARED,
             "a config input model.py does not declare is kept"),
        _one("unknown_output", config("unknown_output", std[:2], [out("OUTPUT_UNKNOWN"), out("OUTPUT1")]), SHARED,
             "a config output model.py does not declare is kept"),
    ]
    return {c.model: c for c in [*cases, _steps_ensemble()]}


def _refused() -> dict[str, QaCase]:
    std = STANDARD_CONFIG_TENSORS

    def full(name: str, *extra: str) -> str:
        return config(name, std[:2], std[2:], *extra)

    def tensors(inputs=STANDARD_INPUTS, outputs=STANDARD_OUTPUTS, batch: int = 0) -> str:
        return model_py(batch, inputs, outputs)

    cases = [
        _one("conflicting_max_batch_size", full("conflicting_max_batch_size", "max_batch_size: 6"), model_py(4),
             "model.py sets a max_batch_size below the config's"),
        _one("conflicting_scheduler_sequence", full("conflicting_scheduler_sequence", "sequence_batching { }"),
             model_py(4, dynamic=True), "model.py asks for dynamic batching on a sequence-batched model"),
        _one("input_mismatch_datatype", config("input_mismatch_datatype", [inp("INPUT0"), inp("INPUT1", "TYPE_INT32")], std[2:]),
             SHARED, "an input whose data type differs from model.py's"),
        _one("input_mismatch_dims", config("input_mismatch_dims", [inp("INPUT0"), inp("INPUT1", dims=(16,))], std[2:]),
             SHARED, "an input whose dims differ from model.py's"),
        _one("output_mismatch_datatype", config("output_mismatch_datatype", std[:2], [out("OUTPUT0", "TYPE_INT32"), out("OUTPUT1")]),
             SHARED, "an output whose data type differs from model.py's"),
        _one("output_mismatch_dims", config("output_mismatch_dims", std[:2], [out("OUTPUT0"), out("OUTPUT1", dims=(16,))]),
             SHARED, "an output whose dims differ from model.py's"),
        _one("input_missing_datatype", full("input_missing_datatype"), tensors([_spec("INPUT0", None), _spec("INPUT1")]),
             "add_input without data_type"),
        _one("input_missing_dims", full("input_missing_dims"), tensors([_spec("INPUT0"), _spec("INPUT1", dims=None)]),
             "add_input without dims"),
        _one("input_missing_name", full("input_missing_name"), tensors([_spec("INPUT0"), _spec(None)]), "add_input without name"),
        _one("input_wrong_property", full("input_wrong_property"), tensors([_spec("INPUT0"), _spec("INPUT1", shape=True)]),
             "add_input with a key it does not take"),
        _one("output_missing_datatype", full("output_missing_datatype"), tensors(outputs=[_spec("OUTPUT0", None), _spec("OUTPUT1")]),
             "add_output without data_type"),
        _one("output_missing_dims", full("output_missing_dims"), tensors(outputs=[_spec("OUTPUT0"), _spec("OUTPUT1", dims=None)]),
             "add_output without dims"),
        _one("output_missing_name", full("output_missing_name"), tensors(outputs=[_spec(None), _spec("OUTPUT1")]),
             "add_output without name"),
        _one("output_wrong_property", full("output_wrong_property"), tensors(outputs=[_spec("OUTPUT0"), _spec("OUTPUT1", optional=True)]),
             "add_output with a key it does not take (optional is for inputs only)"),
        _one("model_transaction_policy_invalid_args", config(None, std[:2], std[2:]),
             model_py(4, policy='{"invalid": "argument"}'), "a transaction policy key other than decoupled"),
        _one("model_transaction_policy_mismatch", config(None, std[:2], std[2:], "model_transaction_policy { decoupled: false }"),
             model_py(4, policy="dict(decoupled=True)"), "model.py makes decoupled what the config says is not"),
        _one("no_return", full("no_return"), model_py(returns=False), "auto_complete_config returns nothing"),
    ]
    return {c.model: c for c in cases}


SUCCESS = _success()
REFUSED = _refused()
