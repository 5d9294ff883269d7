"""Roll-outs over 10, 100 and 1,000 simulated servers: how the plan's time grows with the fleet.

Run:  .venv/bin/python benchmarks/bench_fleet_scale.py [--sizes 10 100 1000] [--load-s 1.0] [--fail 0.01]

Each server is the product's own serving agent (model_release.serve.agent, in a thread of this process)
against a fake Triton (tests/serve/fakes.py: the repository API's load, unload, ready and index calls,
each load taking a time drawn from a log-normal distribution of median ``--load-s`` and shape 0.25,
and a load failing with probability ``--fail``). The store is in memory (the conditional writes of S3
under one lock): on this machine a thousand agents heartbeating into the local-folder store would
measure its fsyncs, not the roll-out. Two small releases (a changed leaf, a shared postprocess, a
pinned ensemble) are promoted with the store's own promote.

Printed, all from this one run, per fleet size: the roll-out's time (steps one server, 10%, 50%,
100%, each with a failure budget of 2% of its new servers and at least one), the servers whose load
failed (named), the ratio time(1,000) / time(10) at the same per-server load time (goal: at most 3x,
the step count's and the load distribution's tail, not the fleet's size), and the machine's load.
Then a step that stops at its budget: 100 servers with 10% failing loads, a budget of 2%.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "plugins"))

STEPS = [{"servers": 1}, {"percent": 10}, {"percent": 50}, {"percent": 100}]


def _store(tmp: Path):
    """Two releases promoted into a folder store (pointer back on r1), copied into memory."""
    from model_release.store.channels import rollback
    from model_release.store.model_store import ModelStore, open_store
    from model_release.store.promote import promote
    from tests.serve.fakes import MemoryBackend, pipeline_release

    disk = open_store((tmp / "store").as_uri())
    promote(pipeline_release(tmp / "r1", seed="r1"), "sim-r1", disk, "production")
    promote(pipeline_release(tmp / "r2", seed="r1", leaf_seed="r2"), "sim-r2", disk, "production")
    rollback(disk, "production")  # the fleet starts on r1; the roll-out moves it to r2
    return lambda: ModelStore(MemoryBackend.copy_of(disk.backend))


class SimFleet:
    """``n`` agents on fake Tritons, polling every ``poll_s`` (started at random offsets, as pods do)."""

    def __init__(self, store, n: int, *, load_s: float, seed: int, cache: Path, poll_s: float) -> None:
        from model_release.serve.agent import Agent, AgentConfig
        from model_release.serve.release_cache import ReleaseCache
        from tests.serve.fakes import FakeTriton

        rng = random.Random(seed)
        draws = threading.Lock()

        def load_time(model: str, versions: list[int]) -> float:
            with draws:
                return rng.lognormvariate(0, 0.25) * load_s

        shared = ReleaseCache(store, cache, shim=False)  # one cache folder: each content fetched once per run
        self.agents, self.stop, self.threads = [], threading.Event(), []
        for i in range(n):
            name = f"sim-{i:04d}"
            triton = FakeTriton(name, load_time=load_time)
            config = AgentConfig(name, "production", f"10.0.{i // 250}.{i % 250}:8000", poll_s=poll_s, heartbeat_s=10.0)
            self.agents.append(Agent(config, store, triton, triton, shared))
        for agent in self.agents:
            offset = rng.random() * poll_s
            thread = threading.Thread(target=self._run, args=(agent, offset), daemon=True)
            thread.start()
            self.threads.append(thread)

    def _run(self, agent, offset: float) -> None:
        if not self.stop.wait(offset):
            agent.run(self.stop)

    def wait_ready(self, timeout_s: float = 600) -> float:
        t0 = time.monotonic()
        while not all(a.ready for a in self.agents):
            if time.monotonic() - t0 > timeout_s:
                raise TimeoutError(f"{sum(not a.ready for a in self.agents)} agents not ready in {timeout_s:g} s")
            time.sleep(0.2)
        return time.monotonic() - t0

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)


def roll(store, *, budget_percent: float, deadline_s: float) -> tuple[float, object | None, str | None]:
    from model_release.serve.errors import RolloutStopped
    from model_release.serve.rollout import RolloutOptions, roll_out
    from model_release.spec.serve import RolloutSpec

    steps = [{**s, "max_failures": 1, "max_failed_percent": budget_percent} for s in STEPS]
    options = RolloutOptions(spec=RolloutSpec(steps=steps, deadline_s=deadline_s, silent_after_s=60), poll_s=0.25)
    t0 = time.monotonic()
    try:
        record = roll_out(store, "production", options, release_id="sim-r2")
        return time.monotonic() - t0, record, None
    except RolloutStopped as exc:
        return time.monotonic() - t0, None, exc.message


def one_size(make_store, n: int, args, tmp: Path, *, fail: float, budget: float) -> dict:
    store = make_store()
    fleet = SimFleet(store, n, load_s=args.load_s, seed=n, cache=tmp / f"cache-{n}", poll_s=args.poll_s)
    try:
        start_s = fleet.wait_ready()
        fails = _failing(fail, n)  # one draw per load, over the whole fleet
        for agent in fleet.agents:  # loads fail from now on (the start-up loads of r1 all succeeded)
            agent.control.fails = fails
        seconds, record, stopped = roll(store, budget_percent=budget, deadline_s=args.deadline_s)
    finally:
        fleet.close()
    from model_release.serve.record import read_records

    saved = read_records(store, "production")[-1]  # the record names the failed servers, however the roll-out ended
    failed = sorted({name for s in saved["steps"] for name in s.get("failed", [])})
    out = {"servers": n, "fleet_ready_s": round(start_s, 2), "rollout_s": round(seconds, 2)}
    if record is not None:
        out.update(outcome=record.outcome, steps=[{"step": s["step"], "servers": s["servers"], "new": len(s["new"]),
                                                   "budget": s["budget"], "failed": len(s["failed"])} for s in record.steps],
                   failed_servers=failed, switched=sum(1 for s in record.servers if s.outcome == "switched"))
    else:
        out.update(outcome="stopped", stopped=stopped[:300] + " ...", failed_servers=failed,
                   steps=[{"step": s["step"], "new": len(s["new"]), "budget": s["budget"], "failed": len(s["failed"])}
                          for s in saved["steps"]])
    return out


def _failing(fail: float, seed: int):
    rng, lock = random.Random(seed * 7919), threading.Lock()

    def fails(model: str, version: int, digest: str) -> bool:
        with lock:
            return rng.random() < fail

    return fails


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--load-s", type=float, default=1.0, help="median seconds of one load (log-normal, shape 0.25)")
    parser.add_argument("--fail", type=float, default=0.01, help="share of loads that fail")
    parser.add_argument("--poll-s", type=float, default=1.0, help="how often each agent reads the plan")
    parser.add_argument("--deadline-s", type=float, default=120.0)
    args = parser.parse_args(argv)
    import logging

    logging.disable(logging.WARNING)  # a thousand agents logging their failed loads: the record names them
    tmp = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    try:
        make_store = _store(tmp)
        results = [one_size(make_store, n, args, tmp, fail=args.fail, budget=2.0) for n in args.sizes]
        at_budget = one_size(make_store, 100, args, tmp, fail=0.10, budget=2.0)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    by = {r["servers"]: r["rollout_s"] for r in results}
    ratio = round(by[max(by)] / by[min(by)], 2) if len(by) > 1 else None
    print(json.dumps({
        "per_size": results,
        f"ratio_time_{max(by)}_over_time_{min(by)}": ratio, "goal_at_most": 3.0,
        "within_goal": ratio is not None and ratio <= 3.0,
        "median_load_s": args.load_s, "load_failure_share": args.fail, "agent_poll_s": args.poll_s,
        "a_step_at_its_budget": {k: at_budget.get(k) for k in ("servers", "outcome", "steps", "failed_servers", "stopped")},
        "machine_load_1min": os.getloadavg()[0], "cores": os.cpu_count(),
    }, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
