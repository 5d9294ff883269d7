"""A release its replay has already blocked is not measured under load (``canary.load.when_blocked``).

On a real tritonserver: a postprocess that flips labels fails the label parity gate on the replay, so
tuning and the load phase do not run and their gates say why; with ``measure`` they run anyway; a
faithful candidate is measured under load as before. The choice itself (which gates block) is checked
on gates alone.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from model_release.canary import run_canary
from model_release.canary.judge.gates import Gate, skipped
from model_release.canary.judge.judging import LOAD_GATES
from model_release.canary.serve import SKIPPED_BLOCKED
from model_release.errors import CanaryRejected

from .support import make_release

#: tuning on (two short trials) so that a skip is seen in both the tuning and the load phase sections
TUNED = {"batch_rows": 16, "concurrency": 2, "tune": {"enabled": True, "trial_s": 0.3, "budget_s": 10, "instances": [1, 2],
                                                       "dynamic_batching": [True], "max_queue_delay_us": [100]}}


def _report(release) -> dict:  # noqa: ANN001
    return json.loads((release.workspace.stage_dir("canary") / "report.json").read_text())


def _run(tmp_path, iris, repo, served, name: str, **load) -> tuple:  # noqa: ANN001
    onnx_path, golden, reference = iris
    release = make_release(tmp_path, repo, onnx_path, golden, reference, name=name, canary=TUNED)
    if load:  # specs are frozen: the release's spec, with canary.load changed
        canary = release.spec.canary.model_copy(update={"load": release.spec.canary.load.model_copy(update=load)})
        release = dataclasses.replace(release, spec=release.spec.model_copy(update={"canary": canary}))
    try:
        run_canary(release.spec, release.intake, release.export, release.assembled, release.workspace,
                   endpoint=served.http_url)
    except CanaryRejected as exc:
        return release, exc
    return release, None


@pytest.mark.integration  # a real tritonserver (the served fixture)
def test_a_release_its_replay_blocked_is_not_tuned_or_measured_under_load_and_its_gates_say_why(
        tmp_path, iris, iris_repository, served) -> None:
    release, rejected = _run(tmp_path, iris, iris_repository, served, "iris_flip")
    assert rejected is not None and 'output "label"' in str(rejected)
    report = _report(release)
    why = report["load_phase"]["skipped"]
    assert why.startswith("not measured: the replay already blocked the release (parity.label)") and "when_blocked: skip" in why
    assert report["tuning"] == {"skipped": why}, "tuning did not run either"
    gates = {g["name"]: g for g in report["gates"]}
    for name, setting in LOAD_GATES:  # one short line each in the decision's gate table
        assert gates[name]["skipped"] == SKIPPED_BLOCKED and gates[name]["passed"] is None and gates[name]["setting"] == setting
    assert gates["parity.label"]["passed"] is False
    # the latency plot falls back to the replay's own request times, and the page says why there is no load phase
    assert report["plots"]["latency"]["source"] == "replay"
    html = (release.workspace.stage_dir("canary") / "report.html").read_text()
    assert "Load phase not measured: the replay already blocked the release" in html


@pytest.mark.integration  # a real tritonserver (the served fixture)
def test_with_measure_a_blocked_release_is_still_tuned_and_measured_under_load(tmp_path, iris, iris_repository, served) -> None:
    release, rejected = _run(tmp_path, iris, iris_repository, served, "iris_flip", when_blocked="measure")
    assert rejected is not None
    report = _report(release)
    assert report["load_phase"]["candidate"]["requests"] > 0 and "skipped" not in report["load_phase"]
    assert report["tuning"]["trials"], report["tuning"]
    assert {g["name"]: g for g in report["gates"]}["load.errors"]["passed"] is True


@pytest.mark.integration  # a real tritonserver (the served fixture)
def test_a_release_its_replay_passes_is_measured_under_load(tmp_path, iris, iris_repository, served) -> None:
    release, rejected = _run(tmp_path, iris, iris_repository, served, "iris")
    assert rejected is None
    report = _report(release)
    # the replay's gates, judged once before the load phase, are in the report with the load phase's
    gates = {g["name"]: g for g in report["gates"]}
    assert gates["parity.label"]["passed"] is True and gates["load.errors"]["passed"] is True
    assert report["parity"]["label"]["agreement"] == 1.0
    assert report["load_phase"]["candidate"]["requests"] > 0 and report["tuning"]["trials"]
    assert all(g["skipped"] is None or "not measured" not in g["skipped"] for g in report["gates"])


def test_only_a_decided_failure_blocks_before_the_load_phase(monkeypatch) -> None:
    from model_release.canary.judge import judging

    gates = [Gate("quality.accuracy", None, "canary.quality.accuracy", message="straddles its limit"),  # inconclusive
             skipped("flips.negative", "canary.champion.max_negative_flips", "no champion"),
             Gate("parity.label", True, "canary.min_label_agreement")]
    monkeypatch.setattr(judging, "_replay_gates", lambda *args: (gates, ""))
    monkeypatch.setattr(judging.cmp.Interface, "of", staticmethod(lambda assembled: None))
    assert judging.blocked_on_replay(None, None, None, None, None) == []  # type: ignore[arg-type]
    gates.append(Gate("classes", False, "canary.classes", message="precision of class 'virginica' lower"))
    assert judging.blocked_on_replay(None, None, None, None, None) == ["classes"]  # type: ignore[arg-type]


def test_the_replays_gates_are_judged_once_when_the_canary_asked_before_its_load_phase(monkeypatch) -> None:
    from model_release.canary.judge import judging

    calls = []
    failed = Gate("parity.label", False, "canary.min_label_agreement", message="9 rows differ")
    monkeypatch.setattr(judging, "_replay_gates", lambda *args: calls.append(args) or ([failed], ""))
    monkeypatch.setattr(judging.cmp.Interface, "of", staticmethod(lambda assembled: None))
    into = judging.Judgement()
    for _ in range(2):
        assert judging.blocked_on_replay(None, None, None, None, None, into=into) == ["parity.label"]  # type: ignore[arg-type]
    assert len(calls) == 1 and into.replayed == ([failed], ""), "judge() completes this judgement without judging them again"


@pytest.mark.parametrize("with_champion", [False, True])
def test_the_skipped_load_gates_are_the_ones_the_load_phase_decides(with_champion) -> None:
    from model_release.canary.judge.gates import load_gates
    from model_release.spec import parse_spec

    spec = parse_spec({"name": "iris", "model": {"name": "iris-classifier", "alias": "candidate"},
                       "repository": {"shape": "classifier", "labels": ["a", "b", "c"]}})
    figures = {"p99_ms": 2.0, "stable": True, "errors": 0, "requests": 100, "throughput_rows_per_s": 1000.0}
    paired = {"p99_ratios": [1.0] * 4, "throughput_ratios": [1.0] * 4}
    decided = load_gates(spec, figures, dict(figures) if with_champion else None, "the champion", "no champion",
                         paired if with_champion else None)
    assert [(g.name, g.setting) for g in decided] == list(LOAD_GATES)
