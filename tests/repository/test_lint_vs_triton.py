"""The linter agrees with the real Triton: the example repository loads and answers, and what the
linter calls an error, Triton refuses to load."""

from __future__ import annotations

import numpy as np
import pytest

from model_release.errors import CanaryRejected
from model_release.repository.lint import lint_repository

from .lint_repos import write_valid_repository
from .test_lint_rules import CASES, edit
from .triton_support import LocalTriton

pytestmark = pytest.mark.integration

REFUSED_BY_TRITON = [
    "name-mismatch", "scheduling-not-ensemble", "preferred-batch-size", "reshape-mismatch", "dims-invalid",
    "version-none", "python-syntax", "ensemble-instance-group", "ensemble-input-unused", "ensemble-tensor-unused",
    "ensemble-tensor-double", "ensemble-dtype-mismatch",
]


@pytest.fixture
def fresh_triton(tmp_path):
    """A server of its own: a failed load must not leave state behind for the next case."""
    import tritonclient.http as httpclient

    server = LocalTriton(tmp_path / "triton")
    server.client = httpclient.InferenceServerClient(server.url, network_timeout=60.0)
    try:
        yield server
    finally:
        server.client.close()
        server.stop()


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


@pytest.mark.parametrize("rule", REFUSED_BY_TRITON)
def test_what_lint_calls_an_error_triton_refuses(rule, fresh_triton, onnx_models, tmp_path):
    from tritonclient.utils import InferenceServerException

    repo = write_valid_repository(tmp_path / "models", onnx_models["lr"])
    model, mutate = CASES[rule]
    mutate(repo)
    errors = [f for f in lint_repository(repo).errors if f.rule == rule and f.model == model]
    assert errors
    try:
        fresh_triton.install(repo)
    except CanaryRejected as exc:
        # the canary's copy of the onnxruntime backend's load-time checks refused the ONNX leaf
        # before the (python-backend-only) server could: refused all the same, and by name
        assert f'model "{model}"' in str(exc)
        return
    with pytest.raises(InferenceServerException):
        fresh_triton.client.load_model(model)
    assert not fresh_triton.client.is_model_ready(model)


ACCEPTED_BY_TRITON = {
    "platform-conflict": ("add_sub", lambda r: edit(r, "add_sub", lambda c: setattr(c, "platform", "onnxruntime_onnx"))),
    **{rule: CASES[rule] for rule in
       ("config-autocomplete", "version-policy-missing", "version-leading-zero", "version-stray", "tensor-duplicate")},
}


@pytest.mark.parametrize("rule", sorted(ACCEPTED_BY_TRITON))
def test_what_lint_only_warns_about_triton_loads(rule, fresh_triton, onnx_models, tmp_path):
    repo = write_valid_repository(tmp_path / "models", onnx_models["lr"])
    model, mutate = ACCEPTED_BY_TRITON[rule]
    mutate(repo)
    report = lint_repository(repo)
    assert [f.severity for f in report.findings if f.rule == rule and f.model == model] == ["warning"]
    assert not [f for f in report.errors if f.model == model]
    fresh_triton.install(repo)
    fresh_triton.client.load_model(model)
    assert fresh_triton.client.is_model_ready(model)
