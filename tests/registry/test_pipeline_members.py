"""A pipeline of registered models without services: the spec, the member stages' seams, the manifest and the ledger.

The release of a cascade of registered models on the real stack is tests/e2e/test_pipeline_members.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from model_release.errors import ParityError, SpecError
from model_release.intake.members import Lineage, manifest_members, pipeline_identity
from model_release.repository.manifest import build_manifest
from model_release.spec import load_spec, parse_spec
from model_release.store import ledger, open_store
from model_release.store.keys import MANIFEST, release_prefix
from model_release.types import ExportResult, IntakeResult, TensorSpec
from model_release.workspace import Workspace

BASE = {"name": "iris", "model": {"name": "iris-small", "alias": "candidate"}}
CASCADE = {"shape": "cascade", "cascade": {"small": "release", "large": "models:/iris-large@candidate", "threshold": 0.9,
                                           "tolerances": {"large": {"default": {"atol": 1e-3, "rtol": 1e-3}}}}}
RUN = {"dag_id": "model_release__iris", "run_id": "scheduled__1"}


def test_a_registered_member_and_its_own_tolerances_are_accepted() -> None:
    spec = parse_spec({**BASE, "repository": CASCADE})
    assert spec.repository.cascade.large == "models:/iris-large@candidate"
    assert spec.repository.cascade.tolerances["large"].default.atol == 1e-3
    fanout = parse_spec({**BASE, "repository": {"shape": "fanout", "fanout": {
        "members": {"a": "release", "b": "models:/iris-b/4", "c": "c.onnx"}}}})
    assert fanout.repository.fanout.members["b"] == "models:/iris-b/4"


@pytest.mark.parametrize("block, field, bad", [
    ({**CASCADE, "cascade": {**CASCADE["cascade"], "large": "models:/iris-large@"}}, "repository.cascade.large", "models:/iris-large@"),
    ({**CASCADE, "cascade": {**CASCADE["cascade"], "large": "models:/iris-large/v3"}}, "repository.cascade.large", "models:/iris-large/v3"),
    ({"shape": "fanout", "fanout": {"members": {"a": "release", "b": "models:/iris-b/0"}}}, "repository.fanout.members", "models:/iris-b/0"),
    # tolerances only for a registered member: the release's own model uses export.tolerances
    ({**CASCADE, "cascade": {**CASCADE["cascade"], "tolerances": {"small": {}}}}, "repository.cascade", "tolerances.small"),
])
def test_a_bad_member_reference_is_refused_at_load_naming_the_field(tmp_path, block, field, bad) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({**BASE, "repository": block}))
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    message = str(caught.value)
    assert f"{field}:" in message and bad in message, message


def _intake(**kw) -> IntakeResult:
    fields = dict(model_name="iris-small", version="5", alias="candidate", run_id="run-s", source="s3://a/s", flavor="sklearn",
                  model_dir="/nowhere", inputs=[TensorSpec("input", "FP32", (4,))], outputs=[], content_digest="d-small")
    return IntakeResult(**{**fields, **kw})


def _export(onnx_sha: str = "sha-small", **kw) -> ExportResult:
    return ExportResult(onnx_path="/nowhere/model.onnx", onnx_sha256=onnx_sha, opset=17, inputs=[], outputs=[], parity={},
                        golden_path="", golden_rows=150, **kw)


def _pipeline_intake(large_version: str = "3") -> IntakeResult:
    large = _intake(model_name="iris-large", version=large_version, run_id="run-l", content_digest="d-large")
    return _intake(members={
        "small": {"lineage": {**Lineage("small", "release", "iris-small", "5", "run-s", "candidate", "s3://a/s").to_dict(),
                              "content_digest": "d-small"}, "intake": None},
        "large": {"lineage": {**Lineage("large", "registered", "iris-large", large_version, "run-l", "candidate", "s3://a/l").to_dict(),
                              "content_digest": "d-large"}, "intake": large.to_dict()},
    })


def test_the_manifest_records_every_members_lineage(tmp_path) -> None:
    intake = _pipeline_intake()
    export = _export(members={"large": {**_export("sha-large").to_dict(), "cached": True}})
    (tmp_path / "rel").mkdir()
    manifest = build_manifest(release_id="r", spec=parse_spec({**BASE, "repository": CASCADE}), intake=intake, export=export,
                              tensorrt=None, entry_model="iris", load_order=[], models={}, release_dir=tmp_path / "rel")
    assert manifest["members"] == {
        "small": {"member": "small", "kind": "release", "name": "iris-small", "version": "5", "run_id": "run-s",
                  "alias": "candidate", "source": "s3://a/s", "content_digest": "d-small", "onnx_sha256": "sha-small", "cached": False},
        "large": {"member": "large", "kind": "registered", "name": "iris-large", "version": "3", "run_id": "run-l",
                  "alias": "candidate", "source": "s3://a/l", "content_digest": "d-large", "onnx_sha256": "sha-large", "cached": True},
    }
    unregistered = {"lineage": {**Lineage("large", "unregistered", source="big.onnx").to_dict(), "file_sha256": "f" * 64}}
    section = manifest_members(_intake(members={"large": unregistered}), _export())
    assert section["large"]["kind"] == "unregistered" and section["large"]["file_sha256"] == "f" * 64
    # a shape without members writes no section at all
    plain = build_manifest(release_id="r", spec=parse_spec(BASE), intake=_intake(), export=_export(), tensorrt=None,
                           entry_model="iris", load_order=[], models={}, release_dir=tmp_path / "rel")
    assert "members" not in plain


def _serve(store, channel: str, release_id: str, manifest: dict) -> None:
    """What promotion leaves that the ledger reads: the release's manifest and the channel's pointer."""
    import json

    from model_release.store.pointer import move_channel

    store.backend.put_bytes(release_prefix(release_id) + MANIFEST, json.dumps(manifest).encode())
    move_channel(store, channel, release_id)


def test_a_pipeline_is_known_by_every_members_version(tmp_path) -> None:
    store = open_store((tmp_path / "store").as_uri())
    manifest = {"model": {"name": "iris-small", "version": "5"},
                "members": manifest_members(_pipeline_intake("3"), _export(members={"large": _export("sha-large").to_dict()}))}
    serving = ledger.manifest_version(manifest)
    identity = pipeline_identity({"small": Lineage("small", "release", "iris-small", "5"),
                                  "large": Lineage("large", "registered", "iris-large", "3")})
    assert identity == "large=iris-large/3,small=iris-small/5"
    assert serving == ledger.pipeline_version("5", identity) and serving.startswith("5+") and len(serving) == 14
    assert ledger.manifest_version({"model": {"name": "iris", "version": 7}}) == "7"  # not a pipeline: the version itself
    _serve(store, "production", "iris-1", manifest)
    # nothing moved: nothing new
    new, why = ledger.is_new(store, "production", "iris-small", serving)
    assert not new and "already serves" in why
    # only the large member's alias moved: new, though the release's own model is the same version
    moved = ledger.pipeline_version("5", identity.replace("iris-large/3", "iris-large/4"))
    assert moved != serving and ledger.is_new(store, "production", "iris-small", moved)[0]
    # that combination rejected: the schedule does not claim it again, a new large version is new again
    assert ledger.claim(store, "production", "iris-small", moved, release_id="iris-2", run=RUN).go
    ledger.settle(store, "production", "iris-small", moved, release_id="iris-2", run=RUN, state=ledger.REJECTED,
                  reason="canary: accuracy dropped")
    new, why = ledger.is_new(store, "production", "iris-small", moved)
    assert not new and " rejected " in why
    assert not ledger.claim(store, "production", "iris-small", moved, release_id="iris-3", run=RUN).go
    again = ledger.pipeline_version("5", identity.replace("iris-large/3", "iris-large/5"))
    assert ledger.is_new(store, "production", "iris-small", again)[0]


def test_a_member_whose_export_fails_parity_is_named_with_its_own_tolerances(tmp_path, monkeypatch) -> None:
    from model_release.export import members as member_export

    spec = parse_spec({**BASE, "repository": CASCADE})
    seen = {}

    def fake_export(member_spec, member_intake, ws):
        seen.update(tolerance=member_spec.export.tolerances.default.atol, model=member_spec.model.uri,
                    folder=ws.stage_dir("export"))
        raise ParityError('output "probabilities" differs from the sklearn model on 3 of 150 rows; loosen '
                          "export.tolerances.probabilities.atol in the spec only if that difference is acceptable")

    monkeypatch.setattr(member_export, "export", fake_export)
    ws = Workspace("r", tmp_path)
    with pytest.raises(ParityError) as caught:
        member_export.export_members(spec, ws, _pipeline_intake("3"))
    assert str(caught.value).startswith('member "large" (models:/iris-large@candidate v3) output "probabilities" differs')
    assert "loosen repository.cascade.tolerances.large.probabilities.atol" in str(caught.value)
    assert seen == {"tolerance": 1e-3, "model": "models:/iris-large@candidate", "folder": ws.path / "export" / "members" / "large"}
    assert Path(seen["folder"]).is_dir()
