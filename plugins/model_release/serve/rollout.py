"""Roll a channel's release out: a plan the serving agents follow, step by step.

The roll-out never touches a server. It holds the channel's lease (:mod:`.lock`), numbers the
release's models (:mod:`.versions`), reads the fleet from the agents' heartbeats (:mod:`.membership`),
checks every member before anything moves (:mod:`.preflight`), then for each step of
``serve.rollout.steps``:

1. writes the plan (:mod:`.plan`) naming the step's servers (the earlier steps' and as many more as
   the step says) with the new release, by a conditional write; every other server keeps the old one;
2. waits until each new server's agent reports the release served, ready, at this plan generation
   (they converge in parallel, :mod:`.converge`), or that it failed, or went silent, up to the step's
   deadline; more failures than the step's budget stop the roll-out (the failed servers keep the old
   release, the servers already moved keep the new one, and the record and the message say which
   serve what), fewer are named and put back on the old release;
3. watches the step (:mod:`.guard`: a failure moves the plan back, so every agent re-pins the old
   release, and moves the pointer and the alias back) and bakes it.

When every step is done the plan makes the release the default, so a server that joins later gets
it with no roll-out. A rerun after any interruption converges: servers already serving the release
come first in the order, and their agents report it at once; servers the interrupted run's plan had
moved stay named in every plan the rerun writes (their agents finish what they started, and nothing
moves them back and forth). However it ends, the record is saved
and the channel's history page rewritten (best effort).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ModelReleaseError, StoreError
from ..spec.serve import RolloutSpec, StepSpec
from ..store import keys
from ..store.history_page import refresh_channel_page
from ..store.model_store import ModelStore
from . import preflight
from .converge import SWITCHED
from .errors import RolloutStopped
from .guard import WatchPlan, WaveContext, watch_after_wave, watchable
from .lock import DEFAULT_TERM_S, RolloutLease, acquire
from .membership import AgentState, Membership, membership
from .plan import Plan, read_plan, step_counts, write_plan
from .record import RolloutRecord, ServerRecord, Step, save_record
from .versions import assign_versions
from .warmup import WarmupRule

CPU_SHIM_NOTE = "CPU fleet: ONNX leaves served through the python-backend onnxruntime shim"


@dataclass
class RolloutOptions:
    """How to roll out.

    Attributes:
        spec: ``serve.rollout`` (steps, swap, drain, deadlines, membership).
        lock_term_s: the lease term (a killed roll-out's lease lapses this long after its last renewal).
        lock_wait_s: how long to wait for another roll-out's lease (None: one term, enough for a killed one's).
        warmup: the warm-up rule the agents apply before each switch (None: none).
        run: the run that rolls out (an Airflow run id), for the record.
        watch: how each step is watched (None: not watched).
        poll_s: how often the roll-out reads the step's agents.
    """

    spec: RolloutSpec = field(default_factory=RolloutSpec)
    lock_term_s: float = DEFAULT_TERM_S
    lock_wait_s: float | None = None
    warmup: WarmupRule | None = None
    run: str | None = None
    watch: WatchPlan | None = None
    poll_s: float = 0.25


def desired_release(store: ModelStore, channel: str) -> str:
    """The release the channel pointer names.

    Raises:
        StoreError: the channel has no pointer (nothing promoted yet).
    """
    pointer = store.read_pointer(channel)
    if pointer is None:
        raise StoreError(f"channel {channel!r} has no pointer in {store.uri}: nothing was promoted to it yet; promote a "
                         "release first (`model-release store promote ...`)")
    return pointer.release_id


def roll_out(store: ModelStore, channel: str, options: RolloutOptions, *, release_id: str | None = None,
             progress: Callable[[str], None] | None = None) -> RolloutRecord:
    """Make every member of the channel's fleet serve the channel's release (or ``release_id``), step by step.

    Returns:
        The roll-out's record (also saved in the store).

    Raises:
        RolloutStopped: a check refused the roll-out before anything moved, or a step spent its failure
            budget (the record says which servers serve what). RolloutLocked: another roll-out runs.
        StoreError: no pointer, or the release is missing or damaged.
        WatchFailed, WatchInconclusive, ServiceUnavailable: the watch rolled back or held a step.
    """
    say = progress or (lambda line: None)
    lease = acquire(store, channel, term_s=options.lock_term_s, wait_s=options.lock_wait_s)
    record: RolloutRecord | None = None
    try:
        desired = release_id or desired_release(store, channel)
        got = store.read_manifest(desired)
        if got is None:
            raise StoreError(f"release {desired!r} has no release.json in {store.uri}; the pointer names a damaged release")
        versions = assign_versions(store, channel, desired, got[0])
        fleet = membership(store, channel, silent_after_s=options.spec.silent_after_s)
        record = RolloutRecord(channel, desired, versions, run=options.run,
                               serving=CPU_SHIM_NOTE if any(s.shim for s in fleet.members) else "native backends",
                               silent=[s.name for s in fleet.silent])
        run = _Run(store, channel, desired, options, lease, record, fleet, say)
        run.check(got[0])
        run.steps()
        run.finish()
        return record
    finally:
        lease.release()
        if record is not None:  # the page shows the roll-out as it ended (a view: never fails the roll-out)
            refresh_channel_page(store, channel)


@dataclass
class _Run:
    """One roll-out in progress (the steps of :func:`roll_out`)."""

    store: ModelStore
    channel: str
    release: str
    options: RolloutOptions
    lease: RolloutLease
    record: RolloutRecord
    fleet: Membership
    say: Callable[[str], None]
    plan: Plan = field(init=False)
    old: str | None = field(init=False, default=None)
    failed: dict[str, str] = field(init=False, default_factory=dict)
    moving: set[str] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        self.plan = read_plan(self.store, self.channel) or Plan(self.channel)
        # servers an interrupted roll-out of this release already moved: never moved back in the meantime
        members = {s.name for s in self.fleet.members}
        self.moving = {n for n, r in self.plan.servers.items() if r == self.release and n in members}
        served = Counter(s.release for s in self.fleet.members if s.release and s.release != self.release)
        if served:
            self.old = served.most_common(1)[0][0]
        elif self.plan.release == self.release and self.plan.previous != self.release:
            self.old = self.plan.previous  # a rerun of a roll-out that had moved every server already
        else:
            self.old = self.plan.default if self.plan.default != self.release else None

    # ---- before anything moves -----------------------------------------------------------------
    def check(self, manifest: dict[str, Any]) -> None:
        """Every check of :mod:`.preflight`; a refusal saves the record as stopped with nobody reached."""
        spec = self.options.spec
        try:
            preflight.check_members(self.channel, self.fleet.members, self.fleet.silent, spec.silent_after_s)
            why = preflight.check_auto_complete(self.store, self.release, manifest, self.fleet.members)
            if why is not None:
                raise RolloutStopped(f"{why}. Declare every input and output in that model's config.pbtxt and drop "
                                     "auto_complete_config (the canary then judges the model as it will be served), or "
                                     "serve the channel from Tritons that complete configs (auto_complete true, Triton's default)")
            short, note = preflight.check_memory(self.store, self.release, manifest, self.fleet.members, spec.swap)
            self.record.checks.append(note)
            if short:
                raise RolloutStopped("; ".join(short) + ": side by side, the new release is loaded beside the old one. "
                                     "Set serve.rollout.swap: in_place (each server drains, unloads the old release and "
                                     "loads the new, the step's share of servers out at a time), or give these servers "
                                     "more memory")
            if watchable(self.fleet.fleet, self.options.watch):
                preflight.check_metrics(self.fleet.members, self._sampler())
                self.record.checks.append(f"metrics: {len(self.fleet.members)} endpoint(s) read")
        except ModelReleaseError as exc:
            self.record.reason = exc.message
            self._end("stopped")
            raise exc.restated(f"roll-out of {self.release!r} to channel {self.channel!r} refused before any server "
                               f"changed: {exc.message}") from None

    def _sampler(self) -> Any:
        from .watch.metrics import MetricsReader

        plan = self.options.watch
        return plan.sampler if plan is not None and plan.sampler is not None else MetricsReader(time.monotonic)

    # ---- the steps -----------------------------------------------------------------------------
    def steps(self) -> None:
        spec = self.options.spec
        order = sorted(self.fleet.members, key=lambda s: (s.release != self.release, s.name not in self.moving, s.name))
        counts = step_counts([(st.servers, st.percent) for st in spec.steps], len(order))
        moved: list[str] = []
        watch = self._wave_context()
        for number, (step, count) in enumerate(zip(spec.steps, counts), 1):
            new = [s.name for s in order[:count] if s.name not in moved and s.name not in self.failed]
            summary = {"step": number, "servers": count, "new": new, "budget": step.budget(len(new)), "failed": []}
            self.record.steps.append(summary)
            if not new:
                summary["skipped"] = "no server to add (the fleet is smaller than the step's share)"
                continue
            self.lease.check()
            self._write(moved + new, step=number)
            results = self._await(new, step)
            moved += [n for n, r in results.items() if r.outcome in (SWITCHED, "unchanged")]
            summary["failed"] = [n for n, r in results.items() if r.outcome not in (SWITCHED, "unchanged")]
            self.say(f"step {number}: " + ", ".join(f"{n} {r.outcome}" for n, r in results.items()))
            save_record(self.store, self.record)
            if len(summary["failed"]) > summary["budget"]:
                self._stop(number, summary["failed"], moved)
            if summary["failed"]:  # within the budget: they keep the old release, and the plan no longer names them
                self._write(moved, step=number)
            switched = any(r.outcome == SWITCHED for r in results.values())
            if watch is not None and (switched or self.old or number > 1):
                self._watch(watch, number, step)
            self._bake(step)

    def _write(self, names: list[str], *, step: int) -> None:
        spec = self.options.spec
        self.plan.release, self.plan.previous = self.release, self.old
        self.plan.default = self.old if self.old is not None else self.release
        moving = {n for n in self.moving if n not in self.failed}
        self.plan.servers = {n: self.release for n in [*names, *moving]} | {n: self.old for n in self.failed if self.old}
        self.plan.swap, self.plan.drain_s = spec.swap, spec.drain_s
        self.plan.warmup = self.options.warmup.to_doc() if self.options.warmup and self.options.warmup.active else None
        self.plan.rollout = {"seq": self.record.seq, "step": step, "of": len(spec.steps), "run": self.options.run}
        write_plan(self.store, self.plan)

    def _await(self, names: list[str], step: StepSpec, into: list[ServerRecord] | None = None) -> dict[str, ServerRecord]:
        """Wait for ``names`` to report the release (or fail, or fall silent) within the step's deadline."""
        spec, generation = self.options.spec, self.plan.generation
        deadline = time.monotonic() + (step.deadline_s or spec.deadline_s)
        records = {n: ServerRecord(n, len(self.record.steps)) for n in names}
        (self.record.servers if into is None else into).extend(records.values())
        pending = set(names)
        while pending:
            self.lease.check()
            for name in sorted(pending):
                got = self.store.read_json(keys.serving_agent_key(self.channel, name))
                state = AgentState.from_doc(got[0]) if got else None
                if state is not None and _settle(records[name], state, self.release, generation, spec.silent_after_s):
                    pending.discard(name)
                    if records[name].error:
                        self.failed[name] = records[name].error or ""
            if pending and time.monotonic() > deadline:
                for name in sorted(pending):
                    rec = records[name]
                    rec.outcome, rec.error = "timed out", (f"did not report {self.release} within the step's deadline "
                                                           f"({step.deadline_s or spec.deadline_s:g} s)")
                    self.failed[name] = rec.error
                break
            if pending:
                time.sleep(self.options.poll_s)
        return records

    def _stop(self, number: int, failed: list[str], moved: list[str]) -> None:
        """A step spent its budget: the failed servers keep the old release, the moved ones the new; raise."""
        self._write(moved, step=number)
        reasons = "; ".join(f"{n}: {self.failed[n]}" for n in failed)
        self.record.reason = (f"step {number} stopped: {len(failed)} server(s) failed, over its budget of "
                              f"{self.record.steps[-1]['budget']}: {reasons}")
        self._end("stopped")
        old = [s.name for s in self.fleet.members if s.name not in moved]
        raise RolloutStopped(f"roll-out of {self.release!r} to channel {self.channel!r} stopped: {self.record.reason}. "
                             f"On {self.release}: {moved or 'none'}; on their old release: {old}"
                             + (f". {self.record.split}" if self.record.split else ""))

    # ---- the watch, the bake, the end ----------------------------------------------------------
    def _wave_context(self) -> WaveContext | None:
        if not watchable(self.fleet.fleet, self.options.watch):
            return None
        return WaveContext(self.store, self.fleet.fleet, self.release, self.record, self.lease, self._move_back)

    def _watch(self, ctx: WaveContext, number: int, step: StepSpec) -> None:
        plan = self.options.watch
        assert plan is not None
        if step.bake_s is not None:  # the step's own bake, in place of serve.watch.bake_s
            w = plan.spec
            bake = max(step.bake_s, w.interval_s * w.settle)
            plan = replace(plan, spec=w.model_copy(update={"bake_s": bake, "budget_s": max(w.budget_s, bake)}))
        try:
            verdict = watch_after_wave(ctx, plan, number, self.old)
        except ModelReleaseError as exc:
            self.record.reason = self.record.reason or exc.message
            self._end("rolled back" if self.record.rolled_back else "stopped")
            self.say(f"step {number}: watch stopped the roll-out: {self.record.reason}")
            raise
        finally:
            self.options.watch.baseline = plan.baseline  # carried to the next step's watch
        save_record(self.store, self.record)
        self.say(f"step {number}: watch {verdict.outcome}: {verdict.sentence}")

    def _move_back(self, old: str, names: list[str], step: int) -> list[ServerRecord]:
        """The watch's rollback: the plan back on ``old`` for everyone; wait for ``names`` to re-pin it."""
        self.plan.default, self.plan.servers = old, {}
        self.plan.rollout = {"seq": self.record.seq, "step": step, "of": len(self.options.spec.steps),
                             "run": self.options.run, "rolled_back": True}
        write_plan(self.store, self.plan)
        back = _Run(self.store, self.channel, old, self.options, self.lease, self.record, self.fleet, self.say)
        back.plan = self.plan
        return list(back._await(names, StepSpec(percent=100), into=self.record.rolled_back).values())

    def _bake(self, step: StepSpec) -> None:
        if step.bake_s and self.options.watch is None:
            time.sleep(step.bake_s)  # watched steps bake inside the watch (serve.watch.bake_s, or this step's)

    def finish(self) -> None:
        """Every step done: the release is the default (joining servers get it); the failed keep the old one."""
        self.plan.release, self.plan.previous, self.plan.default = self.release, self.old, self.release
        self.plan.servers = {n: self.old for n in self.failed if self.old}
        self.plan.rollout = {"seq": self.record.seq, "step": len(self.options.spec.steps),
                             "of": len(self.options.spec.steps), "run": self.options.run, "done": True}
        write_plan(self.store, self.plan)
        self._end("done")

    def _end(self, outcome: str) -> None:
        reached = {s.server for s in self.record.servers}
        number = len(self.record.steps) or 1
        self.record.servers += [ServerRecord(s.name, number, before=s.release, outcome="not reached")
                                for s in self.fleet.members if s.name not in reached]
        self.record.split = split_message(self.store, self.channel, self.options.spec.silent_after_s)
        self.record.outcome, self.record.finished_at = outcome, _now()
        save_record(self.store, self.record)
        if self.record.split:
            self.say(self.record.split)


def _settle(rec: ServerRecord, state: AgentState, release: str, generation: int, silent_after_s: float) -> bool:
    """Fill ``rec`` from the agent's state when it settled (served, failed, silent); True when it did."""
    last = state.last or {}
    if state.release == release and state.ready and state.generation >= generation:
        fresh = last.get("release") == release and int(last.get("generation", -1)) >= generation
        rec.outcome = SWITCHED if fresh and last.get("outcome") == SWITCHED else "unchanged"
        rec.before, rec.after = (last.get("before") if fresh else release), release
        rec.steps = [Step(**s) for s in last.get("steps", [])] if fresh else []
        rec.seconds = float(last.get("seconds", 0.0)) if fresh else 0.0
        return True
    message = state.failed_on(release, generation)
    if message is not None:
        rec.outcome, rec.error, rec.before, rec.after = "failed", message, state.release, state.release
        return True
    if state.silent(silent_after_s):
        rec.outcome, rec.error = "silent", f"its agent has not reported for over {silent_after_s:g} s"
        rec.before = rec.after = state.release
        return True
    return False


def split_message(store: ModelStore, channel: str, silent_after_s: float) -> str | None:
    """``the fleet of channel C is split: R2 on [a]; R1 on [b]`` when its members serve more than one release."""
    by_release: dict[str, list[str]] = {}
    for state in membership(store, channel, silent_after_s=silent_after_s).members:
        by_release.setdefault(state.release or "nothing", []).append(state.name)
    if len(by_release) < 2:
        return None
    return f"the fleet of channel {channel!r} is split: " + "; ".join(
        f"{release} on {names}" for release, names in sorted(by_release.items(), key=lambda kv: -len(kv[1])))


def _now() -> str:
    from ..store.documents import utcnow

    return utcnow()
