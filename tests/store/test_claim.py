"""The claim every entry point takes (store/claim.py): held by one live run, lapsing when its holder dies, settled once.

Unit tests on a folder store; the race of the CLI's claim against the DAG's start on the moto S3
server is tests/store/test_claim_race.py.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from model_release.errors import ClaimHeld, ConflictError
from model_release.intake.candidate import Candidate
from model_release.intake.members import Lineage
from model_release.store import ledger, open_store
from model_release.store.claim import Claim, Holder, Lease, ledger_version, settle, take
from model_release.workspace import Workspace

CHANNEL = "production"
CANDIDATE = Candidate("iris", "3", "candidate", "run-3")
DAG_RUN = {"dag_id": "model_release", "run_id": "manual__2026-12-06T07:00:00+00:00"}


def _store(tmp_path):
    return open_store((tmp_path / "store").as_uri())


def _take(store, holder, release_id, candidate=CANDIDATE, **kw):
    return take(store, CHANNEL, candidate, release_id=release_id, holder=holder, retry_rejected=True, retry_released=True, **kw)


def test_a_version_a_cli_process_holds_is_refused_with_one_line_naming_the_run_and_its_start(tmp_path) -> None:
    store = _store(tmp_path)
    cli = Holder.process()
    claim, _ = _take(store, cli, "iris-cli")
    assert claim is not None and claim.version == "3" and claim.lease_s == 120.0
    with pytest.raises(ClaimHeld) as held:
        _take(store, Holder.airflow(DAG_RUN), "iris-dag", is_active=lambda run: True)
    line = str(held.value)
    assert "\n" not in line and held.value.exit_code == 6
    assert line.startswith(f"iris v3 for channel 'production' is held by run {cli.run['run_id']!r}, started "), line
    assert claim.started_at in line and "(release iris-cli)" in line and "lapses 120 s after its last renewal" in line
    assert re.fullmatch(r"cli .+@.+ pid \d+", cli.run["run_id"])
    # nothing was written by the refused run
    assert ledger.read_entry(store, CHANNEL, "iris", "3")[0]["release_id"] == "iris-cli"


def test_a_dag_runs_claim_refuses_a_terminal_naming_the_dag(tmp_path) -> None:
    store = _store(tmp_path)
    claim, _ = _take(store, Holder.airflow(DAG_RUN), "iris-dag", is_active=lambda run: True)
    with pytest.raises(ClaimHeld, match=r"is held by run 'manual__2026-12-06T07:00:00\+00:00' of DAG 'model_release', "
                                        r"started \S+ \(release iris-dag\); two runs never release one version"):
        _take(store, Holder.process(), "iris-cli")  # a terminal cannot ask Airflow: a fresh DAG claim holds


def test_a_process_claim_lapses_after_its_lease_unless_renewed(tmp_path) -> None:
    store = _store(tmp_path)
    short = Holder({"dag_id": None, "run_id": "cli someone@elsewhere pid 1"}, lease_s=0.4)
    first, _ = _take(store, short, "iris-dead")
    with Lease(store, first, every_s=0.1):  # renewed while it runs: held past its lease
        time.sleep(0.7)
        with pytest.raises(ClaimHeld):
            _take(store, Holder.airflow(DAG_RUN), "iris-dag", is_active=lambda run: True)
    time.sleep(0.6)  # the process died (no renewal): a DAG run takes the claim over, saying whose it was
    taken, why = _take(store, Holder.airflow(DAG_RUN), "iris-dag", is_active=lambda run: True)
    assert taken is not None and "took over the claim of run 'cli someone@elsewhere pid 1'" in why
    # the stalled process finds out before it would promote
    lease = Lease(store, first)
    with pytest.raises(ConflictError, match=r"is now release iris-dag's \(claimed\).*nothing is promoted by this release"):
        lease.check()


def test_a_dead_airflow_run_is_taken_over_when_airflow_says_so_or_a_day_after_its_claim(tmp_path) -> None:
    store = _store(tmp_path)
    _take(store, Holder.airflow(DAG_RUN), "iris-dag", is_active=lambda run: True)
    again, why = _take(store, Holder.airflow({**DAG_RUN, "run_id": "manual__2"}), "iris-dag2", is_active=lambda run: False)
    assert again is not None and "no longer running" in why
    # seen from a terminal, an Airflow run's claim holds until a day after it was taken
    key = ledger.entry_key(CHANNEL, "iris", "3")
    entry, _ = store.read_json(key)
    store.backend.put_bytes(key, json.dumps({**entry, "started_at": "2026-01-01T00:00:00+00:00"}).encode())
    taken, why = _take(store, Holder.process(), "iris-cli")
    assert taken is not None and "took over the claim of run 'manual__2'" in why


def test_a_pipeline_is_claimed_by_its_member_combination(tmp_path) -> None:
    store = _store(tmp_path)
    members = {"small": Lineage("small", "release", "iris", "3", "run-3", "candidate"),
               "large": Lineage("large", "registered", "iris-large", "7", "run-7", "candidate")}
    pipeline = Candidate("iris", "3", "candidate", "run-3", members)
    claim, _ = _take(store, Holder.process(), "iris-p", candidate=pipeline)
    assert claim.version == ledger_version(pipeline) == ledger.pipeline_version("3", "large=iris-large/7,small=iris/3")
    assert pipeline.describe() == "iris v3 @candidate with large=iris-large v7 @candidate"
    # the plain version is another entry: not held
    assert _take(store, Holder.process(), "iris-plain")[0] is not None
    assert Claim.from_dict(json.loads(json.dumps(claim.to_dict()))).candidate == pipeline


def test_settle_records_how_the_run_ended_from_its_workspace(tmp_path) -> None:
    store = _store(tmp_path)
    ws = Workspace("iris-cli", tmp_path / "ws")
    claim, _ = _take(store, Holder.process(), ws.release_id)
    ws.save_error("canary", {"stage": "canary", "kind": "canary", "user": True, "message": "accuracy 0.62 < 0.9"})
    state, reason, entry = settle(store, claim.to_dict(), ws, run=claim.run, promote_asked=True)
    assert (state, entry["state"]) == (ledger.REJECTED, ledger.REJECTED) and reason.startswith("canary: [canary] accuracy")
    assert "lease_s" not in entry  # a settled entry holds nothing
    # a run asked not to promote drops its claim
    other = Workspace("iris-other", tmp_path / "ws")
    claim, _ = _take(store, Holder.process(), other.release_id, candidate=Candidate("iris", "4"))
    assert settle(store, claim.to_dict(), other, run=claim.run, promote_asked=False)[0] is None
    assert ledger.read_entry(store, CHANNEL, "iris", "4") is None
