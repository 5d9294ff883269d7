"""A roll-out that meets a refused load, a SIGKILL mid-wave, a slow first request, a server that is down."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from model_release.serve.errors import RolloutLocked, RolloutStopped
from model_release.serve.fleet import Fleet, Server, write_fleet
from model_release.serve.lock import acquire
from model_release.serve.record import read_records
from model_release.serve.rollout import RolloutOptions, roll_out
from model_release.serve.status import fleet_status
from model_release.serve.warmup import WarmupRule

from .support import (
    CHANNEL,
    NAME,
    RequestLoop,
    build_release,
    completes_itself,
    local_fleet,
    refuse_where,
    slow_first_request,
    slow_load,
    switches,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO_ROOT = Path(__file__).resolve().parents[2]


def test_a_load_refused_on_one_server_stops_there_and_it_keeps_release_1(tmp_path, store):
    first = build_release(tmp_path, store, "lr", "iris-r1")
    second = build_release(tmp_path, store, "weak", "iris-r2", promote_it=False, tweak=refuse_where("SERVE_REFUSE"))
    with local_fleet(tmp_path, envs=[{}, {"SERVE_REFUSE": "1"}]) as (fleet, _servers):
        options = RolloutOptions(cache_dir=tmp_path / "cache")
        roll_out(store, fleet, options)
        with RequestLoop(fleet, [first, second]) as loop:
            loop.wait_for(100)
            second.promote(store)
            with pytest.raises(RolloutStopped) as stopped:
                roll_out(store, fleet, options)
            loop.wait_for(100)
        status = fleet_status(store, fleet, NAME)
    message = stopped.value.message
    assert "server serve-2" in message and "refused to load iris_postprocess version 2 of release iris-r2" in message
    assert "postprocess refuses to load here: SERVE_REFUSE is set" in message  # Triton's own words
    assert "On iris-r2: ['serve-1']; on their old release: ['serve-2']" in message
    assert loop.traffic.failures == [] and loop.traffic.mixed == []
    assert switches(loop.traffic, "serve-2") == [first.release_id]
    assert switches(loop.traffic, "serve-1") == [first.release_id, second.release_id]
    record = read_records(store, CHANNEL)[-1]
    assert record["outcome"] == "stopped"
    assert [(s["server"], s["outcome"], s["after"]) for s in record["servers"]] == [
        ("serve-1", "switched", "iris-r2"), ("serve-2", "failed", None)]
    assert [(r["server"], r["release"], r["drift"]) for r in status["servers"]] == [
        ("serve-1", "iris-r2", False), ("serve-2", "iris-r1", True)]
    assert not (tmp_path / "serve-2" / "models" / "iris_postprocess" / "2").exists()  # nothing half-done is left


def test_sigkilled_mid_wave_then_rerun_converges_without_a_mixed_answer(tmp_path, store):
    first = build_release(tmp_path, store, "lr", "iris-r1")
    # its postprocess loads for 3 s: the kill lands while serve-2 holds the new leaves but still serves
    # iris-r1, however slowly this test's process is scheduled (without it a 0.3 s load was raced)
    second = build_release(tmp_path, store, "weak", "iris-r2", promote_it=False, tweak=slow_load(3))
    with local_fleet(tmp_path) as (fleet, _servers):
        fleet_file = tmp_path / "fleet.json"
        write_fleet(fleet_file, {CHANNEL: list(fleet.servers)})
        options = RolloutOptions(cache_dir=tmp_path / "cache", lock_ttl_s=3, lock_wait_s=15)
        roll_out(store, fleet, options)
        with RequestLoop(fleet, [first, second]) as loop:
            loop.wait_for(100)
            second.promote(store)
            proc = subprocess.Popen(
                [sys.executable, "-m", "model_release.cli", "rollout", "--channel", CHANNEL, "--store", store.uri,
                 "--fleet", str(fleet_file), "--cache", str(tmp_path / "cache"), "--lock-ttl", "3", "--no-watch"],
                cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
            member = tmp_path / "serve-2" / "models" / "iris_model"
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and proc.poll() is None:
                if member.is_dir() and any(p.name == "2" or p.name.startswith(".2.partial") for p in member.iterdir()):
                    break  # wave 2 is copying or loading the new leaf on serve-2
                time.sleep(0.005)
            assert proc.poll() is None, proc.stderr.read().decode()
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            proc.stderr.close()
            mid = fleet_status(store, fleet, NAME)
            loop.wait_for(100)
            record = roll_out(store, fleet, options)  # waits out the killed run's lock
            loop.wait_for(100)
        status = fleet_status(store, fleet, NAME)
    assert [r["release"] for r in mid["servers"]] == ["iris-r2", "iris-r1"]
    assert [s.outcome for s in record.servers] == ["unchanged", "switched"]
    assert [(r["release"], r["drift"], r["ready"]) for r in status["servers"]] == [("iris-r2", False, True)] * 2
    assert loop.traffic.failures == [] and loop.traffic.mixed == []
    for server in fleet.servers:
        assert switches(loop.traffic, server.name) == [first.release_id, second.release_id]


@pytest.mark.parametrize("warmup", [False, True], ids=["no-model-warmup-refused", "model-warmup-passes"])
def test_a_slow_first_request_is_refused_at_the_switch_unless_the_model_is_warmed(tmp_path, store, warmup):
    first = build_release(tmp_path, store, "lr", "iris-r1")
    second = build_release(tmp_path, store, "weak", "iris-r2", promote_it=False,
                           tweak=slow_first_request(1.5, warmup=warmup))
    with local_fleet(tmp_path, count=1) as (fleet, _servers):
        roll_out(store, fleet, RolloutOptions(cache_dir=tmp_path / "cache"))
        second.promote(store)
        rule = WarmupRule(requests=3, first_request_limit_ms=500)
        options = RolloutOptions(cache_dir=tmp_path / "cache", warmup=rule.check)
        if warmup:
            record = roll_out(store, fleet, options)
            steps = [(s.action, s.model) for s in record.servers[0].steps]
            assert ("warmup", "iris_postprocess") in steps and steps[-1] == ("switch", NAME)
        else:
            with pytest.raises(RolloutStopped, match=r"server serve-1 .*first request to iris_postprocess version 2 of "
                                                     r"iris-r2 took 1[5-9]\d\d ms, over the limit of 500 ms"):
                roll_out(store, fleet, options)
        status = fleet_status(store, fleet, NAME)
    assert status["servers"][0]["release"] == (second.release_id if warmup else first.release_id)


def test_a_server_that_is_down_stops_its_wave_with_its_name(tmp_path, store):
    build_release(tmp_path, store, "lr", "iris-r1")
    fleet = Fleet(CHANNEL, (Server("serve-gone", "127.0.0.1:9", str(tmp_path / "nowhere")),))
    with pytest.raises(RolloutStopped, match=r"server serve-gone \(127.0.0.1:9\) did not answer while connecting"):
        roll_out(store, fleet, RolloutOptions(cache_dir=tmp_path / "cache"))
    record = read_records(store, CHANNEL)[-1]
    assert record["outcome"] == "stopped" and record["servers"][0]["outcome"] == "failed"


def test_a_release_that_needs_auto_complete_is_refused_before_any_server_without_it_changes(tmp_path, store):
    first = build_release(tmp_path, store, "lr", "iris-r1")
    needs = build_release(tmp_path, store, "weak", "iris-r2", tweak=completes_itself)
    with local_fleet(tmp_path) as (fleet, _servers):  # as `model-release up` runs them: no auto-complete
        options = RolloutOptions(cache_dir=tmp_path / "cache")
        roll_out(store, fleet, options, release_id=first.release_id)
        with pytest.raises(RolloutStopped) as refused:
            roll_out(store, fleet, options)
        before = fleet_status(store, fleet, NAME)
        complete = build_release(tmp_path, store, "weak", "iris-r3")  # the same model, its config whole
        done = roll_out(store, fleet, options)
        after = fleet_status(store, fleet, NAME)
    message = refused.value.message
    assert message.startswith("roll-out of 'iris-r2' to channel 'production' refused before any server changed: "
                              "servers ['serve-1', 'serve-2'] run with --disable-auto-complete-config"), message
    assert 'model "iris_postprocess" defines auto_complete_config' in message and "Declare every input" in message
    record = read_records(store, CHANNEL)[-2]
    assert record["release_id"] == needs.release_id and record["outcome"] == "stopped"
    assert [(s["server"], s["outcome"]) for s in record["servers"]] == [("serve-1", "not reached"), ("serve-2", "not reached")]
    assert [r["release"] for r in before["servers"]] == [first.release_id] * 2
    assert not any((tmp_path / f"serve-{i}" / "models" / "iris_postprocess" / "2").exists() for i in (1, 2))
    assert [s.outcome for s in done.servers] == ["switched", "switched"]
    assert [r["release"] for r in after["servers"]] == [complete.release_id] * 2


def test_two_roll_outs_of_one_channel_never_run_at_once(tmp_path, store):
    held = acquire(store, CHANNEL, ttl_s=60)
    with pytest.raises(RolloutLocked, match="another roll-out of channel 'production' holds"):
        acquire(store, CHANNEL, ttl_s=60, wait_s=0)
    held.release()
    acquire(store, CHANNEL, ttl_s=60).release()
