"""The channel's ledger: a version is claimed by one run, settled once, and a rejected one is not retried."""

from __future__ import annotations

import threading

from model_release.store import ledger
from model_release.store import open_store

RUN_A = {"dag_id": "model_release__iris", "run_id": "scheduled__1"}
RUN_B = {"dag_id": "model_release__iris", "run_id": "scheduled__2"}


def _store(tmp_path):
    return open_store((tmp_path / "store").as_uri())


def test_of_two_runs_that_find_a_version_new_only_one_claims_it(tmp_path) -> None:
    store = _store(tmp_path)
    decisions = {}

    def claim(name, run):
        decisions[name] = ledger.claim(store, "production", "iris", "3", release_id=f"iris-{name}", run=run)

    threads = [threading.Thread(target=claim, args=(n, r)) for n, r in (("a", RUN_A), ("b", RUN_B))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(d.go for d in decisions.values()) == [False, True]
    loser = next(d for d in decisions.values() if not d.go)
    assert loser.held and "is held by run 'scheduled__" in loser.reason and "two runs never release one version" in loser.reason


def test_a_retried_start_keeps_its_own_claim_and_a_dead_runs_claim_is_taken_over(tmp_path) -> None:
    store = _store(tmp_path)
    assert ledger.claim(store, "production", "iris", "3", release_id="iris-a", run=RUN_A).go
    assert ledger.claim(store, "production", "iris", "3", release_id="iris-a", run=RUN_A).go
    taken = ledger.claim(store, "production", "iris", "3", release_id="iris-b", run=RUN_B, is_active=lambda run: False)
    assert taken.go and "no longer running" in taken.reason
    assert ledger.read_entry(store, "production", "iris", "3")[0]["release_id"] == "iris-b"


def test_a_rejected_version_is_not_claimed_again_unless_forced(tmp_path) -> None:
    store = _store(tmp_path)
    ledger.claim(store, "production", "iris", "4", release_id="iris-a", run=RUN_A)
    state, reason = ledger.verdict_of({"canary": {"kind": "canary", "user": True, "message": "accuracy 0.62 < 0.9"}}, False)
    assert state == ledger.REJECTED
    ledger.settle(store, "production", "iris", "4", release_id="iris-a", run=RUN_A, state=state, reason=reason)
    new, why = ledger.is_new(store, "production", "iris", "4")
    assert not new and "rejected iris v4 in release iris-a" in why and "accuracy 0.62" in why and "force_retry=true" in why
    refused = ledger.claim(store, "production", "iris", "4", release_id="iris-b", run=RUN_B)
    assert not refused.go and "force_retry=true" in refused.reason
    assert ledger.claim(store, "production", "iris", "4", release_id="iris-b", run=RUN_B, retry_rejected=True).go


def test_an_outage_is_failed_so_the_schedule_tries_again(tmp_path) -> None:
    store = _store(tmp_path)
    ledger.claim(store, "production", "iris", "5", release_id="iris-a", run=RUN_A)
    state, _ = ledger.verdict_of({"promote": {"kind": "unavailable", "user": False, "message": "S3 down"}}, False)
    assert state == ledger.FAILED
    ledger.settle(store, "production", "iris", "5", release_id="iris-a", run=RUN_A, state=state)
    assert ledger.is_new(store, "production", "iris", "5")[0]
    assert ledger.claim(store, "production", "iris", "5", release_id="iris-b", run=RUN_B).go
    # the first run's late settle no longer owns the entry: it writes nothing
    assert ledger.settle(store, "production", "iris", "5", release_id="iris-a", run=RUN_A, state=ledger.FAILED) is None


def test_a_killed_run_with_no_recorded_error_counts_as_failed() -> None:
    assert ledger.verdict_of({}, False)[0] == ledger.FAILED
    assert ledger.verdict_of({}, True) == (ledger.RELEASED, "")
    assert ledger.verdict_of({}, False, promote_asked=False)[0] is None


#: what the stage runner records when the canary could not decide (pipeline.run_stage)
INCONCLUSIVE_CANARY = {"kind": "canary_inconclusive", "user": False, "gate": False, "inconclusive": True,
                       "message": "the canary of iris (iris-a) is inconclusive: no gate failed, but p99 ... straddles ..."}


def test_an_inconclusive_canary_leaves_the_version_open_for_the_schedule(tmp_path) -> None:
    store = _store(tmp_path)
    ledger.claim(store, "production", "iris", "6", release_id="iris-a", run=RUN_A)
    state, reason = ledger.verdict_of({"canary": INCONCLUSIVE_CANARY}, False)
    assert state == ledger.INCONCLUSIVE and reason.startswith("canary: [canary_inconclusive] the canary of iris")
    entry = ledger.settle(store, "production", "iris", "6", release_id="iris-a", run=RUN_A, state=state, reason=reason)
    assert entry["state"] == "inconclusive" and ledger.check_state(entry["state"]) == "inconclusive"
    new, why = ledger.is_new(store, "production", "iris", "6")
    assert new and "still open" in why and "the canary of release iris-a was inconclusive" in why
    # the schedule's next run claims it without force_retry
    assert ledger.claim(store, "production", "iris", "6", release_id="iris-b", run=RUN_B).go


def test_a_gate_that_failed_rejects_even_beside_an_inconclusive_stage() -> None:
    errors = {"canary": INCONCLUSIVE_CANARY, "promote": {"kind": "canary", "user": True, "message": "not passed"}}
    assert ledger.verdict_of(errors, False)[0] == ledger.REJECTED
    # an outage beside an inconclusive canary: the canary's verdict is what the version is (still open)
    outage = {"canary": INCONCLUSIVE_CANARY, "rollout": {"kind": "unavailable", "user": False, "message": "down"}}
    assert ledger.verdict_of(outage, False)[0] == ledger.INCONCLUSIVE


def test_a_version_rejected_in_production_stays_rejected_whatever_a_later_canary_concluded(tmp_path) -> None:
    store = _store(tmp_path)
    ledger.claim(store, "production", "iris", "7", release_id="iris-a", run=RUN_A)
    ledger.reject_in_production(store, "production", "iris", "7", release_id="iris-a", run=RUN_A, reason="error rate 4%")
    kept = ledger.settle(store, "production", "iris", "7", release_id="iris-a", run=RUN_A, state=ledger.INCONCLUSIVE)
    assert kept["state"] == ledger.REJECTED and kept["reason"].startswith(ledger.IN_PRODUCTION)
    assert not ledger.is_new(store, "production", "iris", "7")[0]


def test_settle_refuses_a_state_that_is_not_final() -> None:
    import pytest

    with pytest.raises(ValueError, match="valid: released, rejected, failed, inconclusive"):
        ledger.settle(None, "production", "iris", "1", release_id="r", run=RUN_A, state=ledger.CLAIMED)
