"""Releases that must not ship: each stops before promotion with a message a release engineer can act on.

These run the stages in-process (``pipeline.release``) on the real embedded stack: MLflow on
SQLite, the moto S3 server over HTTP, and the real tritonserver for the canary.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from model_release.local.demo import train_iris
from model_release.errors import CanaryRejected, IntakeError, ParityError, SpecError
from model_release.pipeline import Services, release
from model_release.spec import load_spec
from model_release.types import CanaryResult
from model_release.store import open_store
from model_release.workspace import Workspace, new_release_id

from .conftest import NOT_ABOUT_LATENCY, SPEC, StoreView

pytestmark = [pytest.mark.integration]


def _spec(model: str, prefix: str, **overrides):
    return load_spec(SPEC, overrides={"model.name": model, "promote.store": f"s3://model-store/{prefix}",
                                   **NOT_ABOUT_LATENCY, **overrides})


def _services(stack) -> Services:
    return Services(tracking_uri=stack.tracking_uri, open_store=lambda uri: open_store(uri, s3_client=stack.s3_client()))


def _nothing_promoted(stack, prefix: str, *, rejected: str | None = None) -> None:
    """No pointer and no release object; a canary's rejection (``rejected`` names the release) leaves
    only its record and reports under rejected/<release>/ and the channel's history page (the audit trail)."""
    view = StoreView(stack, prefix)
    assert view.get("channels/production.json") is None
    kept = {"channels/production.html"} if rejected else set()
    ledger = [k for k in view.keys() if k.startswith("ledger/")]  # the release's claim, settled (not left claimed)
    assert all(view.json(k)["state"] != "claimed" for k in ledger), {k: view.json(k) for k in ledger}
    assert {k for k in view.keys() if not k.startswith((f"rejected/{rejected}/", "ledger/"))} == kept, view.keys()
    if rejected:
        assert {f"rejected/{rejected}/reports/report.json", f"rejected/{rejected}/rejected.json"} <= set(view.keys()), view.keys()


@pytest.fixture(scope="module")
def gated_model(stack) -> str:
    train_iris(stack.tracking_uri, model_name="iris-gates", c=1.0)
    return "iris-gates"


def test_onnx_drift_beyond_tolerance_blocks_the_release(stack, gated_model, tmp_path) -> None:
    # sklearn computes in float64, the ONNX model in float32: a zero tolerance must catch that
    spec = _spec(gated_model, "blocked-export", **{"export.tolerances": {"probabilities": {"atol": 0.0, "rtol": 0.0}}})
    with pytest.raises(ParityError) as err:
        release(spec, Workspace(new_release_id("iris"), tmp_path), _services(stack))
    message = str(err.value)
    assert message.startswith("export:")
    assert 'output "probabilities"' in message and "atol 0" in message and "max abs" in message
    _nothing_promoted(stack, "blocked-export")


def test_canary_outputs_beyond_tolerance_block_the_release(stack, gated_model, tmp_path) -> None:
    spec = _spec(gated_model, "blocked-canary", **{"canary.tolerances": {"default": {"atol": 0.0, "rtol": 0.0}}})
    ws = Workspace(new_release_id("iris"), tmp_path)
    with pytest.raises(CanaryRejected) as err:
        release(spec, ws, _services(stack))
    message = str(err.value)
    assert 'output "probabilities"' in message and "atol 0" in message
    assert (ws.path / "canary" / "report.json").is_file(), "a blocked canary still leaves its report"
    # the release records why it stopped, and the canary's (rejected) result is saved like any other
    outcome = json.loads((ws.path / "outcome.json").read_text())
    assert (outcome["error"], outcome["error_stage"], outcome["error_kind"]) == (message, "canary", "canary")
    assert outcome["canary"]["passed"] is False and outcome["promoted"] is None
    assert ws.load_result("canary", CanaryResult).passed is False
    _nothing_promoted(stack, "blocked-canary", rejected=ws.release_id)


def test_a_pointer_survives_a_blocked_release(stack, tmp_path) -> None:
    train_iris(stack.tracking_uri, model_name="iris-keep", c=1.0)
    good = Workspace(new_release_id("iris"), tmp_path)
    release(_spec("iris-keep", "keep"), good, _services(stack))
    view = StoreView(stack, "keep")
    before = view.get("channels/production.json")
    assert before is not None
    train_iris(stack.tracking_uri, model_name="iris-keep", c=0.5)
    spec = _spec("iris-keep", "keep", **{"export.tolerances": {"probabilities": {"atol": 0.0, "rtol": 0.0}}})
    with pytest.raises(ParityError):
        release(spec, Workspace(new_release_id("iris"), tmp_path), _services(stack))
    assert view.get("channels/production.json") == before


@pytest.mark.parametrize(
    ("overrides", "error", "fragments"),
    [
        ({"model.name": "no-such-model"}, IntakeError, ["no-such-model"]),
        ({"model.alias": "nope"}, IntakeError, ["nope", "candidate"]),
    ],
    ids=["unknown-model", "unknown-alias"],
)
def test_bad_model_reference_is_one_clear_line(stack, gated_model, tmp_path, overrides, error, fragments) -> None:
    spec = load_spec(SPEC, overrides={"model.name": gated_model, "promote.store": "s3://model-store/bad-ref", **overrides})
    with pytest.raises(error) as err:
        release(spec, Workspace(new_release_id("iris"), tmp_path), _services(stack))
    message = str(err.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message
    _nothing_promoted(stack, "bad-ref")


def test_model_without_signature_is_refused(stack, tmp_path) -> None:
    train_iris(stack.tracking_uri, model_name="iris-unsigned", signature=False)
    with pytest.raises(IntakeError) as err:
        release(_spec("iris-unsigned", "unsigned"), Workspace(new_release_id("iris"), tmp_path), _services(stack))
    assert "signature" in str(err.value) and "\n" not in str(err.value)
    _nothing_promoted(stack, "unsigned")


def test_malformed_spec_is_refused_by_the_cli_in_one_line(stack, tmp_path) -> None:
    bad = yaml.safe_load(SPEC.read_text())
    bad["repository"]["max_batch_size"] = -3
    bad["promote"]["store"] = "ftp://elsewhere"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    proc = subprocess.run(
        [sys.executable, "-m", "model_release.cli", "release", str(path)],
        capture_output=True, text=True, timeout=120, env={**stack.env()},
    )
    assert proc.returncode == SpecError.exit_code
    last = proc.stderr.strip().splitlines()[-1]
    assert "repository.max_batch_size" in last and "-3" in last
    assert "promote.store" in last and "ftp://elsewhere" in last and "s3://BUCKET" in last
