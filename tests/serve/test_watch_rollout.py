"""The watch after each roll-out wave, on two real local Tritons (metrics with p99 summaries) under traffic.

Each test sets a short bake in ``serve.watch`` (seconds, not minutes). The time limits are widened
(floor 50 ms) because the shared 2-core machine moves one server's tail by tens of milliseconds;
the error-rate limits are the defaults. The good release rolls out through ``model-release rollout``
(the terminal's watch, from a spec file); each roll-out leaves the channel's history page showing it.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from model_release.errors import ServiceUnavailable
from model_release.serve.fleet import Server
from model_release.serve.guard import ROLLED_BACK, WatchPlan
from model_release.serve.record import read_records
from model_release.serve.rollout import roll_out
from model_release.serve.status import fleet_status
from model_release.serve.watch import HttpProbe, WatchFailed, WatchInconclusive, WatchSpec
from model_release.store import ledger
from model_release.store.keys import page_key

from ..repository.support import INPUT
from .support import CHANNEL, NAME, LiveFleet, RequestLoop, build_release, edit_postprocess, fast_options

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]

#: a production input the golden set never holds: every probability saturates at 1.0
FAR_ROW = [60.0, -60.0, 60.0, 60.0]
PROBE_BODY = {"inputs": [{"name": INPUT, "shape": [1, 4], "datatype": "FP32", "data": FAR_ROW}]}


def short_watch(**over) -> WatchSpec:
    wide = {"ratio": 1.5, "floor": 50_000.0}
    doc = {"bake_s": 4, "interval_s": 1, "min_requests": 5, "failures": 2, "settle": 2, "budget_s": 8,
           "mean_request_us": wide, "mean_queue_us": wide, "p99_us": wide, **over}
    return WatchSpec.model_validate(doc)


def errors_on_saturated(models) -> None:
    """A tweak: the postprocess answers an error response when a probability reaches 0.99 (golden rows stay below)."""
    anchor = "            # best first;"
    edit_postprocess(models, anchor, (
        "            if scores.max() >= 0.99:\n"
        "                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(\n"
        "                    'postprocess: probability out of the range it handles')))\n"
        "                continue\n") + anchor)


@contextlib.contextmanager
def metrics_fleet(tmp, store, *, break_metrics_of: str | None = None):
    """Two serving Tritons with agents (as the local stack runs them), serving release 1; ``break_metrics_of``'s
    agent reports a metrics endpoint nothing answers."""
    live = LiveFleet(tmp, store)
    try:
        for name in ("serve-1", "serve-2"):
            live.add(name, metrics_url="http://127.0.0.1:9/metrics" if name == break_metrics_of else None)
        live.wait_ready()
        yield live.fleet
    finally:
        live.close()


def serving(store, server: Server) -> str | None:
    return next(r["release"] for r in fleet_status(store, CHANNEL)["servers"] if r["server"] == server.name)


def model_ref(store, release_id):
    model = store.read_manifest(release_id)[0]["model"]
    return model["name"], model["version"]


def cli_rollout(store, tmp_path, *extra: str, timeout_s: float = 240) -> subprocess.CompletedProcess:
    """``model-release rollout`` in a process of its own; on a timeout the failure shows what it had said."""
    args = [sys.executable, "-m", "model_release.cli", "rollout", "--channel", CHANNEL, "--store", store.uri, *extra]
    with subprocess.Popen(args, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"model-release rollout ran over {timeout_s:g} s; it said:\n{err[-4000:]}")
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def channel_page(store) -> str:
    return store.backend.get_bytes(page_key(CHANNEL))[0].decode()


def test_a_good_release_under_steady_traffic_passes_every_wave(tmp_path, store, two_releases):
    first, second = two_releases
    spec = tmp_path / "spec.yaml"  # JSON is YAML: the release's own spec but a short watch and no alias to move
    spec.write_text(json.dumps({"name": NAME, "model": {"name": "iris-classifier", "alias": "candidate"},
                                "promote": {"mlflow_alias": None}, "serve": {"watch": short_watch().model_dump()}}))
    with metrics_fleet(tmp_path, store) as fleet:
        with RequestLoop(fleet, [first, second], max_s=240) as loop:  # the CLI's own start takes a while here
            loop.wait_for(50)
            second.promote(store)
            done = cli_rollout(store, tmp_path, "--spec", str(spec))
        assert done.returncode == 0, done.stderr
        assert [serving(store, s) for s in fleet.servers] == [second.release_id] * 2
    assert f"watch: each step watched by {spec}: bake 4 s" in done.stderr
    assert loop.traffic.failures == [] and loop.traffic.mixed == []
    record = read_records(store, CHANNEL)[-1]
    assert record["outcome"] == "done", record["reason"]
    assert [(w["wave"], w["outcome"]) for w in record["watch"]] == [(1, "pass"), (2, "pass")], record["watch"]
    assert record["watch"][1]["baseline"], "the last wave is judged against the old release's carried figures"
    assert store.read_pointer(CHANNEL).release_id == second.release_id
    page = channel_page(store)  # rewritten by the roll-out as it ended
    section = page[page.index(f"data-rollout='{record['seq']}'"):]
    section = section[:section.index("</details>")]
    assert f"data-release='{second.release_id}' data-outcome='done' open>" in section
    assert re.findall(r"<tr data-wave='(\d)'>", section) == ["1", "2"]
    assert section.count("<span class='badge pass'>pass</span>") == 2 and "mean request time: <b>" in section


def test_errors_only_production_sends_roll_everything_back_within_one_bake(tmp_path, store, two_releases):
    first, _ = two_releases
    bad = build_release(tmp_path, store, "weak", "iris-bad", promote_it=False, tweak=errors_on_saturated)
    spec = short_watch()
    with metrics_fleet(tmp_path, store) as fleet:
        with RequestLoop(fleet, [first, bad], max_s=120) as loop:
            loop.wait_for(50)
            bad.promote(store)
            plan = WatchPlan(spec, probe=HttpProbe([PROBE_BODY], requests=4, timeout_s=5))
            with pytest.raises(WatchFailed, match=f"{ROLLED_BACK}: .*probe error rate 100.0% against 0.0%, limit 1.0%.*every server is back on iris-r1") as caught:
                roll_out(store, CHANNEL, fast_options(watch=plan))
            loop.wait_for(30)
        assert [serving(store, s) for s in fleet.servers] == [first.release_id] * 2
    assert "the ledger marks" in str(caught.value) and "pointer moved back" in str(caught.value)
    facts = caught.value.rollback  # what the release DAG's rollout task puts in the channel's Asset event
    assert facts is not None and (facts["release_id"], facts["to_release"], facts["wave"]) == (bad.release_id, first.release_id, 1)
    assert facts["servers"] == ["serve-1"] and facts["pointer_moved"] and facts["reason"].startswith(ROLLED_BACK)
    assert loop.traffic.failures == [] and loop.traffic.mixed == []  # the golden-like traffic never saw it
    record = read_records(store, CHANNEL)[-1]
    assert record["release_id"] == bad.release_id and record["outcome"] == "rolled back"
    assert record["reason"].startswith(ROLLED_BACK) and record["watch"][0]["outcome"] == "fail"
    assert record["watch"][0]["elapsed_s"] <= spec.bake_s + 1, "rolled back within one bake time"
    assert [s["server"] for s in record["rolled_back"]] == ["serve-1"]
    assert [st["action"] for st in record["rolled_back"][0]["steps"]] == ["skip", "skip", "switch"]  # no model load
    pointer = store.read_pointer(CHANNEL)
    assert (pointer.release_id, pointer.action) == (first.release_id, "rollback")
    entry = ledger.read_entry(store, CHANNEL, *model_ref(store, bad.release_id))[0]
    assert entry["state"] == ledger.REJECTED and entry["reason"].startswith(ledger.IN_PRODUCTION + ROLLED_BACK)
    page = channel_page(store)  # the roll-out, its sentence, and the pointer's move back it made
    assert f"data-release='{bad.release_id}' data-outcome='rolled back' open>" in page
    assert f"<p class='reason bad'>{record['reason']}</p>" in page and "probe error rate: <b>100.0%</b>" in page
    row = re.search(rf"data-action='rollback' data-release='{first.release_id}'>.*?</tr>", page).group(0)
    assert f"{record['reason']} (roll-out #{record['seq']} of {bad.release_id})" in row


def test_no_traffic_during_the_bake_is_inconclusive_and_moves_nothing(tmp_path, store, two_releases):
    first, second = two_releases
    with metrics_fleet(tmp_path, store) as fleet:
        second.promote(store)
        plan = WatchPlan(short_watch(bake_s=2, budget_s=3))
        with pytest.raises(WatchInconclusive, match=r"could not judge the wave in .*\(budget_s 3\): too little traffic: 0 requests.*the wave holds"):
            roll_out(store, CHANNEL, fast_options(watch=plan))
        # the wave holds: the first server on the new release, the second on the old, nothing rolled back
        assert [serving(store, s) for s in fleet.servers] == [second.release_id, first.release_id]
    assert store.read_pointer(CHANNEL).release_id == second.release_id
    record = read_records(store, CHANNEL)[-1]
    assert record["outcome"] == "stopped" and record["rolled_back"] == [] and record["pointer_back"] is None
    assert ledger.read_entry(store, CHANNEL, *model_ref(store, second.release_id)) is None


def test_an_unreachable_metrics_endpoint_is_found_before_the_first_switch_and_moves_nothing(tmp_path, store, two_releases):
    first, second = two_releases
    with metrics_fleet(tmp_path, store, break_metrics_of="serve-2") as fleet:
        second.promote(store)
        plan = WatchPlan(short_watch())
        with pytest.raises(ServiceUnavailable, match=r"refused before any server changed: the metrics endpoint of server "
                                                     r"'serve-2' \(http://127.0.0.1:9/metrics\)"):
            roll_out(store, CHANNEL, fast_options(watch=plan))
        assert [serving(store, s) for s in fleet.servers] == [first.release_id, first.release_id]
    assert store.read_pointer(CHANNEL).release_id == second.release_id
    record = read_records(store, CHANNEL)[-1]
    assert record["outcome"] == "stopped" and "serve-2" in record["reason"]
    assert json.dumps(record["servers"]).count("not reached") == 2


def test_a_production_rejection_stands_against_the_runs_own_settle(tmp_path):
    """The run's finish settles its promoted version released; the watch's rejection must survive it."""
    from .support import local_store

    store = local_store(tmp_path)
    run = {"dag_id": "d", "run_id": "r"}
    assert ledger.claim(store, CHANNEL, "iris", 3, release_id="iris-bad", run=run).go
    ledger.reject_in_production(store, CHANNEL, "iris", 3, release_id="iris-bad", run=run, reason="rolled back")
    kept = ledger.settle(store, CHANNEL, "iris", 3, release_id="iris-bad", run=run, state=ledger.RELEASED)
    assert kept["state"] == ledger.REJECTED and kept["reason"] == ledger.IN_PRODUCTION + "rolled back"
    new, why = ledger.is_new(store, CHANNEL, "iris", "3")
    assert not new and "rejected iris v3" in why and "force_retry" in why
    # just outside: an ordinary rejection is still settled over by a later run's verdict
    ledger.settle(store, CHANNEL, "iris", 4, release_id="iris-4", run=run, state=ledger.REJECTED, reason="canary")
    again = ledger.settle(store, CHANNEL, "iris", 4, release_id="iris-4", run=run, state=ledger.FAILED)
    assert again["state"] == ledger.FAILED
