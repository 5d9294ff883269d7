"""The stage seam: one runner saves every stage's result, tags its errors and logs its headline."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import pytest

from model_release.errors import CanaryRejected, ExportError, ModelReleaseError, ServiceUnavailable
from model_release.pipeline import ReleaseRef, run_stage
from model_release.types import CanaryResult, _Serialisable
from model_release.workspace import Workspace


@dataclass
class Made(_Serialisable):
    value: int

    def headline(self) -> str:
        return f"made {self.value}"


def test_the_runner_saves_the_result_and_logs_its_headline(tmp_path, caplog) -> None:
    ws = Workspace("r1", tmp_path)
    with caplog.at_level(logging.INFO, logger="model_release.pipeline"):
        result = run_stage(ws, "export", lambda n: Made(n), 7)
    assert result == Made(7)
    assert json.loads(ws.result_path("export").read_text()) == {"value": 7}
    assert any(r.getMessage().startswith("export: made 7 (") for r in caplog.records)


def test_assemble_results_go_to_the_repository_folder(tmp_path) -> None:
    ws = Workspace("r1", tmp_path)
    run_stage(ws, "assemble", lambda: Made(1))
    assert ws.load_result("repository", Made) == Made(1)


@pytest.mark.parametrize("error", [ExportError("no converter"), ServiceUnavailable("down")])
def test_an_error_is_tagged_with_its_stage_and_nothing_is_saved(tmp_path, error) -> None:
    ws = Workspace("r1", tmp_path)

    def stage() -> Made:
        raise error

    with pytest.raises(type(error)) as caught:
        run_stage(ws, "export", stage)
    assert caught.value.stage == "export" and str(caught.value).startswith("export: ")
    assert not ws.result_path("export").exists()


def test_a_stage_already_named_by_the_error_keeps_its_name(tmp_path) -> None:
    def stage() -> Made:
        raise ModelReleaseError("store said no", stage="promote")

    with pytest.raises(ModelReleaseError) as caught:
        run_stage(Workspace("r1", tmp_path), "canary", stage)
    assert caught.value.stage == "promote"


def test_a_gate_that_refuses_with_a_result_has_that_result_saved(tmp_path) -> None:
    ws = Workspace("r1", tmp_path)
    rejected = CanaryResult(passed=False, report_json="r.json", report_html=None, summary="canary rejected: x")

    def stage() -> CanaryResult:
        raise CanaryRejected("labels disagree", result=rejected)

    with pytest.raises(CanaryRejected):
        run_stage(ws, "canary", stage)
    assert ws.load_result("canary", CanaryResult) == rejected


def test_an_inconclusive_canary_has_its_result_saved_and_its_error_recorded_as_neither_user_nor_gate(tmp_path) -> None:
    """What finish reads to leave the version open (store.ledger.verdict_of), and what promote never sees as passed."""
    from model_release.errors import CanaryInconclusive
    from model_release.store import ledger

    ws = Workspace("r1", tmp_path)
    open_ = CanaryResult(passed=False, report_json="r.json", report_html=None, summary="canary inconclusive: x",
                         verdict="inconclusive")

    def stage() -> CanaryResult:
        raise CanaryInconclusive("p99 ratio straddles its limit", result=open_)

    with pytest.raises(CanaryInconclusive):
        run_stage(ws, "canary", stage)
    assert ws.load_result("canary", CanaryResult) == open_
    error = ws.load_error("canary")
    assert (error["kind"], error["user"], error["gate"], error["inconclusive"]) == ("canary_inconclusive", False, False, True)
    assert ledger.verdict_of({"canary": error}, False)[0] == ledger.INCONCLUSIVE


def test_a_restated_error_keeps_its_class_stage_and_attributes() -> None:
    from model_release.errors import ConflictError

    error = ConflictError("moved", winner="iris-2", stage="promote")
    restated = error.restated(f"the registry did not follow: {error.message}")
    assert type(restated) is ConflictError and restated.winner == "iris-2" and restated.stage == "promote"
    assert str(restated) == "promote: the registry did not follow: moved" and str(error) == "promote: moved"


def test_the_release_reference_is_typed_and_never_changed_in_place() -> None:
    ref = ReleaseRef(release_id="iris-1", workspace_root="/w", spec_path="/s.yaml", overrides={"model.version": 3})
    data = ref.to_dict()
    assert json.loads(json.dumps(data)) == data  # XCom carries plain JSON
    later = ReleaseRef.from_dict(data).after("intake", {"model": "models:/iris/3"})
    assert later.stages == {"intake": {"model": "models:/iris/3"}} and ref.stages == {}
    assert ReleaseRef.from_dict(later.to_dict()) == later
    assert later.workspace().path == Workspace("iris-1", "/w").path
