"""The pieces of ``model-release up`` one at a time: the tracking-URI rule, process marks, the env file, ports,
the S3 endpoint that survives a restart, and the README parser the end-to-end README test relies on."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from model_release.cli import COMMANDS
from model_release.errors import ServiceUnavailable
from model_release.local import procs, up
from model_release.local.up import PORT_RETRIES
from model_release.local.stack_folder import Layout, load_config, stack_env, write_env_file

from .readme import commands, script

PROJECT = Path(__file__).resolve().parents[2]
README = PROJECT / "docs" / "local-stack.md"  # its "Using it" session, run by test_readme_session.py


def _cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "model_release.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _bare_env(tmp_path: Path) -> dict[str, str]:
    """No tracking URI anywhere: no MLflow variable, no Airflow home, no connection; a fresh HOME."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MLFLOW_", "AIRFLOW", "MODEL_RELEASE_", "AWS_"))}
    env["HOME"] = str(tmp_path / "home")
    return env


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_release_without_a_tracking_uri_exits_2_naming_the_ways_and_writes_nothing(tmp_path: Path) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (tmp_path / "home").mkdir()
    proc = _cli(["release", str(PROJECT / "releases" / "iris.yaml"), "--version", "1"], cwd, _bare_env(tmp_path))
    assert proc.returncode == 2, proc.stderr
    message = proc.stderr.strip().splitlines()[-1]
    for way in ("--tracking-uri", "MLFLOW_TRACKING_URI", "mlflow_default", "model-release up"):
        assert way in message, message
    assert _files(cwd) == set() and _files(tmp_path / "home") == set(), "the refused command wrote files"


@pytest.mark.integration
def test_the_airflow_connection_is_the_third_way(tmp_path: Path) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (tmp_path / "home").mkdir()
    store = tmp_path / "mlflow"
    store.mkdir()
    uri = f"sqlite:///{store / 'mlflow.db'}"
    env = {**_bare_env(tmp_path), "AIRFLOW_HOME": str(tmp_path / "airflow"),
           "AIRFLOW_CONN_MLFLOW_DEFAULT": json.dumps({"conn_type": "http", "extra": {"tracking_uri": uri}})}
    proc = _cli(["release", str(PROJECT / "releases" / "iris.yaml"), "--no-promote",
                 "--workspace", str(tmp_path / "ws")], cwd, env)
    # it got past the rule: the release's preflight checked the connection's URI (whose database is not there)
    assert "no MLflow tracking URI" not in proc.stderr
    message = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and f"'{store / 'mlflow.db'}' does not exist" in message, proc.stderr[-2000:]
    assert not (cwd / "mlflow.db").exists() and not (cwd / "mlruns").exists()


def _wait_for_marks(stack_id: str, count: int, timeout: float = 10) -> list[int]:
    """The processes marked with ``stack_id`` once there are ``count`` of them (or ``timeout`` has passed)."""
    deadline = time.monotonic() + timeout
    while len(procs.marked(stack_id)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return procs.marked(stack_id)


def test_marked_processes_are_found_and_stopped_with_their_children(tmp_path: Path) -> None:
    stack_id = uuid.uuid4().hex
    parent = procs.spawn(["bash", "-c", "sleep 300 & sleep 300; wait"], env=dict(os.environ), stack_id=stack_id,
                         log_path=tmp_path / "sleep.log", cwd=tmp_path)
    other = subprocess.Popen(["sleep", "300"])  # not marked: must survive the sweep
    try:
        found = _wait_for_marks(stack_id, 3)
        assert parent.pid in found and len(found) == 3, found
        assert other.pid not in found
        assert sorted(procs.sweep(stack_id)) == found
        parent.wait(5)
        assert procs.marked(stack_id) == []
        assert other.poll() is None
    finally:
        for p in (parent, other):
            if p.poll() is None:
                p.kill()
            p.wait()


def test_a_process_that_renames_itself_as_airflow_does_is_still_found_by_its_mark(tmp_path: Path) -> None:
    """setproctitle writes a long title over /proc/PID/environ; the stack's processes keep their mark."""
    stack_id = uuid.uuid4().hex
    ready = tmp_path / "renamed"
    script = ("import setproctitle, pathlib, time; "
              "setproctitle.setproctitle('airflow api_server -- host:127.0.0.1 port:23451 ' + 'x' * 200); "
              f"pathlib.Path({str(ready)!r}).touch(); time.sleep(300)")
    proc = procs.spawn([sys.executable, "-c", script], env=dict(os.environ), stack_id=stack_id,
                       log_path=tmp_path / "renamed.log", cwd=tmp_path)
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), (tmp_path / "renamed.log").read_text()
        assert procs.marked(stack_id) == [proc.pid]
        assert procs.sweep(stack_id, timeout=5) == [proc.pid] and procs.marked(stack_id) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_a_sweep_returns_the_child_a_process_started_while_it_was_being_stopped(tmp_path: Path) -> None:
    """The second look finds what the first could not have seen; the pids returned are every one stopped."""
    stack_id = uuid.uuid4().hex
    started = tmp_path / "started"
    parent = procs.spawn(["bash", "-c", f'trap "sleep 300 & echo \\$! > {started}; exit 0" TERM; sleep 300 & wait'],
                         env=dict(os.environ), stack_id=stack_id, log_path=tmp_path / "sleep.log", cwd=tmp_path)
    try:
        first = _wait_for_marks(stack_id, 2)
        assert parent.pid in first and len(first) == 2, first
        swept = procs.sweep(stack_id, timeout=5)
        late = int(started.read_text())  # started by the trap, after the first look
        assert late not in first and swept == sorted([*first, late]), (first, late, swept)
        assert procs.marked(stack_id) == []
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.wait()


def _group(tmp_path: Path, script: str) -> subprocess.Popen[bytes]:
    """``bash -c script`` leading a process group of its own, once its traps are set."""
    ready = tmp_path / "ready"
    proc = subprocess.Popen(["bash", "-c", f"{script}\ntouch {ready}\nwait"], start_new_session=True)
    deadline = time.monotonic() + 10
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ready.exists(), "the test's process group did not start"
    return proc


def test_stop_group_kills_a_group_whose_leader_ignores_sigterm(tmp_path: Path) -> None:
    proc = _group(tmp_path, "trap '' TERM; sleep 300 &")
    told = []
    try:
        assert procs.stop_group(proc, timeout=0.5, on_kill=lambda: told.append("killing")) is True
        assert told == ["killing"] and proc.poll() is not None and procs.group_members(proc.pid) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_stop_group_with_kill_rest_takes_what_outlives_its_leader(tmp_path: Path) -> None:
    proc = _group(tmp_path, "(trap '' TERM; exec sleep 300) &")  # a child that ignores SIGTERM, like a stuck stub
    try:
        assert procs.stop_group(proc, timeout=10, leader_only=True, kill_rest=True) is False  # the leader exits on SIGTERM
        assert proc.poll() is not None and procs.group_members(proc.pid) == []
    finally:
        if procs.group_members(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_env_file_is_private_and_holds_what_the_services_get(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "stack")
    config, notes = load_config(layout)
    assert notes == []
    path = write_env_file(layout, config)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(layout.passwords.stat().st_mode) == 0o600
    text = path.read_text()
    password = layout.airflow_password()
    assert f"export AIRFLOW_PASSWORD={password}" in text
    env = stack_env(layout, config)
    assert password not in json.dumps(env), "the services' environment must not carry the UI password"
    for name, value in env.items():
        assert f"export {name}=" in text, name
    assert env["MLFLOW_TRACKING_URI"] == f"http://127.0.0.1:{config.ports['mlflow']}"
    assert env["AIRFLOW__API__HOST"] == "127.0.0.1"
    # sourcing it in bash gives the same values
    shown = subprocess.run(["bash", "-c", f"source {path} && echo \"$AWS_ENDPOINT_URL $AIRFLOW_HOME\""],
                           capture_output=True, text=True, check=True).stdout.split()
    assert shown == [env["AWS_ENDPOINT_URL"], env["AIRFLOW_HOME"]]


def test_ports_are_kept_across_restarts_unless_taken(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "stack")
    first, _ = load_config(layout)
    again, notes = load_config(layout)
    assert again == first and notes == []
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", first.ports["mlflow"]))
        blocker.listen()
        moved, notes = load_config(layout)
    assert moved.stack_id == first.stack_id
    assert moved.ports["mlflow"] != first.ports["mlflow"] and moved.ports["s3"] == first.ports["s3"]
    assert len(notes) == 1 and str(first.ports["mlflow"]) in notes[0] and "taken" in notes[0]


class _Supervisor:
    """Starts nothing: each start holds ``taken`` of the config's ports as another process would, then fails as a
    service that could not bind does, until ``fails`` starts have failed (model_release.local.up._foreground's seam)."""

    starts: list[dict[str, int]] = []
    holders: list[socket.socket] = []
    fails, taken = 1, ("airflow",)

    def __init__(self, layout: Layout, config) -> None:  # noqa: ANN001
        self.config = config

    def start(self) -> None:
        self.starts.append(dict(self.config.ports))
        if len(self.starts) <= self.fails:
            for name in self.taken:
                holder = socket.socket()
                holder.bind(("127.0.0.1", self.config.ports[name]))
                holder.listen()
                self.holders.append(holder)
            raise ServiceUnavailable("airflow-api-server exited with code 3 while starting: address already in use")

    def stop(self) -> None:
        pass

    def save_state(self, *, ready: bool) -> None:
        assert ready

    def watch(self) -> None:
        pass


@pytest.mark.parametrize("fails, taken, code", [(1, ("airflow",), 0), (1, (), ServiceUnavailable.exit_code),
                                                (PORT_RETRIES + 1, ("airflow",), ServiceUnavailable.exit_code)],
                         ids=["port-taken-once", "no-port-taken", "port-taken-every-time"])
def test_up_starts_again_on_new_ports_only_when_a_port_was_taken_while_it_started(tmp_path, monkeypatch, capsys,
                                                                                   fails, taken, code) -> None:
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # _foreground's Ctrl-C handler stays out of pytest
    monkeypatch.setattr(_Supervisor, "starts", [])
    monkeypatch.setattr(_Supervisor, "holders", [])
    monkeypatch.setattr(_Supervisor, "fails", fails)
    monkeypatch.setattr(_Supervisor, "taken", taken)
    layout = Layout(tmp_path / "stack")
    try:
        assert up._foreground(layout, _Supervisor) == code
    finally:
        for holder in _Supervisor.holders:
            holder.close()
    out, err = capsys.readouterr()
    starts = _Supervisor.starts
    if not taken:  # another failure: no second start, the error as before
        assert len(starts) == 1 and "starting again" not in out and "every service is stopped" in err
        return
    assert len(starts) == min(fails, PORT_RETRIES) + 1
    for before, after in zip(starts, starts[1:]):
        assert after["airflow"] != before["airflow"] and after["s3"] == before["s3"] and after["mlflow"] == before["mlflow"]
        assert f"port {before['airflow']} of airflow was taken by another process while the stack started" in out
        assert f"port {before['airflow']} of airflow is taken by another process; using {after['airflow']} instead" in out
    if code == 0:
        assert "[up] ready in" in out and f"127.0.0.1:{starts[-1]['airflow']}" in out
        assert load_config(layout)[0].ports == starts[-1]
    else:
        assert "model-release up: airflow-api-server exited with code 3" in err


def test_status_and_down_of_a_stack_that_is_not_running(tmp_path: Path) -> None:
    env = {**_bare_env(tmp_path), "MODEL_RELEASE_STACK": str(tmp_path / "stack")}
    status = _cli(["status"], tmp_path, env)
    assert status.returncode == 1 and "not running" in status.stdout and "model-release up" in status.stdout
    down = _cli(["down"], tmp_path, env)
    assert down.returncode == 0 and "no stack" in down.stdout


def _start_s3(port: int, state: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "model_release.local.moto_persistent", "--port", str(port), "--state", str(state)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1)
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    proc.wait()
    raise AssertionError("the S3 endpoint did not answer within 30 s")


@pytest.mark.integration
def test_the_s3_endpoint_keeps_every_version_across_a_crash_and_a_restart(tmp_path: Path) -> None:
    from model_release.local.ports import free_port
    from model_release.local.moto_process import ensure_bucket, s3_client

    port, state = free_port(), tmp_path / "s3" / "state.pickle"
    url = f"http://127.0.0.1:{port}"
    proc = _start_s3(port, state)
    try:
        client = s3_client(url)
        ensure_bucket(url, "model-store")
        client.put_bucket_versioning(Bucket="model-store", VersioningConfiguration={"Status": "Enabled"})
        v1 = client.put_object(Bucket="model-store", Key="iris/channels/production.json", Body=b'{"release_id": "a"}')
        v2 = client.put_object(Bucket="model-store", Key="iris/channels/production.json", Body=b'{"release_id": "b"}',
                               IfMatch=v1["ETag"])
        deadline = time.monotonic() + 30  # the autosave runs about a second after the last write
        while not (state.exists() and v2["VersionId"].encode() in state.read_bytes()):  # written by a rename: whole
            assert time.monotonic() < deadline, "the S3 endpoint did not save its state within 30 s of the last write"
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)  # a crash: no chance to save on the way out
        proc.wait()
        assert stat.S_IMODE(state.stat().st_mode) == 0o600

        proc = _start_s3(port, state)
        ensure_bucket(url, "model-store")  # what `up` does on every start: must not replace the loaded bucket
        versions = client.list_object_versions(Bucket="model-store")["Versions"]
        assert sorted(v["VersionId"] for v in versions) == sorted([v1["VersionId"], v2["VersionId"]])
        old = client.get_object(Bucket="model-store", Key="iris/channels/production.json", VersionId=v1["VersionId"])
        assert old["Body"].read() == b'{"release_id": "a"}'
        with pytest.raises(client.exceptions.ClientError) as stale:  # conditional writes still judge by ETag
            client.put_object(Bucket="model-store", Key="iris/channels/production.json", Body=b"c", IfMatch=v1["ETag"])
        assert stale.value.response["Error"]["Code"] == "PreconditionFailed"
        client.put_object(Bucket="model-store", Key="iris/releases/r1/release.json", Body=b"{}")
        proc.send_signal(signal.SIGTERM)  # a clean stop saves at once
        assert proc.wait(20) == 0

        proc = _start_s3(port, state)
        assert client.get_object(Bucket="model-store", Key="iris/releases/r1/release.json")["Body"].read() == b"{}"
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(20)


def test_a_torn_s3_state_file_is_refused_with_what_to_do(tmp_path: Path) -> None:
    state = tmp_path / "state.pickle"
    state.write_bytes(b"not a pickle")
    proc = subprocess.run([sys.executable, "-m", "model_release.local.moto_persistent", "--port", "1", "--state", str(state)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert str(state) in proc.stderr and "Move it aside" in proc.stderr


def test_an_s3_state_file_written_under_the_former_module_name_still_loads() -> None:
    import pickle

    from model_release.local.moto_persistent import _Unpickler
    from moto.s3.utils import _VersionedKeyStore

    old = b"cmodel_release.local.s3_server\n_versioned_store\n(]tR."  # _versioned_store([]) as s3_server pickled it
    with pytest.raises(ModuleNotFoundError, match="s3_server"):
        pickle.loads(old)
    import io

    assert isinstance(_Unpickler(io.BytesIO(old)).load(), _VersionedKeyStore)


def test_readme_using_it_is_a_runnable_session() -> None:
    cmds = commands(README)
    texts = [c.text for c in cmds]
    assert texts[0].startswith(".venv/bin/model-release up --detach")
    assert texts[1].startswith("source .work/stack/env")
    assert texts[-1].startswith("model-release down")
    for cmd in cmds:  # every model-release subcommand the README uses exists
        words = cmd.first_line.split()
        if words[0].endswith("model-release"):
            assert words[1] in COMMANDS, cmd.first_line
    assert any("register_wine.py" in t for t in texts) and any("/dagRuns" in t for t in texts)
    assert any(t.startswith("model-release release ") for t in texts)
    assert sum(bool(c.expect) for c in cmds) >= len(cmds) - 3, "say what a command prints, in backticks"


def test_getting_started_is_a_runnable_session_that_ends_in_a_served_answer() -> None:
    cmds = commands(PROJECT / "docs" / "getting-started.md", "The session")
    texts = [c.text for c in cmds]
    assert texts[0].startswith(".venv/bin/model-release up --detach") and texts[-1].startswith("model-release down")
    for cmd in cmds:
        words = cmd.first_line.split()
        if words[0].endswith("model-release"):
            assert words[1] in COMMANDS, cmd.first_line
    assert any("tritonclient" in t for t in texts) and any(t.startswith("curl ") for t in texts)
    assert sum(bool(c.expect) for c in cmds) >= len(cmds) - 4, "say what a command prints, in backticks"


def test_a_heredocs_comment_is_on_its_first_line(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("## Using it\n```bash\npython - <<'EOF'  # prints `hi there`\nprint('hi there')\nEOF\n```\n")
    (cmd,) = commands(doc)
    assert cmd.expect == ["hi there"] and cmd.text.endswith("EOF")


def test_readme_parser_joins_continuations_and_heredocs_and_refuses_a_torn_block(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        "# x\n## Using it\n```bash\n# a comment\necho a \\\n  b   # prints `a b`\n"
        "python - <<'EOF'\nprint('#not a comment')\nEOF\n```\n```text\nnot run\n```\n## Next\n```bash\nnot this\n```\n"
    )
    cmds = commands(readme)
    assert [c.text for c in cmds] == ["echo a \\\n  b   # prints `a b`", "python - <<'EOF'\nprint('#not a comment')\nEOF"]
    assert cmds[0].expect == ["a b"] and cmds[0].line == 5
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run(["bash", "-c", script(cmds[:1] + [type(cmds[0])("false", 0), cmds[0]], out)], capture_output=True)
    assert proc.returncode == 1
    assert (out / "0.out").read_text() == "a b\n" and (out / "1.rc").read_text().strip() == "1"
    assert not (out / "2.out").exists(), "the session must stop at the first failing command"
    readme.write_text("## Using it\n```bash\necho a \\\n```\n")
    with pytest.raises(ValueError, match="inside a command"):
        commands(readme)


def test_the_distributed_stacks_processes_inherit_no_other_mlflow_registry(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """mlflow.set_registry_uri exports MLFLOW_REGISTRY_URI; one left by an earlier release in the same
    process sent the Celery workers' model lookups to that registry ("Registered Model ... not found")."""
    from model_release.local.distributed import DistributedStack

    monkeypatch.setenv("MLFLOW_REGISTRY_URI", "sqlite:////elsewhere/mlflow.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////elsewhere/mlflow.db")
    stack = DistributedStack(tmp_path)
    stack.ports = {k: 1000 + i for i, k in enumerate(("postgres", "redis", "mlflow", "api", "log_cpu", "log_gpu"))}
    env = stack.airflow_env()
    assert "MLFLOW_REGISTRY_URI" not in env
    assert env["MLFLOW_TRACKING_URI"] == stack.tracking_uri == "http://127.0.0.1:1002"


def test_status_asks_each_service_where_it_answers_when_well() -> None:
    from model_release.local.status import health_url

    assert health_url("triton-serve-1", "127.0.0.1:8000") == "http://127.0.0.1:8000/v2/health/ready"
    assert health_url("webhook-receiver", "http://127.0.0.1:9/webhook") == "http://127.0.0.1:9/health"
    assert health_url("mlflow", "http://127.0.0.1:5000") == "http://127.0.0.1:5000/health"
    assert health_url("something-else", "http://127.0.0.1:7") == "http://127.0.0.1:7/"


def test_the_stack_stops_in_tiers_what_posts_to_airflow_first_then_the_api_with_what_tasks_write_to() -> None:
    from model_release.local.up import stop_tiers

    started = ["triton-serve-1", "triton-serve-2", "s3", "mlflow", "airflow-api-server", "airflow-scheduler",
               "airflow-dag-processor", "webhook-receiver"]
    assert stop_tiers(started) == [["webhook-receiver", "airflow-dag-processor", "airflow-scheduler"],
                                   ["airflow-api-server", "mlflow", "s3", "triton-serve-2", "triton-serve-1"]]
    assert stop_tiers(["triton-serve-1", "s3"]) == [["s3", "triton-serve-1"]]  # start-up failed early
    assert stop_tiers([]) == []


def test_the_dag_processor_is_killed_after_its_own_short_stop_quietly_and_other_services_wait_the_default(
        tmp_path: Path, monkeypatch, capsys) -> None:  # noqa: ANN001
    """A stop stuck the way Airflow's dag-processor sticks mid-parse (its 5 s escalation delay) ends after
    DAG_PROCESSOR_STOP_S without a warning; a service with no stop of its own waits STOP_TIMEOUT and warns."""
    from model_release.local import up
    from model_release.local.services import DAG_PROCESSOR_STOP_S, Service, services

    layout = Layout(tmp_path / "stack")
    config, _ = load_config(layout)
    timeouts = {s.name: s.stop_timeout for s in services(layout, config)}
    assert timeouts.pop("airflow-dag-processor") == DAG_PROCESSOR_STOP_S == 1.5
    assert set(timeouts.values()) == {None}, timeouts  # MLflow, S3 and the rest: the supervisor's STOP_TIMEOUT
    monkeypatch.setattr(up, "STOP_TIMEOUT", 3.0)
    supervisor = up.Supervisor(layout, config)
    for name, stop_timeout in (("airflow-dag-processor", 0.4), ("mlflow", None)):
        (tmp_path / name).mkdir()
        supervisor.running[name] = (Service(name, [], stop_timeout=stop_timeout), _group(tmp_path / name, "trap '' TERM; sleep 300 &"))
    try:
        for name, waits in (("airflow-dag-processor", 0.4), ("mlflow", 3.0)):
            started = time.monotonic()
            supervisor._stop_one(name)
            took = time.monotonic() - started
            assert waits <= took < waits + 2.5, (name, took)
            assert supervisor.running[name][1].poll() is not None and procs.group_members(supervisor.running[name][1].pid) == []
        out, err = capsys.readouterr()
        assert "airflow-dag-processor killed after 0." in out and "(its stop waits 0.4 s)" in out
        assert "airflow-dag-processor" not in err  # killed as planned, not reported as a failure to stop
        assert "mlflow killed after 3." in out and "[up] mlflow did not stop within 3 s; killing it" in err
    finally:
        for _, proc in supervisor.running.values():
            if procs.group_members(proc.pid):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


class _Pools:
    """Airflow's pool endpoints as the stack's API client sees them: the answers to give, call by call.

    A status is raised as the client raises it (None: nothing answered); ``200`` answers; the last answer repeats.
    """

    def __init__(self, get: list[int | None], post: list[int | None] = (200,)) -> None:
        self.get_answers, self.post_answers = list(get), list(post)
        self.posted: list[tuple[str, dict]] = []
        self.asked = 0

    @staticmethod
    def _answer(answers: list[int | None], method: str, path: str) -> None:
        from model_release.local.http import AirflowApiError

        status = answers.pop(0) if len(answers) > 1 else answers[0]
        if status != 200:
            raise AirflowApiError(f"Airflow {method} {path} answered {status or 'nothing'}", status)

    def get(self, path: str) -> dict:
        self.asked += 1
        self._answer(self.get_answers, "GET", path)
        return {"name": "triton_canary", "slots": 3}

    def post(self, path: str, body: dict) -> dict:
        self.posted.append((path, body))
        self._answer(self.post_answers, "POST", path)
        return body


class _Clock:
    """A monotonic clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _ensure(pools: _Pools, clock: _Clock | None = None, within_s: float = 60.0, stopping=lambda: False) -> bool:  # noqa: ANN001
    from model_release.local.services import ensure_canary_pool

    clock = clock or _Clock()
    return ensure_canary_pool(pools, within_s=within_s, stopping=stopping, sleep=clock.sleep, clock=clock)


def test_the_canary_pool_is_created_once_with_one_slot_and_a_changed_one_is_left_alone() -> None:
    from model_release.errors import ServiceUnavailable

    missing = _Pools([404])
    assert _ensure(missing) is True
    assert missing.posted == [("/api/v2/pools", {"name": "triton_canary", "slots": 1,
                                                 "description": "one release at a time on the canary Triton"})]
    existing = _Pools([200])  # someone gave it 3 slots: kept
    assert _ensure(existing) is False and existing.posted == []
    assert _ensure(_Pools([404], [409])) is True  # created meanwhile by another client
    clock = _Clock()
    with pytest.raises(ServiceUnavailable, match=r"^Airflow did not create pool 'triton_canary': .*answered 400\. "
                                                  r"Create it: airflow pools set triton_canary 1"):
        _ensure(_Pools([404], [400]), clock)
    assert clock.slept == []  # a refusal is not asked again


def test_a_locked_airflow_database_is_asked_again_until_the_pool_is_made_and_not_past_the_deadline() -> None:
    """CI once saw POST /api/v2/pools answer 500 "Database error" while the scheduler wrote SQLite: transient."""
    from model_release.errors import ServiceUnavailable
    from model_release.local.services import POLL_S

    clock = _Clock()
    flaky = _Pools([404], [500, None, 200])
    assert _ensure(flaky, clock) is True
    assert len(flaky.posted) == 3 and flaky.asked == 3 and clock.slept == [POLL_S, POLL_S]
    assert _ensure(_Pools([500, 500, 200]), _Clock()) is False  # the GET may fail the same way
    # within 1.9 s, polled every 0.2 s: tries at 0, 0.2, ... 1.8 and a last one at 2.0, past the deadline.
    # The eleventh try still counts; one failure more, and the error says how long it asked and how to do it by hand.
    late = _Pools([404], [500] * 10 + [200])
    assert _ensure(late, _Clock(), within_s=1.9) is True and len(late.posted) == 11
    clock = _Clock()
    too_late = _Pools([404], [500] * 11 + [200])
    with pytest.raises(ServiceUnavailable, match=r"^Airflow's pool 'triton_canary' \(Create it: airflow pools set "
                                                  r"triton_canary 1 .*\) was not ready after 2 s \(Airflow did not "
                                                  r"create pool 'triton_canary': Airflow POST /api/v2/pools answered "
                                                  r"500\)$"):
        _ensure(too_late, clock, within_s=1.9)
    assert len(too_late.posted) == 11 and clock.now == pytest.approx(2.0)
    with pytest.raises(ServiceUnavailable, match=r"was not ready after 1 s \(Airflow did not say whether pool "
                                                  r"'triton_canary' exists: Airflow GET /api/v2/pools/triton_canary "
                                                  r"answered 500\)$"):
        _ensure(_Pools([500]), _Clock(), within_s=1.0)
    stopped = _Pools([500])
    with pytest.raises(ServiceUnavailable, match=r"^Airflow's pool 'triton_canary' .*: start-up interrupted$"):
        _ensure(stopped, _Clock(), stopping=lambda: True)  # Ctrl-C during `up`: said as such, not as a pool failure
    assert stopped.asked == 0


def test_quick_exit_runs_the_script_as_main_with_its_arguments_exit_code_and_exit_handlers(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_text(
        "import atexit, sys\n"
        "atexit.register(lambda: print('handler ran', flush=True))\n"
        "if __name__ == '__main__':\n"
        "    print(sys.argv[0].endswith('tool'), sys.argv[1:])\n"
        "    sys.exit(3)\n"
    )
    proc = subprocess.run([sys.executable, "-m", "model_release.local.quick_exit", str(script), "serve", "--x", "1"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.splitlines() == ["True ['serve', '--x', '1']", "handler ran"]
    usage = subprocess.run([sys.executable, "-m", "model_release.local.quick_exit"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 1 and "usage: python -m model_release.local.quick_exit SCRIPT" in usage.stderr


@pytest.mark.integration
def test_airflow_commands_in_one_process_stop_at_the_first_that_fails_naming_them_with_its_output(tmp_path: Path) -> None:
    """A fresh home: ``pools set`` before ``db migrate`` fails (no schema yet), and what follows never runs."""
    from model_release.local.airflow_cli import airflow_commands

    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__DATABASE")}
    env["AIRFLOW_HOME"] = str(tmp_path / "airflow")
    with pytest.raises(ServiceUnavailable, match=r"preparing Airflow's database \(airflow pools set triton_canary; "
                                                 r"airflow db migrate\) failed \(exit [1-9]\d*\); the commands' last output: ") as err:
        airflow_commands([["pools", "set", "triton_canary", "1", "x"], ["db", "migrate"]], env=env, cwd=tmp_path)
    assert "Database migration required" in str(err.value)  # Airflow's own word: the pool has no table yet
    assert not (tmp_path / "airflow" / "airflow.db").exists() or "alembic_version" not in _tables(tmp_path / "airflow" / "airflow.db")


def _tables(db: Path) -> set[str]:
    import sqlite3

    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("select name from sqlite_master where type = 'table'")}
