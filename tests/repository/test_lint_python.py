"""The static reading of model.py: BLS targets, awaits, undefined names, returns."""

from __future__ import annotations

import textwrap

import pytest

from model_release.repository.lint.python_analysis import analyze

HEADER = "import asyncio\nimport triton_python_backend_utils as pb_utils\n"


def _targets(body: str) -> list[tuple[str, ...] | None]:
    result = analyze(HEADER + textwrap.dedent(body))
    assert result.syntax_error is None and result.undefined == [], result
    return [call.targets for call in result.bls_calls]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('r = pb_utils.InferenceRequest(model_name="a", requested_output_names=["y"], inputs=[])\n', [("a",)]),
        ('r = pb_utils.InferenceRequest("a", [], ["y"])\n', [("a",)]),
        ('from triton_python_backend_utils import InferenceRequest\nr = InferenceRequest(model_name="a", inputs=[], requested_output_names=[])\n', [("a",)]),
        ('NAME = "a"\nr = pb_utils.InferenceRequest(model_name=NAME, inputs=[], requested_output_names=[])\n', [("a",)]),
        ('MODELS = ("a", "b")\nrs = [pb_utils.InferenceRequest(model_name=m, inputs=[], requested_output_names=[]) for m in MODELS]\n', [("a", "b")]),
        ('def ask(model, x):\n    return pb_utils.InferenceRequest(model_name=model, inputs=x, requested_output_names=[])\n'
         'FIRST = "a"\nask(FIRST, [])\nask("b", [])\n', [("a", "b")]),
        ('NAME = "a"\nNAME = "b"\nr = pb_utils.InferenceRequest(model_name=NAME, inputs=[], requested_output_names=[])\n', [None]),
        ('def ask(request):\n    name = pb_utils.get_input_tensor_by_name(request, "M").as_numpy()[0].decode()\n'
         '    return pb_utils.InferenceRequest(model_name=name, inputs=[], requested_output_names=[])\n', [None]),
        ('def ask(model):\n    return pb_utils.InferenceRequest(model_name=model, inputs=[], requested_output_names=[])\n', [None]),
    ],
    ids=["keyword", "positional", "imported", "constant", "loop", "helper", "rebound", "from-tensor", "uncalled-helper"],
)
def test_bls_targets_are_read_where_they_can_be_known(body, expected):
    assert _targets(body) == expected


def test_requested_outputs_resolve_through_constants():
    result = analyze(HEADER + 'OUT = "y"\nr = pb_utils.InferenceRequest(model_name="a", inputs=[], requested_output_names=[OUT, "z"])\n')
    assert result.bls_calls[0].outputs == ("y", "z")


def test_await_only_counts_in_the_function_it_is_in():
    source = HEADER + textwrap.dedent('''
        class TritonPythonModel:
            def execute(self, requests):
                async def inner():
                    await asyncio.sleep(0)
                return [None for _ in requests]

            def finalize(self):
                await asyncio.sleep(0)
    ''')
    result = analyze(source)
    assert [name for name, _ in result.awaits_in_sync] == ["finalize"]
    assert result.execute_returns and result.execute_returns_value


def test_names_bound_anywhere_are_defined_and_a_star_import_turns_the_check_off():
    source = HEADER + textwrap.dedent('''
        try:
            import numpy as np
        except ImportError as missing:
            raise SystemExit(str(missing))
        def f(a, *rest, key=None, **more):
            with open(a) as handle:
                total = [x for x in rest if (y := x)]
            global COUNTER
            return np, handle, total, y, key, more, COUNTER, undefined_thing
    ''')
    assert [name for name, _ in analyze(source).undefined] == ["undefined_thing"]
    assert analyze("from os.path import *\nprint(join)\n").undefined == []


def test_a_decoupled_style_execute_returns_nothing():
    source = HEADER + textwrap.dedent('''
        class TritonPythonModel:
            def execute(self, requests):
                for request in requests:
                    request.get_response_sender().send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return None
    ''')
    result = analyze(source)
    assert result.execute_returns and result.execute_returns_value is None and result.bls_calls == []


@pytest.mark.parametrize("source, keyword", [
    ("return 1\n", "return"),
    ("class TritonPythonModel:\n    yield 1\n", "yield"),
    ("import asyncio\nawait asyncio.sleep(0)\n", "await"),
])
def test_what_only_a_function_may_hold_is_a_syntax_error(source, keyword):
    # the parser accepts these, the compiler (and so Triton's import of model.py) does not
    assert analyze(source).syntax_error == f"line {source.count(chr(10))}: '{keyword}' outside function"
