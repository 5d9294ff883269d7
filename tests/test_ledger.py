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
    assert "is being released by run" in loser.reason and "two runs never release one version" in loser.reason


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
