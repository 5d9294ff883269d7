"""A cascade whose members are both registered models, released twice on the real embedded stack.

MLflow on SQLite, the moto S3 server over HTTP and the real tritonserver for the canary: a new
version of the small model alone is released, the large one is reused from the export cache (its
lineage unchanged in the manifest) and the canary judges the cascade against the first release as
its champion; then a member whose export breaks parity blocks the release, naming the member.
"""

from __future__ import annotations

import json
import logging

import pytest

from model_release.local.demo import train_iris
from model_release.errors import ParityError
from model_release.pipeline import Services, release
from model_release.spec import load_spec
from model_release.store import open_store
from model_release.types import ExportResult
from model_release.workspace import Workspace, new_release_id

from .conftest import NOT_ABOUT_LATENCY, SPEC, StoreView

pytestmark = [pytest.mark.integration]

PREFIX = "pipeline-members"
SMALL, LARGE = "casc-small", "casc-large"
LINEAGE = ("member", "kind", "name", "version", "run_id", "alias", "source", "content_digest", "onnx_sha256")


def _spec(**large_tolerances):
    cascade = {"small": "release", "large": f"models:/{LARGE}@candidate", "threshold": 0.9}
    if large_tolerances:
        cascade["tolerances"] = {"large": large_tolerances}
    # no golden.target: without repository.labels a cascade's classes are the class indices, which iris.yaml's
    # species names are not, so the quality gates are skipped and parity and the champion judge it
    # (tests/registry/test_claimed_release.py judges a cascade with labels on the species names)
    return load_spec(SPEC, overrides={"model.name": SMALL, "promote.store": f"s3://model-store/{PREFIX}",
                                      "golden.target": None, "repository.shape": "cascade", "repository.cascade": cascade,
                                      **NOT_ABOUT_LATENCY})


def _services(stack) -> Services:
    return Services(tracking_uri=stack.tracking_uri, open_store=lambda uri: open_store(uri, s3_client=stack.s3_client()))


def _manifest(ws: Workspace) -> dict:
    return json.loads((ws.path / "repository" / "release.json").read_text())


@pytest.fixture(scope="module")
def registered(stack) -> None:
    # the same training for both (the canary compares the served cascade with its members' native models
    # composed as the router composes them; members trained apart: tests/registry/test_claimed_release.py)
    assert train_iris(stack.tracking_uri, model_name=SMALL, c=1.0) == "1"
    assert train_iris(stack.tracking_uri, model_name=LARGE, c=1.0) == "1"


def test_a_new_small_member_is_released_and_the_unchanged_large_one_is_reused(stack, registered, tmp_path, caplog) -> None:
    first = Workspace(new_release_id("iris"), tmp_path)
    release(_spec(), first, _services(stack))
    one = _manifest(first)["members"]
    assert one["small"]["kind"] == "release" and one["small"]["name"] == SMALL and one["small"]["version"] == "1"
    assert {k: one["large"][k] for k in ("kind", "name", "version", "alias")} == {
        "kind": "registered", "name": LARGE, "version": "1", "alias": "candidate"}
    assert one["large"]["run_id"] and one["large"]["content_digest"] and one["large"]["cached"] is False

    assert train_iris(stack.tracking_uri, model_name=SMALL, c=1.0) == "2"  # the small one alone moves
    second = Workspace(new_release_id("iris"), tmp_path)  # the same root: the export cache is shared
    with caplog.at_level(logging.INFO):
        outcome = release(_spec(), second, _services(stack))
    exported = second.load_result("export", ExportResult)
    assert exported.members["large"]["cached"] is True and exported.cached is False
    assert "member 'large' v1 reused from the export cache" in caplog.text
    two = _manifest(second)["members"]
    assert {k: two["large"][k] for k in LINEAGE} == {k: one["large"][k] for k in LINEAGE}, "the large member's lineage moved"
    assert two["small"]["version"] == "2"
    assert outcome.canary is not None and outcome.canary.champion_release == first.release_id
    report = json.loads((second.path / "canary" / "report.json").read_text())
    assert report["champion"]["changed_members"] == ["small"]
    assert report["model"]["members"] == {"small": f"{SMALL} v2", "large": f"{LARGE} v1"}
    assert StoreView(stack, PREFIX).json("channels/production.json")["release_id"] == second.release_id


def test_a_member_whose_export_breaks_parity_blocks_the_release_naming_the_member(stack, registered, tmp_path) -> None:
    # sklearn computes in float64, the ONNX model in float32: the large member's zero tolerance catches it
    ws = Workspace(new_release_id("iris"), tmp_path)
    with pytest.raises(ParityError) as err:
        release(_spec(default={"atol": 0.0, "rtol": 0.0}, probabilities={"atol": 0.0, "rtol": 0.0}), ws, _services(stack))
    message = str(err.value)
    assert message.startswith(f'export: member "large" (models:/{LARGE}@candidate v1) output "probabilities" differs'), message
    assert 'output "probabilities" differs' in message and "atol 0" in message
    assert "repository.cascade.tolerances.large.probabilities" in message
    assert (ws.path / "export" / "members" / "large" / "failing_rows.npz").is_file()
