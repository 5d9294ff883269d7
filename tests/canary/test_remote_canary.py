"""The remote canary: a Triton started on its own, with an empty model repository in the object store.

The server here is the real tritonserver 2.51 reading ``s3://127.0.0.1:PORT/canary/triton`` on the
moto server; the canary task reaches it only over HTTP (Triton's API and S3), as a worker on
another host would. It shares no folder with the test.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from model_release.canary import run_canary as canary_stage
from model_release.canary.champion import CHAMPION_SUFFIX, SERVED, Champion, rename_repository
from model_release.canary.judge.compare import Interface
from model_release.canary.judge.contract import contract_of
from model_release.triton.delivery import Delivery, RemoteCanary, check_plans, staged_closure
from model_release.errors import GpuUnavailable, InfraError, SpecError
from model_release.local.moto_process import _MOTO_KEY_ID, _MOTO_SECRET, MotoServer, ensure_bucket
from model_release.triton.local import NO_AUTO_COMPLETE, LocalTriton
from model_release.pipeline import run_stage
from model_release.store import open_store

from .support import LABELS, LEAF, make_release

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def canary_host(tmp_path_factory):
    """moto (the object store) and a tritonserver whose only model repository is an empty S3 prefix; it
    runs without auto-complete, as the distributed stack's canary does, and says so (:func:`_canary`)."""
    with MotoServer() as s3:
        ensure_bucket(s3.endpoint_url, "canary")
        s3.client().put_object(Bucket="canary", Key="triton/.keep", Body=b"")  # an empty repository, as deployed
        creds = {"AWS_ACCESS_KEY_ID": _MOTO_KEY_ID, "AWS_SECRET_ACCESS_KEY": _MOTO_SECRET, "AWS_DEFAULT_REGION": "us-east-1"}
        work = tmp_path_factory.mktemp("canary-host")
        with LocalTriton(f"s3://127.0.0.1:{s3.port}/canary/triton", work_dir=work, env=creds, ready_timeout=60,
                         server_args=[NO_AUTO_COMPLETE]) as triton:
            yield s3, triton


def _canary(triton) -> RemoteCanary:
    return RemoteCanary.from_extra(triton.http_url, {"repository": "s3://canary/triton", "gpu": "false", "auto_complete": False})


def _completes_itself(repo: Path, post: str) -> None:
    """``post``'s model.py gains an ``auto_complete_config`` (that sets nothing its config lacks)."""
    path = repo / post / "1" / "model.py"
    path.write_text(path.read_text().replace("class TritonPythonModel:\n", (
        "class TritonPythonModel:\n"
        "    @staticmethod\n"
        "    def auto_complete_config(auto_complete_model_config):\n"
        "        return auto_complete_model_config\n\n"), 1))


def _prefix(s3) -> list[str]:
    return [o["Key"] for o in s3.client().list_objects_v2(Bucket="canary", Prefix="triton/").get("Contents", [])
            if o["Key"] != "triton/.keep"]


def _served_champion(tmp_path: Path, repo: Path) -> Champion:
    names = {m: m + CHAMPION_SUFFIX for m in (LEAF, "iris_post", "iris")}
    renamed = rename_repository(repo, tmp_path / "champion", names)
    roles = {"probabilities": "probabilities", "label": "label"}
    return Champion(SERVED, "production", release_id="iris-0", name="release iris-0 (iris-classifier v0)",
                    repository=renamed, entry="iris" + CHAMPION_SUFFIX, load_order=[names[m] for m in (LEAF, "iris_post", "iris")],
                    interface=Interface(roles, LABELS, [0, 1, 2]), contract=contract_of(renamed, "iris" + CHAMPION_SUFFIX, LABELS),
                    model_version="0", pinned=True)


def test_an_ensemble_release_and_its_champion_are_staged_served_and_taken_back(tmp_path, iris, iris_repository, canary_host):
    s3, triton = canary_host
    onnx_path, golden, reference = iris
    release = make_release(tmp_path, iris_repository, onnx_path, golden, reference)
    s3.client().put_object(Bucket="canary", Key="triton/left_by_a_killed_canary/config.pbtxt", Body=b"x")
    result = run_stage(release.workspace, "canary", canary_stage, release.spec, release.intake, release.export,
                       release.assembled, release.workspace, remote=_canary(triton),
                       open_store=lambda uri: open_store(uri, s3_client=s3.client()),
                       find_champion=lambda folder: _served_champion(tmp_path, iris_repository))
    assert result.passed, result.summary
    report = json.loads(Path(result.report_json).read_text())
    server = report["server"]
    assert server["mode"] == "remote" and server["version"] == "2.51.0"
    assert "CPU, python-backend onnxruntime shim" in server["description"]
    assert server["shimmed_models"] == [LEAF, LEAF + CHAMPION_SUFFIX], "the report says which models went through the shim"
    # an ensemble and its steps go through the repository Triton polls (pushed steps break ensembles)
    assert server["delivery"] == {m: "staged" for m in (LEAF, "iris_post", "iris", LEAF + CHAMPION_SUFFIX,
                                                         "iris_post" + CHAMPION_SUFFIX, "iris" + CHAMPION_SUFFIX)}
    assert server["models_loaded"]["iris"] == ["1"] and server["models_loaded"]["iris" + CHAMPION_SUFFIX] == ["1"]
    assert report["shift"]["agreement"] == 1.0, "the champion was replayed beside the candidate"
    # afterwards: nothing loaded, nothing left in the repository (the killed canary's leftovers included)
    assert _prefix(s3) == []
    index = triton.client().get_model_repository_index()
    assert all(m.get("state") != "READY" for m in index), index


def test_a_model_without_an_ensemble_is_pushed_and_nothing_is_written_where_the_server_reads(tmp_path, iris, canary_host):
    from .support import write_leaf

    s3, triton = canary_host
    onnx_path, golden, reference = iris
    repo = tmp_path / "repository"
    write_leaf(repo, onnx_path)
    assert staged_closure(repo, [LEAF]) == set()
    release = make_release(tmp_path, repo, onnx_path, golden, {"probabilities": reference["probabilities"]},
                           name=LEAF, load_order=[LEAF], canary={"batch_rows": 16, "concurrency": 2, "expectations": False})
    release.assembled.roles = {"probabilities": "probabilities"}
    release.assembled.labels = None
    result = run_stage(release.workspace, "canary", canary_stage, release.spec, release.intake, release.export,
                       release.assembled, release.workspace, remote=_canary(triton),
                       open_store=lambda uri: open_store(uri, s3_client=s3.client()))
    report = json.loads(Path(result.report_json).read_text())
    assert report["server"]["delivery"] == {LEAF: "pushed"}
    assert report["parity"]["probabilities"]["passed"]
    assert _prefix(s3) == []


def test_a_plan_built_for_another_gpu_is_refused_before_anything_loads(tmp_path) -> None:
    from tritonclient.grpc import model_config_pb2 as mc

    from model_release.repository.config import write_config

    repo = tmp_path / "repository"
    (repo / "m" / "1").mkdir(parents=True)
    write_config(repo / "m" / "config.pbtxt", mc.ModelConfig(name="m", platform="tensorrt_plan", max_batch_size=8))
    stamp = {"built": True, "environment": {"tensorrt": "10.3.0", "compute_capability": "8.0", "gpu": "A100"}}
    a100 = RemoteCanary("canary:8000", gpu=True, tensorrt="10.3.0", compute_capability="8.0")
    check_plans(repo, ["m"], stamp, a100, whose="the candidate")  # a match passes
    l4 = RemoteCanary("canary:8000", gpu=True, tensorrt="10.3.0", compute_capability="8.9")
    with pytest.raises(GpuUnavailable, match=r"GPU compute capability 8.0 \(plan\) != 8.9 \(canary\).*Nothing was loaded"):
        check_plans(repo, ["m"], stamp, l4, whose="the candidate")
    older = RemoteCanary("canary:8000", gpu=True, tensorrt="8.6.1", compute_capability="8.0")
    with pytest.raises(GpuUnavailable, match=r"TensorRT version 10.3.0 \(plan\) != 8.6.1 \(canary\)"):
        check_plans(repo, ["m"], stamp, older, whose="the candidate")
    silent = RemoteCanary("canary:8000", gpu=True)
    with pytest.raises(GpuUnavailable, match=r"declares no TensorRT version \(set extra.tensorrt"):
        check_plans(repo, ["m"], stamp, silent, whose="the candidate")
    with pytest.raises(GpuUnavailable, match="declares no GPU"):
        check_plans(repo, ["m"], stamp, RemoteCanary("canary:8000", gpu=False), whose="the candidate")


def test_a_canary_without_auto_complete_refuses_a_release_that_needs_it_before_delivering_anything(
        tmp_path, iris, iris_repository, canary_host):
    s3, triton = canary_host
    onnx_path, golden, reference = iris
    repo = tmp_path / "repository"
    shutil.copytree(iris_repository, repo)
    _completes_itself(repo, "iris_post")
    release = make_release(tmp_path, repo, onnx_path, golden, reference)
    with pytest.raises(InfraError) as refused:
        run_stage(release.workspace, "canary", canary_stage, release.spec, release.intake, release.export,
                  release.assembled, release.workspace, remote=_canary(triton),
                  open_store=lambda uri: open_store(uri, s3_client=s3.client()))
    message = refused.value.message
    assert f"the candidate cannot be judged on the remote canary at {triton.http_url}: it declares auto_complete false" in message
    assert "iris_post" in message and "defines auto_complete_config" in message, message
    assert "Nothing was delivered" in message and "set auto_complete true in the triton_canary connection" in message
    assert _prefix(s3) == []  # nothing staged
    index = triton.client().get_model_repository_index()
    assert all(m.get("state") != "READY" for m in index), index


def test_only_a_canary_that_declares_auto_complete_false_refuses_and_each_repository_is_prepared_once(tmp_path, iris_repository):
    repo = tmp_path / "repository"
    shutil.copytree(iris_repository, repo)
    _completes_itself(repo, "iris_post")

    def delivery(**extra) -> Delivery:  # prepare reads no server and no store
        return Delivery(server=None, canary=RemoteCanary.from_extra("canary:8000", {"gpu": False, **extra}),  # type: ignore[arg-type]
                        open_store=lambda uri: None, workdir=tmp_path / "work")

    completing = delivery()
    assert completing.canary.auto_complete is True  # Triton's default, when the extra is silent
    copy = completing.prepare(repo, "candidate", whose="the candidate")
    assert copy != repo and (copy / "iris_post" / "1" / "model.py").is_file() and completing.shimmed == [LEAF]
    assert completing.prepare(repo, "candidate", whose="the candidate") == copy and completing.shimmed == [LEAF]
    strict = delivery(auto_complete=False)
    with pytest.raises(InfraError, match=r"^canary: the champion iris-0 cannot be judged on the remote canary at "
                                         r"canary:8000: it declares auto_complete false .*iris_post"):
        strict.prepare(repo, "champion", whose="the champion iris-0")
    assert strict.prepare(iris_repository, "candidate", whose="the candidate").is_dir()  # a whole config passes
    for bad in ("false", 0, None):
        with pytest.raises(SpecError, match=rf"remote canary at canary:8000: connection extra auto_complete is {bad!r}; "
                                            r"it must be true .* or false"):
            RemoteCanary.from_extra("canary:8000", {"auto_complete": bad})
