"""Rollback to an earlier verified release, and retention that never deletes a needed one."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from model_release.errors import UserError, ConflictError, SpecError, StoreError
from model_release.store import (history, list_releases, promote, read_channel, retention, rollback, stage_release,
                                 verify_release)
from model_release.store.keys import MARKER

from .support import history_agrees, make_release

pytestmark = pytest.mark.integration


def _three(kit, tmp_path):
    store = kit.store()
    for name in ("r1", "r2", "r3"):
        promote(make_release(tmp_path / name, small=2, seed=name, version=name[1]), name, store, "production")
    return store


def test_rollback_goes_to_the_previous_release_then_further(kit, tmp_path):
    store = _three(kit, tmp_path)
    first = rollback(store, "production")
    assert (first.from_release, first.to_release) == ("r3", "r2")
    assert read_channel(store, "production").release_id == "r2"
    second = rollback(store, "production")  # r3 was rolled back from: not a target again
    assert (second.from_release, second.to_release) == ("r2", "r1")
    entries = history_agrees(store, "production")
    assert [(e.release_id, e.action) for e in entries] == [
        ("r1", "promote"), ("r2", "promote"), ("r3", "promote"), ("r2", "rollback"), ("r1", "rollback")]
    with pytest.raises(UserError, match="has no earlier release to roll back to in its history") as caught:
        rollback(store, "production")
    assert caught.value.exit_code == 2  # a request that cannot be met, not an outage (4)


def test_rollback_to_a_named_release_and_refusals(kit, tmp_path):
    store = _three(kit, tmp_path)
    assert rollback(store, "production", "r1").to_release == "r1"
    # an incomplete release (staged but its marker lost) is refused
    stage_release(make_release(tmp_path / "r4", small=1, seed="r4"), "r4", store)
    store.backend.delete(["releases/r4/" + MARKER])
    with pytest.raises(StoreError, match="not a complete, verified release"):
        rollback(store, "production", "r4")
    # so is a release whose objects no longer verify
    store.backend.put_bytes("releases/r2/models/iris/1/model.py", b"# tampered\n")
    with pytest.raises(StoreError, match="model.py"):
        rollback(store, "production", "r2")
    with pytest.raises(StoreError, match="does-not-exist"):
        rollback(store, "production", "does-not-exist")
    assert read_channel(store, "production").release_id == "r1"
    with pytest.raises(UserError, match="points at nothing yet, so there is nothing to roll back"):
        rollback(store, "staging")


def test_rollback_conflicts_when_the_channel_moved(kit, tmp_path):
    store = _three(kit, tmp_path)
    with pytest.raises(ConflictError) as err:
        rollback(store, "production", "r1", expected_current="r2")
    assert err.value.winner == "r3"
    assert read_channel(store, "production").release_id == "r3"


def test_retention_deletes_only_unneeded_old_releases(kit, tmp_path):
    store = kit.store()
    rels = {f"p{i}": make_release(tmp_path / f"p{i}", small=1, seed=f"p{i}") for i in range(1, 6)}
    for rid, rel in rels.items():
        promote(rel, rid, store, "production")
    stage_release(make_release(tmp_path / "orphan", small=1, seed="orphan"), "orphan", store)  # never promoted
    # s1 is the newest release (retention never deletes the newest verified one; it is pointed at anyway)
    promote(make_release(tmp_path / "s1", small=1, seed="s1"), "s1", store, "staging")
    promote(rels["p1"], "p1", store, "canary")  # p1 is current on canary
    later = datetime.now(timezone.utc) + timedelta(days=30)

    assert retention(store, 2, protect_days=7) == []  # everything is younger than a week
    assert sorted(retention(store, 2, protect_days=7, now=later, dry_run=True)) == ["orphan", "p2", "p3"]
    assert {r.release_id for r in list_releases(store)} >= {"orphan", "p2", "p3"}
    deleted = retention(store, 2, protect_days=7, now=later)
    assert sorted(deleted) == ["orphan", "p2", "p3"]
    left = {r.release_id: r for r in list_releases(store)}
    assert sorted(left) == ["p1", "p4", "p5", "s1"]
    assert left["p5"].channels == ["production"] and left["p1"].channels == ["canary"]
    assert all(verify_release(store, rid).ok for rid in left)
    assert list(store.backend.list("releases/p2/")) == []
    # keep=0 still never deletes a current release
    assert sorted(retention(store, 0, protect_days=0, now=later)) == ["p4"]
    assert {r.release_id for r in list_releases(store)} == {"p1", "p5", "s1"}
    assert [e.release_id for e in history(store, "production")] == ["p1", "p2", "p3", "p4", "p5"]


def test_retention_refuses_bad_arguments(kit):
    with pytest.raises(SpecError, match="keep"):
        retention(kit.store(), -1)
    with pytest.raises(SpecError, match="protect_days"):
        retention(kit.store(), 1, protect_days=-2)
