"""The linter agrees with the real Triton: the example repository loads and answers, and on every
case of the agreement corpus (:mod:`.agreement_cases`) the linter says what Triton does: refuse
the model, or load it."""

from __future__ import annotations

import os

import numpy as np
import pytest

from model_release.repository.lint import lint_repository

from .agreement import Judgement, judge_all, summary, table
from .agreement_cases import CASES, LOADS, QUICK, REFUSED
from .lint_repos import write_valid_repository

pytestmark = pytest.mark.integration

SELECTED = CASES if os.environ.get("MODEL_RELEASE_AGREEMENT") == "full" else [c for c in CASES if c.id in QUICK]


def test_the_example_repository_loads_and_answers(triton, onnx_models, tmp_path):
    import tritonclient.http as httpclient

    repo = write_valid_repository(tmp_path / "models", onnx_models["lr"])
    report = lint_repository(repo)
    assert report.ok and not report.warnings
    triton.install(repo)
    for name in report.load_order:
        triton.client.load_model(name)
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.ones((2, 4), np.float32)
    for model in ("bls_sync", "bls_async"):
        inputs = [httpclient.InferInput(n, [2, 4], "FP32") for n in ("INPUT0", "INPUT1")]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(b)
        result = triton.client.infer(model, inputs)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    raw = httpclient.InferInput("RAW", [2, 4], "FP32")
    raw.set_data_from_numpy(a)
    result = triton.client.infer("pipeline", [raw])
    assert result.as_numpy("probabilities").shape == (2, 3) and result.as_numpy("label").shape == (2, 1)


@pytest.fixture(scope="module")
def judgements(onnx_models, tmp_path_factory) -> dict[str, Judgement]:
    """The selected corpus cases judged by one real Triton and by the linter (once per module)."""
    results = judge_all(tmp_path_factory.mktemp("agreement"), onnx_models["lr"], SELECTED)
    print("\n" + table(results) + "\n" + summary(results))
    return {r.case.id: r for r in results}


@pytest.mark.slow
@pytest.mark.parametrize("case", SELECTED, ids=lambda c: c.id)
def test_lint_agrees_with_triton(case, judgements):
    judged = judgements[case.id]
    expected = "loads" if case in LOADS else "refuses" if case in REFUSED else None
    if expected is not None:  # the corpus says what Triton does; check that it still does
        assert judged.triton == expected, judged
        assert judged.lint == expected, judged
    else:
        assert judged.lint == "undecided", judged
