"""The release workspace: results written whole or not at all, ids that cannot escape the root."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timezone

import pytest

from model_release.errors import SpecError
from model_release.types import IntakeResult, TensorSpec
from model_release.workspace import Workspace, atomic_write_bytes, new_release_id, sha256_file


def test_release_ids_sort_by_time_and_are_unique() -> None:
    early = new_release_id("iris", now=datetime(2026, 1, 1, tzinfo=timezone.utc))
    late = new_release_id("iris", now=datetime(2026, 1, 2, tzinfo=timezone.utc))
    assert re.fullmatch(r"iris-20260101T000000Z-[0-9a-f]{4}", early)
    assert early < late
    assert len({new_release_id("iris") for _ in range(50)}) > 1


@pytest.mark.parametrize("bad", ["../x", "a/b", "", ".hidden", "x" * 200, "r1\n"])
def test_release_ids_cannot_escape_the_root(tmp_path, bad) -> None:
    with pytest.raises(SpecError, match="release id"):
        Workspace(bad, tmp_path)


def test_results_round_trip_and_retries_replace_whole_stage(tmp_path) -> None:
    ws = Workspace("r1", tmp_path)
    spec = TensorSpec("input_0", "FP32", (4,), "x")
    result = IntakeResult("m", "3", "candidate", "run", "src", "sklearn", "/d", [spec], [spec], "abc", classes=[0, 1])
    ws.stage_dir("intake")
    ws.save_result("intake", result)
    loaded = ws.load_result("intake", IntakeResult)
    assert loaded == result and loaded.inputs[0].dims == (4,)
    assert json.loads(ws.result_path("intake").read_text())["version"] == "3"
    (ws.stage_dir("intake") / "leftover").write_text("x")
    fresh = ws.stage_dir("intake", fresh=True)
    assert list(fresh.iterdir()) == []
    assert ws.load_result("intake", IntakeResult) is None


def test_atomic_write_leaves_old_content_on_failure(tmp_path) -> None:
    target = tmp_path / "f.json"
    atomic_write_bytes(target, b"old")

    with pytest.raises(TypeError):
        atomic_write_bytes(target, object())  # type: ignore[arg-type]
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"], "no temporary file left behind"
    assert sha256_file(target, chunk=2) == hashlib.sha256(b"old").hexdigest()


def test_a_release_id_is_claimed_once_and_its_owner_may_return(tmp_path) -> None:
    from model_release.errors import UserError

    ws = Workspace("iris-1", tmp_path / "root")
    ws.check_unused()
    assert not (tmp_path / "root").exists()  # checking writes nothing
    ws.claim("airflow run manual__1")
    assert ws.owner() == "airflow run manual__1"
    (ws.stage_dir("intake") / "intake.json").write_text("{}")
    ws.check_unused("airflow run manual__1")  # a retry of the same run: its own workspace
    ws.claim("airflow run manual__1")
    for other in (None, "airflow run manual__2"):
        with pytest.raises(UserError, match=r"release id 'iris-1' is taken: its workspace .* already holds a release \(intake\)"):
            ws.check_unused(other)
    empty = Workspace("iris-2", tmp_path / "root")
    empty.path.mkdir()
    empty.check_unused()  # an empty folder holds no release
    empty.claim()
    assert empty.owner().startswith("pid ")


def test_a_workspace_root_that_cannot_be_a_folder_is_refused_before_anything_is_written(tmp_path) -> None:
    from model_release.errors import UserError

    (tmp_path / "file").write_text("x")
    for root, why in ((tmp_path / "file" / "ws", f"{tmp_path / 'file'} exists and is not a folder"),
                      (tmp_path / "file", "it exists and is not a folder"),
                      ("/dev/null/ws", "/dev/null exists and is not a folder")):
        with pytest.raises(UserError, match="cannot be a folder") as err:
            Workspace("r1", root).check_unused()
        assert why in str(err.value) and "pass --workspace a writable folder" in str(err.value)
    with pytest.raises(UserError, match="is not a folder name"):
        Workspace("r1", "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
