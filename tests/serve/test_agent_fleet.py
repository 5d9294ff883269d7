"""The serving agents and the roll-out's plan, on fake Tritons (tests/serve/fakes.py) and a real local-folder store.

Each agent runs as it does beside a real Triton (its own thread, polling the plan); only its Triton
and repository are fakes. What real Tritons do under traffic is in test_rollout_live.py and
test_fleet_live.py.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from model_release.serve.agent import Agent, AgentConfig, jittered
from model_release.serve.errors import RolloutLocked, RolloutStopped
from model_release.serve.lock import acquire
from model_release.serve.membership import read_states
from model_release.serve.plan import read_plan, step_counts
from model_release.serve.record import read_records
from model_release.serve.release_cache import ReleaseCache
from model_release.serve.rollout import RolloutOptions, roll_out
from model_release.serve.versions import model_digest
from model_release.spec.serve import RolloutSpec
from model_release.store.promote import promote

from .fakes import FakeTriton, pipeline_release
from .support import CHANNEL, local_store

MIB = 1 << 20


class Harness:
    """Agents on fake Tritons, each polling in a thread of its own."""

    def __init__(self, tmp: Path, store, **fake) -> None:
        self.tmp, self.store, self.fake = tmp, store, fake
        self.tritons: dict[str, FakeTriton] = {}
        self.agents: dict[str, Agent] = {}
        self._stops: dict[str, threading.Event] = {}
        self._threads: list[threading.Thread] = []

    def add(self, name: str, *, memory_budget: int | None = None, auto_complete: bool = True, **fake) -> Agent:
        triton = FakeTriton(name, **{**self.fake, **fake})
        config = AgentConfig(name, CHANNEL, f"127.0.0.1:{8000 + len(self.agents)}", f"http://{name}/metrics",
                             auto_complete=auto_complete, poll_s=0.02, heartbeat_s=0.5, memory_budget=memory_budget,
                             drain_grace_s=0.05)
        agent = Agent(config, self.store, triton, triton, ReleaseCache(self.store, self.tmp / "cache", shim=False))
        self.tritons[name], self.agents[name] = triton, agent
        self._stops[name] = threading.Event()
        thread = threading.Thread(target=agent.run, args=(self._stops[name],), daemon=True)
        thread.start()
        self._threads.append(thread)
        return agent

    def start(self, *names: str, **special: dict) -> None:
        """Agents ``names`` (and ``special``: name -> :meth:`add`'s options), each serving the channel's release."""
        for name in names:
            self.add(name)
        for name, kwargs in special.items():
            self.add(name.replace("_", "-"), **kwargs)
        self.wait(lambda: all(a.ready for a in self.agents.values()))

    def silence(self, name: str) -> None:
        self._stops[name].set()

    def wait(self, condition, timeout_s: float = 20) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            assert time.monotonic() < deadline, "timed out waiting"
            time.sleep(0.02)

    def close(self) -> None:
        for stop in self._stops.values():
            stop.set()
        for thread in self._threads:
            thread.join(timeout=10)


@pytest.fixture
def store(tmp_path):
    return local_store(tmp_path)


@pytest.fixture
def releases(tmp_path, store):
    """r1 promoted; r2 (a new leaf, the same postprocess) built, promoted by each test."""
    r1 = pipeline_release(tmp_path / "r1", seed="r1")
    r2 = pipeline_release(tmp_path / "r2", seed="r1", leaf_seed="r2")
    promote(r1, "fake-r1", store, CHANNEL)
    return r1, r2


@pytest.fixture
def harness(tmp_path, store):
    h = Harness(tmp_path, store)
    yield h
    h.close()


def new_leaf(release_dir: Path):
    """``fails`` for a fake Triton that refuses the leaf of the release in ``release_dir`` (and loads any other content)."""
    digest = model_digest(json.loads((release_dir / "release.json").read_text()), "leaf")
    return lambda model, version, content: model == "leaf" and content == digest


def options(**rollout) -> RolloutOptions:
    return RolloutOptions(spec=RolloutSpec(**{"silent_after_s": 2, **rollout}), lock_term_s=2, poll_s=0.02)


def refused(store, release: str, **rollout) -> str:
    """What a roll-out refused before any server changed says after that (the prefix checked here)."""
    with pytest.raises(RolloutStopped) as caught:
        roll_out(store, CHANNEL, options(**rollout))
    prefix = f"roll-out of '{release}' to channel 'production' refused before any server changed: "
    assert caught.value.message.startswith(prefix), caught.value.message
    return caught.value.message[len(prefix):]


def serving(harness: Harness) -> dict[str, str | None]:
    return {name: agent.state.release for name, agent in sorted(harness.agents.items())}


def test_an_agent_serves_the_pointer_s_release_and_only_then_reports_ready(harness, releases):
    agent = harness.add("serve-1")
    harness.wait(lambda: agent.ready)
    triton = harness.tritons["serve-1"]
    pins = {s.model_name: s.model_version for s in triton.loaded["entry"].ensemble_scheduling.step}
    assert pins == {"leaf": 1, "post": 1} and agent.state.release == "fake-r1"
    harness.wait(lambda: read_states(harness.store, CHANNEL)[0].ready)
    [state] = read_states(harness.store, CHANNEL)
    assert (state.name, state.release, state.ready, state.state) == ("serve-1", "fake-r1", True, "serving")


def test_a_roll_out_moves_the_fleet_step_by_step_and_a_server_that_joins_gets_the_current_release(harness, releases, store):
    harness.start("serve-1", "serve-2", "serve-3", "serve-4")
    promote(releases[1], "fake-r2", store, CHANNEL)
    record = roll_out(store, CHANNEL, options(steps=[{"servers": 1}, {"percent": 50}, {"percent": 100}]))

    assert record.outcome == "done" and record.split is None
    assert [(s["step"], s["servers"], len(s["new"])) for s in record.steps] == [(1, 1, 1), (2, 2, 1), (3, 4, 2)]
    assert [(s.server, s.wave, s.before, s.after, s.outcome) for s in record.servers] == [
        ("serve-1", 1, "fake-r1", "fake-r2", "switched"), ("serve-2", 2, "fake-r1", "fake-r2", "switched"),
        ("serve-3", 3, "fake-r1", "fake-r2", "switched"), ("serve-4", 3, "fake-r1", "fake-r2", "switched")]
    # only the changed leaf is copied and loaded; the shared postprocess stays as it was
    assert [(st.action, st.model, st.version) for st in record.servers[0].steps] == [
        ("copy", "leaf", 2), ("load", "leaf", 2), ("skip", "post", 1), ("switch", "entry", 1)]
    plan = read_plan(store, CHANNEL)
    assert (plan.default, plan.previous, plan.servers) == ("fake-r2", "fake-r1", {})
    joined = harness.add("serve-5")  # no roll-out runs for it
    harness.wait(lambda: joined.ready)
    assert serving(harness) == dict.fromkeys(harness.agents, "fake-r2")
    assert read_records(store, CHANNEL)[-1]["release_id"] == "fake-r2"  # the join wrote no roll-out record


def test_a_content_cache_fetches_an_unchanged_model_once(tmp_path, store, releases):
    cache = ReleaseCache(store, tmp_path / "agent-cache", shim=False)
    cache.prepare("fake-r1", {"leaf": 1, "post": 1})
    promote(releases[1], "fake-r2", store, CHANNEL)
    cache.prepare("fake-r2", {"leaf": 2, "post": 1})
    assert [k.split("@")[0] for k in cache.fetched] == ["entry", "leaf", "post", "leaf"]


def test_a_refused_load_stops_the_step_at_its_budget_keeps_the_old_release_there_and_the_server_ready(
        harness, releases, store):
    harness.start("serve-1", serve_2={"fails": new_leaf(releases[1])})
    promote(releases[1], "fake-r2", store, CHANNEL)
    with pytest.raises(RolloutStopped) as stopped:
        roll_out(store, CHANNEL, options())
    message = stopped.value.message
    assert "step 2 stopped: 1 server(s) failed, over its budget of 0: serve-2: server serve-2 refused to load leaf " \
           "version 2 of release fake-r2" in message, message
    assert "On fake-r2: ['serve-1']; on their old release: ['serve-2']" in message
    assert message.endswith("the fleet of channel 'production' is split: fake-r2 on ['serve-1']; fake-r1 on ['serve-2']")
    record = read_records(store, CHANNEL)[-1]
    assert record["outcome"] == "stopped" and record["split"] in message
    assert [(s["server"], s["outcome"]) for s in record["servers"]] == [("serve-1", "switched"), ("serve-2", "failed")]
    refused = harness.tritons["serve-2"]
    assert serving(harness) == {"serve-1": "fake-r2", "serve-2": "fake-r1"}
    # the failed version was loaded again as a copy of the serving one and unloaded: the server is ready
    assert refused.server_ready() and harness.agents["serve-2"].ready
    assert refused.index["leaf"][2] == ("UNAVAILABLE", "unloaded") and 2 not in refused.folders["leaf"]
    time.sleep(0.2)  # the plan does not name serve-2 any more: its agent does not try again
    assert sum(1 for m, vs in refused.loads if m == "leaf" and 2 in vs) == 2  # the refused load, and the copy's


def test_within_its_budget_a_step_names_the_failed_server_and_goes_on(harness, releases, store):
    harness.start("serve-1", "serve-2", serve_3={"fails": new_leaf(releases[1])})
    promote(releases[1], "fake-r2", store, CHANNEL)
    record = roll_out(store, CHANNEL, options(steps=[{"servers": 1}, {"percent": 100, "max_failures": 1}]))
    assert record.outcome == "done" and record.steps[1]["failed"] == ["serve-3"] and record.steps[1]["budget"] == 1
    assert record.split == "the fleet of channel 'production' is split: fake-r2 on ['serve-1', 'serve-2']; " \
                           "fake-r1 on ['serve-3']"
    assert read_plan(store, CHANNEL).servers == {"serve-3": "fake-r1"}  # it keeps the old release, not retried
    assert serving(harness) == {"serve-1": "fake-r2", "serve-2": "fake-r2", "serve-3": "fake-r1"}


def test_a_silent_agent_is_named_and_not_waited_for(harness, releases, store):
    harness.start("serve-1", "serve-2")
    harness.silence("serve-2")
    time.sleep(2.2)  # past silent_after_s
    promote(releases[1], "fake-r2", store, CHANNEL)
    t0 = time.monotonic()
    record = roll_out(store, CHANNEL, options())
    assert time.monotonic() - t0 < 5
    assert record.silent == ["serve-2"] and [s.server for s in record.servers] == ["serve-1"]


def test_a_step_past_its_deadline_names_the_server_that_did_not_report(harness, releases, store):
    harness.start("serve-1", serve_2={"load_time": lambda model, versions: 1.5 if 2 in versions else 0.0})
    promote(releases[1], "fake-r2", store, CHANNEL)
    with pytest.raises(RolloutStopped, match=r"serve-2: did not report fake-r2 within the step's deadline \(0.5 s\)"):
        roll_out(store, CHANNEL, options(deadline_s=0.5))


def test_a_restarted_triton_makes_its_agent_not_ready_until_the_release_is_loaded_again(harness, releases):
    agent = harness.add("serve-1", load_time=lambda model, versions: 0.3)
    harness.wait(lambda: agent.ready)
    triton = harness.tritons["serve-1"]
    triton.kill()
    harness.wait(lambda: not agent.ready)
    assert not agent.probe()
    seen: list[bool] = []
    triton.restart()  # back, empty: the repository is on its disk, nothing is loaded
    t0 = time.monotonic()
    while not agent.ready:
        seen.append(agent.ready)
        time.sleep(0.01)
    assert time.monotonic() - t0 >= 0.5  # two members loaded (0.3 s each) before it said ready
    assert triton.is_ready("entry") and not any(seen)


def test_an_in_place_swap_drains_and_unloads_before_it_loads(harness, releases, store):
    agent = harness.add("serve-1")
    harness.wait(lambda: agent.ready)
    promote(releases[1], "fake-r2", store, CHANNEL)
    triton = harness.tritons["serve-1"]
    states: list[tuple[bool, str]] = []
    watcher = threading.Thread(target=lambda: [states.append((agent.ready, agent.state.state)) or time.sleep(0.005)
                                               for _ in range(400)], daemon=True)
    watcher.start()
    record = roll_out(store, CHANNEL, options(swap="in_place", drain_s=1))
    watcher.join()
    steps = [(st.action, st.model) for st in record.servers[0].steps]
    assert steps[:3] == [("drain", "entry"), ("unload", "entry"), ("unload", "leaf")], steps
    assert ("load", "leaf") in steps and steps[-1] == ("switch", "entry")
    assert triton.index["leaf"] == {1: ("UNAVAILABLE", "unloaded"), 2: ("READY", "")}  # never both loaded
    assert (False, "draining") in states and agent.ready


def test_a_side_by_side_roll_out_that_does_not_fit_is_refused_before_anything_changes(harness, releases, store):
    # serve-2: 200 MiB loaded of its 300, so 100 MiB free, and the new release needs 200
    harness.start(serve_1={"memory_budget": 1000 * MIB}, serve_2={"memory_budget": 300 * MIB})
    harness.wait(lambda: all(a.state.memory for a in harness.agents.values()))
    promote(releases[1], "fake-r2", store, CHANNEL)
    assert read_plan(store, CHANNEL) is None  # no roll-out yet
    message = refused(store, "fake-r2")
    assert message.startswith("server serve-2 reports 100 MiB free"), message
    assert "fake-r2 needs 200 MiB beside fake-r1 (200 MiB, loaded)" in message and "serve.rollout.swap: in_place" in message
    assert "serve-1" not in message
    assert read_plan(store, CHANNEL) is None  # nothing moved
    assert serving(harness) == {"serve-1": "fake-r1", "serve-2": "fake-r1"}
    record = roll_out(store, CHANNEL, options(swap="in_place"))  # the way out the message names
    assert record.outcome == "done" and serving(harness) == {"serve-1": "fake-r2", "serve-2": "fake-r2"}


def test_a_release_that_needs_auto_complete_is_refused_before_a_server_without_it_changes(tmp_path, harness, releases,
                                                                                        store):
    harness.start("serve-1", serve_2={"auto_complete": False})  # beside a Triton run with --disable-auto-complete-config
    promote(pipeline_release(tmp_path / "r2", seed="r2", completes_itself=True), "fake-r2", store, CHANNEL)
    message = refused(store, "fake-r2")
    assert message.startswith("servers ['serve-2'] run with --disable-auto-complete-config"), message
    assert 'model "post" defines auto_complete_config' in message and "Declare every input" in message
    assert [(s["server"], s["outcome"]) for s in read_records(store, CHANNEL)[-1]["servers"]] == [
        ("serve-1", "not reached"), ("serve-2", "not reached")]
    assert serving(harness) == {"serve-1": "fake-r1", "serve-2": "fake-r1"}
    promote(pipeline_release(tmp_path / "r3", seed="r3"), "fake-r3", store, CHANNEL)  # the same, its config whole
    assert roll_out(store, CHANNEL, options()).outcome == "done"
    assert serving(harness) == {"serve-1": "fake-r3", "serve-2": "fake-r3"}


def test_a_member_whose_triton_is_down_is_named_before_anything_changes(harness, releases, store):
    harness.start("serve-1", "serve-2")
    harness.tritons["serve-2"].kill()
    harness.wait(lambda: read_states(store, CHANNEL)[1].state == "triton down")
    promote(releases[1], "fake-r2", store, CHANNEL)
    assert refused(store, "fake-r2").startswith("servers ['serve-2 (triton down)'] cannot take a release now; start "
                                                "their Triton again")
    assert serving(harness)["serve-1"] == "fake-r1"


def test_no_agent_no_roll_out(store, releases):
    with pytest.raises(RolloutStopped, match="has no serving agent with a heartbeat in the last 2 s: start "
                                             "`model-release serve-agent --channel production`"):
        roll_out(store, CHANNEL, options())


def test_a_killed_holder_s_lease_lapses_within_its_term_and_a_live_one_is_never_taken(store):
    live = acquire(store, CHANNEL, term_s=1)
    with pytest.raises(RolloutLocked, match=r"another roll-out of channel 'production' holds .* keeps renewing it"):
        acquire(store, CHANNEL, term_s=1, wait_s=2.5)  # renewed every third of a term throughout
    live._stop.set()  # as SIGKILL: the renewals stop, nothing is released
    live._thread.join()
    t0 = time.monotonic()
    taken = acquire(store, CHANNEL, term_s=1)  # no wait given: a term and a little
    assert time.monotonic() - t0 < 2.5
    with pytest.raises(RolloutLocked, match="taken over by another roll-out"):
        live.renew()
    taken.release()


@pytest.mark.parametrize("fleet, counts", [(1, [1, 1, 1, 1]), (4, [1, 1, 2, 4]), (1000, [1, 100, 500, 1000]),
                                           (7, [1, 1, 4, 7])])
def test_step_sizes_round_up_and_never_go_back(fleet, counts):
    assert step_counts([(1, None), (None, 10), (None, 50), (None, 100)], fleet) == counts


def test_an_agent_waits_0_9_to_1_1_poll_intervals_so_a_fleet_does_not_poll_in_step() -> None:
    import random

    assert jittered(2.0, lambda: 0.0) == pytest.approx(1.8) and jittered(2.0, lambda: 0.5) == pytest.approx(2.0)
    assert jittered(2.0, lambda: 0.999999) == pytest.approx(2.2)
    draw = random.Random(7).random
    waits = [jittered(1.0, draw) for _ in range(2000)]
    assert 0.9 <= min(waits) and max(waits) < 1.1 and sum(waits) / len(waits) == pytest.approx(1.0, abs=0.01)
    assert len({round(w, 4) for w in waits}) > 500  # spread, not a handful of values
