"""The canary stage on a real tritonserver: a passing release, blocked releases, a model that fails to load."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from model_release.canary import run_canary as canary_stage
from model_release.canary.champion import NATIVE, Champion
from model_release.canary.judge.compare import Interface
from model_release.pipeline import run_stage
from model_release.errors import CanaryRejected
from model_release.types import CanaryResult

from .support import LABELS, make_release

pytestmark = pytest.mark.integration


def run_canary(spec, intake, export, assembled, ws, **kwargs):  # noqa: ANN001, ANN003, ANN201
    """The canary stage as the pipeline runs it: through the stage runner, which saves its result."""
    return run_stage(ws, "canary", canary_stage, spec, intake, export, assembled, ws, **kwargs)


def _report(release) -> dict:  # noqa: ANN001
    return json.loads((release.workspace.stage_dir("canary") / "report.json").read_text())


def test_a_faithful_candidate_passes_on_a_local_shimmed_triton_with_its_figures_reported(tmp_path, iris, iris_repository,
                                                                                        started):
    onnx_path, golden, reference = iris
    release = make_release(tmp_path, iris_repository, onnx_path, golden, reference)
    # a native champion (MLflow alias, no release in the store) that answered differently on rows 0 and 1
    answers = {"label": reference["label"].copy(), "probabilities": reference["probabilities"] + np.float32(0.25)}
    answers["label"][[0, 1]] = 2
    champion = Champion(NATIVE, "production", name="production (version 0)", outputs=answers, model_version="0",
                        interface=Interface({"label": "label", "probabilities": "probabilities"}, None, [0, 1, 2]))

    result = run_canary(release.spec, release.intake, release.export, release.assembled, release.workspace,
                        find_champion=lambda folder: champion)

    assert result.passed
    assert len(started) == 1 and _gone(started[0])  # stopped beside the judging, joined before the stage returned
    report = _report(release)
    assert report["verdict"] == "passed" and report["reasons"] == []
    server = report["server"]
    assert server["mode"] == "local" and server["version"] == "2.51.0"
    assert server["description"] == "CPU, python-backend onnxruntime shim"
    assert server["shimmed_models"] == ["iris_onnx"]
    assert server["models_loaded"] == {"iris_onnx": ["1"], "iris_post": ["1"], "iris": ["1"]}
    # the candidate's memory, for a side-by-side roll-out: two python stubs loaded (each tens of MB resident)
    memory = result.figures["memory"]
    assert memory["footprint_bytes"] > 20 << 20 and memory["how"].startswith("resident memory of the canary Triton"), memory
    assert report["golden"]["rows"] == 150
    parity = report["parity"]
    assert parity["probabilities"]["passed"] and parity["probabilities"]["max_abs"] < 1e-5
    assert parity["label"]["agreement"] == 1.0 and parity["label"]["total_rows"] == 150
    timing = report["timing"]
    assert timing["requests"] == math.ceil(150 / 16) and timing["rows"] == 150
    assert timing["p50_ms"] <= timing["p95_ms"] <= timing["p99_ms"] and timing["throughput_rows_per_s"] > 0
    assert report["expectations"]["passed"] is True
    in_set = [r for r in report["expectations"]["results"] if r["expectation"] == "expect_column_values_to_be_in_set"]
    assert in_set and in_set[0]["kwargs"]["value_set"] == LABELS
    assert report["champion"]["name"] == "production (version 0)" and report["champion"]["kind"] == "native"
    # rows 0 and 1 differ: 148 of 150 agree, above the default canary.champion.min_agreement 0.9
    assert report["shift"]["agreement"] == pytest.approx(148 / 150)
    gates = {g["name"]: g for g in report["gates"]}
    assert gates["champion.agreement"]["passed"] is True and gates["champion.agreement"]["candidate"] == pytest.approx(148 / 150)
    assert gates["nonfinite"]["passed"] is True
    assert gates["quality"]["passed"] is None and "golden.target is not set" in gates["quality"]["skipped"]
    assert result.champion_kind == "native" and result.champion_release is None
    saved = release.workspace.load_result("canary", CanaryResult)
    assert saved == result
    html = (release.workspace.stage_dir("canary") / "report.html").read_text()
    assert "PASSED" in html and "python-backend onnxruntime shim" in html
    assert "http://" not in html.replace("http://127.0.0.1", "") and "https://" not in html and "<script" not in html


def test_a_served_output_that_differs_from_the_reference_blocks_the_release(tmp_path, iris, iris_repository, served):
    onnx_path, golden, reference = iris
    perturbed = dict(reference, probabilities=reference["probabilities"].copy())
    perturbed["probabilities"][[3, 40, 77]] += np.float32(0.02)
    release = make_release(tmp_path, iris_repository, onnx_path, golden, perturbed)

    with pytest.raises(CanaryRejected) as caught:
        run_canary(release.spec, release.intake, release.export, release.assembled, release.workspace,
                   endpoint=served.http_url)

    message = str(caught.value)
    assert 'output "probabilities"' in message
    assert "on 3 of 150 rows" in message and "max abs 0.02 > atol 1e-05" in message
    assert str(release.workspace.stage_dir("canary") / "report.json") in message
    report = _report(release)
    assert report["verdict"] == "rejected"
    assert sorted(report["parity"]["probabilities"]["worst_rows"]) == [3, 40, 77]
    assert report["parity"]["label"]["passed"] is True
    assert report["server"]["mode"] == "endpoint"
    assert release.workspace.load_result("canary", CanaryResult).passed is False
    assert "REJECTED" in (release.workspace.stage_dir("canary") / "report.html").read_text()


def test_a_postprocess_that_flips_labels_is_blocked_on_label_agreement(tmp_path, iris, iris_repository, served):
    onnx_path, golden, reference = iris
    release = make_release(tmp_path, iris_repository, onnx_path, golden, reference, name="iris_flip")

    with pytest.raises(CanaryRejected) as caught:
        run_canary(release.spec, release.intake, release.export, release.assembled, release.workspace,
                   endpoint=served.http_url)

    # the flipper changes rows 0, 5, 10, 15 of every 16-row request: 9 full requests and one of 6 rows
    flipped = 9 * 4 + 2
    message = str(caught.value)
    assert 'output "label"' in message and f"({flipped} differ; required agreement 100.0000%)" in message
    report = _report(release)
    assert report["parity"]["label"]["failing_rows"] == flipped
    assert report["parity"]["probabilities"]["passed"] is True


def test_a_model_that_fails_to_load_is_rejected_naming_it_and_tritons_error(tmp_path, iris, iris_repository, served):
    onnx_path, golden, reference = iris
    release = make_release(tmp_path, iris_repository, onnx_path, golden, reference, name="iris_broken")

    with pytest.raises(CanaryRejected) as caught:
        run_canary(release.spec, release.intake, release.export, release.assembled, release.workspace,
                   endpoint=served.http_url)

    message = str(caught.value)
    assert 'model "iris_broken_post" failed to load' in message
    assert "postprocess refuses to load: fail_on_load is set" in message
    assert message.endswith(f"The report is at {release.workspace.stage_dir('canary') / 'report.json'}.")
    report = _report(release)
    assert report["verdict"] == "rejected" and "iris_broken_post" in report["reasons"][0]
    # the endpoint is left as it was found: nothing of the candidate stays loaded
    index = {m["name"]: m.get("state") for m in served.client().get_model_repository_index()}
    assert index.get("iris_onnx") != "READY" and index.get("iris") != "READY"


@pytest.fixture
def started(monkeypatch):  # noqa: ANN201
    """Every LocalTriton started during the test, with the process it ran."""
    from model_release.triton.local import LocalTriton

    servers = []
    real = LocalTriton.start

    def start(self):  # noqa: ANN001, ANN202
        servers.append(self)
        return real(self)

    monkeypatch.setattr(LocalTriton, "start", start)
    return servers


def _gone(triton) -> bool:  # noqa: ANN001
    from model_release.local.procs import group_members

    return triton.process is not None and triton.process.returncode is not None and group_members(triton.process.pid) == []


def test_the_local_triton_is_stopped_and_reaped_before_a_rejecting_canary_returns(tmp_path, iris, iris_repository, started):
    onnx_path, golden, reference = iris
    release = make_release(tmp_path, iris_repository, onnx_path, golden, reference, name="iris_broken")

    with pytest.raises(CanaryRejected, match='model "iris_broken_post" failed to load'):
        run_canary(release.spec, release.intake, release.export, release.assembled, release.workspace)

    # its stop ran beside the report's writing, and was joined before the error went up
    assert len(started) == 1 and _gone(started[0])
    assert "Signal (15) received" in (release.workspace.stage_dir("canary") / "tritonserver.log").read_text()


def test_an_unreachable_endpoint_is_an_infrastructure_failure_not_a_verdict(tmp_path, iris, iris_repository):
    from model_release.errors import ServiceUnavailable
    from model_release.local.ports import free_port

    onnx_path, golden, reference = iris
    release = make_release(tmp_path, iris_repository, onnx_path, golden, reference,
                           canary={"ready_timeout_s": 1, "batch_rows": 16})
    endpoint = f"127.0.0.1:{free_port()}"
    with pytest.raises(ServiceUnavailable, match=f"the canary Triton at {endpoint} is not reachable or not live after 1 s"):
        run_canary(release.spec, release.intake, release.export, release.assembled, release.workspace, endpoint=endpoint)
    assert release.workspace.load_result("canary", CanaryResult) is None  # no verdict: retry once it is back
