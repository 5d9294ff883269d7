"""The embedded local Triton: a real tritonserver that answers, reports clearly, and never outlives its caller."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from model_release.errors import ServiceUnavailable
from model_release.triton.local import LocalTriton

pytestmark = pytest.mark.integration

SLOW_PY = """
import time


class TritonPythonModel:
    def initialize(self, args):
        time.sleep(120)

    def execute(self, requests):
        return []
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purposes; anything else is a live process
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def _group_members(pgid: int) -> list[int]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def test_serves_the_repository_on_loopback_with_explicit_model_control(served):
    client = served.client()
    assert served.http_url.startswith("127.0.0.1:")
    assert client.get_server_metadata()["version"] == "2.51.0"
    assert client.is_server_ready()
    # explicit mode: nothing is loaded until asked
    assert client.is_model_ready("iris_onnx") is False
    client.load_model("iris")  # loads its steps too
    import tritonclient.http as httpclient

    x = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]], dtype=np.float32)
    inp = httpclient.InferInput("features", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    result = client.infer("iris", [inp])
    assert [v.decode() for v in result.as_numpy("label")[:, 0]] == ["setosa", "virginica"]
    assert np.allclose(result.as_numpy("probabilities").sum(axis=1), 1.0, atol=1e-5)
    client.unload_model("iris", unload_dependents=True)


def test_the_server_and_its_python_stubs_are_gone_after_the_context_exits(tmp_path, iris_repository):
    from model_release.triton.shim import prepare_canary_repository

    copy = prepare_canary_repository(iris_repository, tmp_path / "repository")
    with LocalTriton(copy.path) as triton:
        triton.client().load_model("iris_post")  # starts a python backend stub in the server's group
        pid = triton.pid
        assert _alive(pid) and len(_group_members(pid)) >= 2
        work_dir = triton.work_dir
    assert not _alive(pid)
    assert _group_members(pid) == []
    assert not work_dir.exists()  # its own temporary folder is removed


def _stub_environments(pgid: int) -> dict[int, dict[str, str]]:
    """The environment of each python backend stub in the server's process group (one that ends meanwhile is left out)."""
    found = {}
    for pid in _group_members(pgid):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            environ = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "triton_python_backend_stub" in command:
            found[pid] = dict(item.split("=", 1) for item in environ.split("\0") if "=" in item)
    return found


@pytest.mark.parametrize("caller", [None, "3"], ids=["by-default", "as-the-caller-says"])
def test_a_python_stub_runs_one_blas_thread_unless_the_callers_environment_says_otherwise(tmp_path, iris_repository,
                                                                                          monkeypatch, caller):
    """Each python model instance is a process; numpy's OpenBLAS would start a thread per core in every one."""
    from model_release.triton.shim import prepare_canary_repository

    if caller is None:
        monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", caller)
    copy = prepare_canary_repository(iris_repository, tmp_path / "repository")
    with LocalTriton(copy.path) as triton:
        triton.client().load_model("iris_post")  # a python model: its stub imports numpy
        stubs = _stub_environments(triton.pid)
        assert stubs, "no python backend stub in the server's process group"
        assert {pid: env.get("OPENBLAS_NUM_THREADS") for pid, env in stubs.items()} == {pid: caller or "1" for pid in stubs}


def test_a_stop_in_the_background_returns_at_once_and_leaves_nothing_once_joined(tmp_path, iris_repository):
    import time

    from model_release.triton.shim import prepare_canary_repository

    copy = prepare_canary_repository(iris_repository, tmp_path / "repository")
    triton = LocalTriton(copy.path)
    triton.start()
    try:
        triton.client().load_model("iris_post")  # a python stub: Triton's own shutdown then takes over a second
        pid, work_dir, shm = triton.pid, triton.work_dir, triton._shm_prefix
        assert len(_group_members(pid)) >= 2
        t = time.perf_counter()
        thread = triton.stop_in_background()
        returned_in = time.perf_counter() - t
    except BaseException:
        triton.stop()
        raise
    thread.join(60)
    assert returned_in < 0.5  # the caller goes on while the server shuts down
    assert not thread.is_alive() and not thread.daemon  # an interpreter at exit waits for it
    assert triton.process.returncode is not None  # reaped: no zombie
    assert not _alive(pid) and _group_members(pid) == []
    assert not work_dir.exists() and list(Path("/dev/shm").glob(f"{shm}*")) == []


def test_a_stop_unloads_every_model_first_so_the_server_finds_none_live_at_its_first_check(tmp_path, iris_repository):
    """Triton, on SIGTERM, checks once a second whether its models are gone; unloaded beforehand, it exits at once."""
    import re

    from model_release.triton.shim import prepare_canary_repository

    copy = prepare_canary_repository(iris_repository, tmp_path / "repository")
    log = tmp_path / "tritonserver.log"
    with LocalTriton(copy.path, log_path=log) as triton:
        triton.client().load_model("iris")  # the ensemble and its steps, python stubs among them
        loaded = {m["name"] for m in triton.client().get_model_repository_index() if m.get("state") == "READY"}
        assert {"iris", "iris_post"} <= loaded
    text = log.read_text()
    before, signal, after = text.partition("Signal (15) received.")
    assert signal, text[-2000:]
    unloaded = set(re.findall(r"successfully unloaded '([^']+)'", before))
    assert unloaded == loaded, f"unloaded before SIGTERM: {sorted(unloaded)}; loaded: {sorted(loaded)}"
    checks = re.findall(r"Found (\d+) live models", after)
    assert checks and checks[0] == "0", after[:2000]


def test_the_three_ports_of_a_server_are_distinct_even_when_the_picks_repeat(monkeypatch):
    """Each port is picked at random; two equal picks would make tritonserver refuse to start (not a clash to retry)."""
    from model_release.triton import local

    picks = iter([27001, 27001, 27002, 27001, 27002, 27003])
    monkeypatch.setattr(local, "_free_port", lambda: next(picks))
    assert local._distinct_ports(3) == [27001, 27002, 27003]


def test_the_server_is_stopped_when_the_body_raises(tmp_path):
    (tmp_path / "empty").mkdir()
    pid = None
    with pytest.raises(RuntimeError, match="the caller failed"):
        with LocalTriton(tmp_path / "empty", work_dir=tmp_path / "server") as triton:
            pid = triton.pid
            assert _alive(pid)
            raise RuntimeError("the caller failed")
    assert pid is not None and not _alive(pid)
    assert "Started HTTPService at 127.0.0.1" in (tmp_path / "server" / "tritonserver.log").read_text()


def test_a_missing_runtime_venv_says_how_to_create_it(tmp_path):
    with pytest.raises(ServiceUnavailable) as caught:
        with LocalTriton(tmp_path, runtime_venv=tmp_path / "no-such-venv"):
            pass  # pragma: no cover - never entered
    message = str(caught.value)
    assert "no-such-venv" in message and "bash infra/local/setup.sh" in message


def test_a_runtime_venv_without_pytriton_says_so(tmp_path):
    venv = tmp_path / "bare-venv"
    (venv / "bin").mkdir(parents=True)
    os.symlink(shutil.which("python3") or "/usr/bin/python3", venv / "bin" / "python")
    with pytest.raises(ServiceUnavailable, match="nvidia-pytriton is not installed in it.*infra/local/setup.sh"):
        LocalTriton(tmp_path, runtime_venv=venv).start()


def test_a_server_that_is_not_ready_in_time_fails_with_its_log_and_leaves_nothing_running(tmp_path):
    repo = tmp_path / "repo"
    (repo / "slow" / "1").mkdir(parents=True)
    (repo / "slow" / "1" / "model.py").write_text(SLOW_PY)
    (repo / "slow" / "config.pbtxt").write_text('name: "slow"\nbackend: "python"\nmax_batch_size: 0\n'
                                                'input { name: "x" data_type: TYPE_FP32 dims: [1] }\n'
                                                'output { name: "y" data_type: TYPE_FP32 dims: [1] }\n')
    triton = LocalTriton(repo, model_control="none", ready_timeout=3, work_dir=tmp_path / "server", exit_timeout=3)
    with pytest.raises(ServiceUnavailable) as caught:
        triton.start()
    message = str(caught.value)
    assert "was not ready" in message and "within 3 s" in message and "tritonserver.log" in message
    assert "slow" in message  # the log tail shows what it was doing
    assert triton.process is not None and not _alive(triton.process.pid)
    assert _group_members(triton.process.pid) == []

