"""The fleet keeps itself serving, on real local Tritons with agents, under traffic that goes only to ready servers.

One fleet through one scenario (each part needs the state the one before left):

1. **restart**: a serving Triton is SIGKILLed under traffic and started again (as its supervisor, a kubelet,
   would); its agent is not ready until the release is loaded and warm again; no request fails at the
   client (one sent to the dying server is sent again to a ready one, as a balancer retries a connect failure);
2. **join**: a third server started with an agent serves the current release, with no roll-out run;
3. **in place**: a roll-out with ``swap: in_place`` under traffic: each server drains, unloads the old
   release, loads the new; no request fails, every answer is one release's;
4. **refused**: a side-by-side roll-out to a server whose memory cannot hold both releases is refused
   before anything changes, naming the server, both figures and ``in_place``.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from model_release.serve.errors import RolloutStopped
from model_release.serve.plan import read_plan
from model_release.serve.record import read_records
from model_release.serve.rollout import roll_out
from model_release.serve.status import fleet_status

from .support import CHANNEL, BalancedLoop, LiveFleet, build_release, fast_options, switches

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MIB = 1 << 20
FOOTPRINT = 300 * MIB


def test_restart_join_in_place_and_a_side_by_side_that_does_not_fit(tmp_path, store, capsys):
    first = build_release(tmp_path, store, "lr", "iris-r1", footprint=FOOTPRINT)
    second = build_release(tmp_path, store, "weak", "iris-r2", promote_it=False, footprint=FOOTPRINT)
    third = build_release(tmp_path, store, "tree", "iris-r3", promote_it=False, footprint=FOOTPRINT)
    live = LiveFleet(tmp_path, store)
    try:
        live.add("serve-1")
        live.add("serve-2")
        live.wait_ready()
        _restart(live, first)
        _join(live, first, store)
        _in_place(live, first, second, store)
        _refused(live, third, store)
    finally:
        live.close()
    with capsys.disabled():
        print(f"\n[fleet] time to ready after a SIGKILLed Triton was started again: {live.restart_s:.2f} s")


def _restart(live: LiveFleet, first) -> None:
    triton, agent = live.tritons["serve-1"], live.agents["serve-1"]
    with BalancedLoop(lambda: live.fleet, [first]) as loop:
        loop.wait_for(100)
        os.kill(triton.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while agent.probe() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not agent.probe(), "the agent reports ready while its Triton is dead"
        loop.wait_for(50)  # the other server takes the traffic
        t0 = time.monotonic()
        triton.restart()  # back on the same ports, serving nothing (explicit mode)
        ready_while_loading = []
        while not agent.ready:
            if agent.probe() and not triton.client().is_model_ready("iris"):
                ready_while_loading.append(time.monotonic() - t0)
            time.sleep(0.01)
        live.restart_s = time.monotonic() - t0
        loop.wait_for(100)
    assert ready_while_loading == []
    assert triton.client().is_model_ready("iris")
    assert loop.traffic.failures == [] and loop.traffic.mixed == [], (loop.traffic.failures[:3], loop.traffic.mixed[:3])
    assert loop.traffic.by_release[first.release_id] >= 250


def _join(live: LiveFleet, first, store) -> None:
    records = len(read_records(store, CHANNEL))
    live.add("serve-3", memory_budget=2 * FOOTPRINT - 50 * MIB)  # room for one release and a little
    live.wait_ready(["serve-3"])
    assert live.agents["serve-3"].state.release == first.release_id
    assert len(read_records(store, CHANNEL)) == records  # no roll-out ran


def _in_place(live: LiveFleet, first, second, store) -> None:
    with BalancedLoop(lambda: live.fleet, [first, second], threads=3) as loop:
        loop.wait_for(100)
        second.promote(store)
        record = roll_out(store, CHANNEL, fast_options(swap="in_place", drain_s=5,
                                                       steps=[{"servers": 1}, {"percent": 100}]))
        loop.wait_for(100)
    assert record.outcome == "done" and {s.after for s in record.servers} == {second.release_id}
    assert loop.traffic.failures == [] and loop.traffic.mixed == [], (loop.traffic.failures[:3], loop.traffic.mixed[:3])
    for name in live.servers:
        assert switches(loop.traffic, name)[-1] == second.release_id and len(switches(loop.traffic, name)) <= 2
    steps = [st.action for st in record.servers[0].steps]
    assert steps[:2] == ["drain", "unload"] and steps[-1] == "switch", steps
    index = live.tritons["serve-1"].client().get_model_repository_index()
    assert sorted(int(m["version"]) for m in index if m["name"] == "iris_model" and m["state"] == "READY") == [2]


def _refused(live: LiveFleet, third, store) -> None:
    third.promote(store)
    generation = read_plan(store, CHANNEL).generation
    with pytest.raises(RolloutStopped) as refused:
        roll_out(store, CHANNEL, fast_options())
    message = refused.value.message
    assert message.startswith(f"roll-out of '{third.release_id}' to channel 'production' refused before any server "
                              "changed: server serve-3 reports 250 MiB free"), message
    assert f"{third.release_id} needs 300 MiB beside iris-r2 (300 MiB, loaded)" in message
    assert "serve.rollout.swap: in_place" in message and "serve-1" not in message
    assert read_plan(store, CHANNEL).generation == generation  # nothing moved
    assert {r["release"] for r in fleet_status(store, CHANNEL)["servers"]} == {"iris-r2"}
