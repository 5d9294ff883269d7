"""A roll-out that meets a refused load, a SIGKILL mid-step, a slow first request, on real local Tritons with agents."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from model_release.serve.errors import RolloutStopped
from model_release.serve.record import read_records
from model_release.serve.rollout import roll_out
from model_release.serve.status import fleet_status
from model_release.serve.warmup import WarmupRule

from .support import (
    CHANNEL,
    RequestLoop,
    build_release,
    fast_options,
    local_fleet,
    refuse_where,
    slow_first_request,
    slow_load,
    switches,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO_ROOT = Path(__file__).resolve().parents[2]


def test_a_load_refused_on_one_server_stops_there_it_keeps_release_1_and_stays_ready(tmp_path, store):
    first = build_release(tmp_path, store, "lr", "iris-r1")
    second = build_release(tmp_path, store, "weak", "iris-r2", promote_it=False, tweak=refuse_where("SERVE_REFUSE"))
    with local_fleet(tmp_path, store, envs=[{}, {"SERVE_REFUSE": "1"}]) as live:
        with RequestLoop(live.fleet, [first, second]) as loop:
            loop.wait_for(100)
            second.promote(store)
            with pytest.raises(RolloutStopped) as stopped:
                roll_out(store, CHANNEL, fast_options())
            loop.wait_for(100)
        status = fleet_status(store, CHANNEL)
        with urllib.request.urlopen(f"http://{live.servers['serve-2'].url}/v2/health/ready", timeout=10) as resp:
            triton_ready = resp.status  # strict readiness (Triton's default): the failed version is unloaded again
    message = stopped.value.message
    assert "step 2 stopped: 1 server(s) failed, over its budget of 0: serve-2: server serve-2 refused to load " \
           "iris_postprocess version 2 of release iris-r2" in message, message
    assert "postprocess refuses to load here: SERVE_REFUSE is set" in message  # Triton's own words
    assert "On iris-r2: ['serve-1']; on their old release: ['serve-2']" in message
    assert "is split: iris-r2 on ['serve-1']; iris-r1 on ['serve-2']" in message
    assert triton_ready == 200
    assert loop.traffic.failures == [] and loop.traffic.mixed == []
    assert switches(loop.traffic, "serve-2") == [first.release_id]
    assert switches(loop.traffic, "serve-1") == [first.release_id, second.release_id]
    record = read_records(store, CHANNEL)[-1]
    assert record["outcome"] == "stopped"
    assert [(s["server"], s["outcome"], s["after"]) for s in record["servers"]] == [
        ("serve-1", "switched", "iris-r2"), ("serve-2", "failed", "iris-r1")]
    assert [(r["server"], r["release"], r["drift"], r["ready"]) for r in status["servers"]] == [
        ("serve-1", "iris-r2", False, True), ("serve-2", "iris-r1", False, True)]  # the plan keeps serve-2 on iris-r1
    assert not (tmp_path / "serve-2" / "models" / "iris_postprocess" / "2").exists()  # nothing half-done is left


def test_a_sigkilled_roll_out_s_rerun_proceeds_within_30_s_and_converges_without_a_mixed_answer(tmp_path, store):
    first = build_release(tmp_path, store, "lr", "iris-r1")
    # its postprocess loads for 3 s: the kill lands while serve-2 loads the new members but still serves iris-r1
    second = build_release(tmp_path, store, "weak", "iris-r2", promote_it=False, tweak=slow_load(3))
    with local_fleet(tmp_path, store) as live:
        with RequestLoop(live.fleet, [first, second]) as loop:
            loop.wait_for(100)
            second.promote(store)
            proc = subprocess.Popen(
                [sys.executable, "-m", "model_release.cli", "rollout", "--channel", CHANNEL, "--store", store.uri,
                 "--no-watch"], cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
            member = tmp_path / "serve-2" / "models" / "iris_model"
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and proc.poll() is None:
                if member.is_dir() and any(p.name == "2" or p.name.startswith(".2.partial") for p in member.iterdir()):
                    break  # step 2: serve-2's agent is copying or loading the new leaf
                time.sleep(0.005)
            assert proc.poll() is None, proc.stderr.read().decode()
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            proc.stderr.close()
            mid = fleet_status(store, CHANNEL)
            t0 = time.monotonic()
            record = roll_out(store, CHANNEL, fast_options())  # no lock wait given: the killed run's lease lapses
            rerun_s = time.monotonic() - t0
            loop.wait_for(100)
        status = fleet_status(store, CHANNEL)
    assert [r["release"] for r in mid["servers"]] == ["iris-r2", "iris-r1"]
    assert rerun_s < 30, rerun_s
    assert record.outcome == "done" and [s.after for s in record.servers] == ["iris-r2", "iris-r2"]
    assert [(r["release"], r["drift"], r["ready"]) for r in status["servers"]] == [("iris-r2", False, True)] * 2
    assert loop.traffic.failures == [] and loop.traffic.mixed == []
    for server in live.fleet.servers:
        assert switches(loop.traffic, server.name) == [first.release_id, second.release_id]


@pytest.mark.parametrize("warmup", [False, True], ids=["no-model-warmup-refused", "model-warmup-passes"])
def test_a_slow_first_request_is_refused_at_the_switch_unless_the_model_is_warmed(tmp_path, store, warmup):
    first = build_release(tmp_path, store, "lr", "iris-r1")
    second = build_release(tmp_path, store, "weak", "iris-r2", promote_it=False,
                           tweak=slow_first_request(1.5, warmup=warmup))
    with local_fleet(tmp_path, store, count=1):
        second.promote(store)
        options = fast_options(warmup=WarmupRule(requests=3, first_request_limit_ms=500))
        if warmup:
            record = roll_out(store, CHANNEL, options)
            steps = [(s.action, s.model) for s in record.servers[0].steps]
            assert ("warmup", "iris_postprocess") in steps and steps[-1] == ("switch", "iris")
        else:
            with pytest.raises(RolloutStopped, match=r"server serve-1: the first request to iris_postprocess version 2 of "
                                                     r"iris-r2 took 1[5-9]\d\d ms, over the limit of 500 ms"):
                roll_out(store, CHANNEL, options)
        status = fleet_status(store, CHANNEL)
    assert status["servers"][0]["release"] == (second.release_id if warmup else first.release_id)
