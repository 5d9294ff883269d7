"""Two workers with no path in common hand a release's stages to each other through a workspace store.

The store here is a local-folder store (``file:///``), which goes through the same backend
protocol as S3; tests/workspace/test_s3_mirror.py runs the same hand-over over HTTP on the moto server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model_release.errors import StoreError
from model_release.pipeline import run_stage
from model_release.types import ExportResult, TensorSpec
from model_release.workspace import Workspace
from model_release.workspace_mirror import INDEX, StoreMirror


def _export_on(ws: Workspace) -> ExportResult:
    """What an export stage leaves: files in its folder, and a result naming them by absolute path."""
    out = ws.stage_dir("export", fresh=True)
    (out / "model.onnx").write_bytes(b"onnx bytes")
    (out / "golden.npz").write_bytes(b"golden bytes")
    (out / "sub").mkdir()
    (out / "sub" / "rows.csv").write_text("1,2\n")
    spec = TensorSpec("x", "FP32", (4,))
    return ExportResult(str(out / "model.onnx"), "0" * 64, 17, [spec], [spec], {}, str(out / "golden.npz"), 3,
                        reproduce=f"python -m export {out / 'model.onnx'}")


@pytest.fixture
def workers(tmp_path):
    store = StoreMirror.open((tmp_path / "store").as_uri())
    a = Workspace("iris-1", tmp_path / "worker-a", mirror=store)
    b = Workspace("iris-1", tmp_path / "worker-b", mirror=StoreMirror.open((tmp_path / "store").as_uri()))
    return a, b, tmp_path / "store"


def test_a_result_saved_on_one_worker_loads_on_another_with_its_own_paths(workers) -> None:
    a, b, store = workers
    run_stage(a, "export", _export_on, a)
    assert not b.path.exists()
    loaded = b.load_result("export", ExportResult)
    assert loaded is not None
    assert loaded.onnx_path == str(b.path / "export" / "model.onnx")
    assert Path(loaded.onnx_path).read_bytes() == b"onnx bytes"
    assert (b.path / "export" / "sub" / "rows.csv").read_text() == "1,2\n"
    saved = json.loads((store / "iris-1" / "export" / "export.json").read_text())
    assert saved["onnx_path"] == "@workspace/export/model.onnx", "results are saved relative to the release folder"
    assert str(a.root) in loaded.reproduce, "free text is not rewritten: only whole paths under the release folder"


def test_a_stage_published_half_is_not_there(workers) -> None:
    a, b, store = workers
    run_stage(a, "export", _export_on, a)
    (store / "iris-1" / "export" / INDEX).unlink()  # what a worker killed while publishing leaves
    assert b.load_result("export", ExportResult) is None


def test_a_rerun_replaces_the_stage_whole_and_a_stale_copy_is_refreshed(workers) -> None:
    a, b, _ = workers
    run_stage(a, "export", _export_on, a)
    assert b.load_result("export", ExportResult) is not None

    def second(ws: Workspace) -> ExportResult:
        result = _export_on(ws)
        (ws.path / "export" / "model.onnx").write_bytes(b"new onnx")
        (ws.path / "export" / "sub" / "rows.csv").unlink()
        return result

    run_stage(a, "export", second, a)
    again = b.load_result("export", ExportResult)
    assert Path(again.onnx_path).read_bytes() == b"new onnx"
    assert not (b.path / "export" / "sub" / "rows.csv").exists(), "files the stage no longer has are gone"


def test_a_file_changed_in_the_store_is_refused_by_name(workers) -> None:
    a, b, store = workers
    run_stage(a, "export", _export_on, a)
    (store / "iris-1" / "export" / "model.onnx").write_bytes(b"tampered")
    with pytest.raises(StoreError, match=r"export/model.onnx is not the one published"):
        b.load_result("export", ExportResult)


def test_a_failed_stage_leaves_its_error_for_the_next_task(workers) -> None:
    from model_release.errors import ParityError

    a, b, _ = workers

    def refuse() -> ExportResult:
        raise ParityError('output "probabilities" differs')

    with pytest.raises(ParityError):
        run_stage(a, "export", refuse)
    error = b.load_error("export")
    assert error == {"stage": "export", "kind": "parity", "class": "ParityError", "user": True, "gate": True,
                     "inconclusive": False, "message": 'output "probabilities" differs'}
    assert b.load_result("export", ExportResult) is None


def test_without_a_store_the_same_calls_use_the_local_folder(tmp_path) -> None:
    ws = Workspace("iris-1", tmp_path)
    run_stage(ws, "export", _export_on, ws)
    assert ws.load_result("export", ExportResult).onnx_path == str(tmp_path / "iris-1" / "export" / "model.onnx")


def test_a_claim_in_the_store_is_found_by_the_run_on_any_worker_and_refuses_another_run(workers) -> None:
    """The start task's preflight refuses a release id already taken, but the run that claimed it
    (its retry, on a worker with no copy of the folder) finds the workspace its own."""
    from model_release.errors import UserError

    a, b, store = workers
    a.check_unused("airflow run manual__1")
    a.claim("airflow run manual__1")
    assert (store / "iris-1" / ".owner").read_text() == "airflow run manual__1"
    run_stage(a, "export", _export_on, a)
    assert not b.path.exists()
    b.check_unused("airflow run manual__1")  # the run's retry on the other worker
    b.claim("airflow run manual__1")
    assert b.owner() == "airflow run manual__1"
    for other in (None, "airflow run manual__2"):
        with pytest.raises(UserError, match=r"release id 'iris-1' is taken: the workspace store .* already holds a release \(export\)"):
            b.check_unused(other)
        with pytest.raises(UserError, match="claimed it in the workspace store meanwhile|is taken"):
            b.claim(other)
    assert b.load_result("export", ExportResult) is not None, "a refused claim changed nothing"
    assert (store / "iris-1" / ".owner").read_text() == "airflow run manual__1"


def test_a_claim_alone_takes_the_release_id_in_the_store(workers) -> None:
    from model_release.errors import UserError

    a, b, _ = workers
    a.claim("airflow run manual__1")
    with pytest.raises(UserError, match=r"is taken: the workspace store .* \(claimed by 'airflow run manual__1'\)"):
        b.check_unused("airflow run manual__2")
