"""Concurrent promotions: exactly one wins, no lost update, the loser names the winner."""

from __future__ import annotations

import threading

import pytest

from model_release.errors import ConflictError
from model_release.store import UNSET, move_channel, promote, read_channel, stage_release

from .support import TriggerBackend, history_agrees, make_release

pytestmark = pytest.mark.integration

TRIALS = 50


@pytest.mark.slow  # 44 s alone against the moto server, 115 s inside make test: its file goes to a worker early
def test_two_promotions_race_fifty_times(kit, tmp_path):
    store = kit.store()
    rel_a = make_release(tmp_path / "a", small=2, seed="a")
    rel_b = make_release(tmp_path / "b", small=2, seed="b")
    current = None
    for trial in range(TRIALS):
        ids = {"a": f"race-{trial:02d}-a", "b": f"race-{trial:02d}-b"}
        barrier = threading.Barrier(2)
        outcome: dict[str, object] = {}

        def run(side: str, rel) -> None:
            stage_release(rel, ids[side], store)  # upload both first so the threads meet at the pointer
            barrier.wait()
            try:
                outcome[side] = promote(rel, ids[side], store, "production", expected_current=current)
            except ConflictError as exc:
                outcome[side] = exc

        threads = [threading.Thread(target=run, args=("a", rel_a)), threading.Thread(target=run, args=("b", rel_b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        winners = [s for s, o in outcome.items() if not isinstance(o, Exception)]
        losers = [s for s, o in outcome.items() if isinstance(o, ConflictError)]
        assert len(winners) == 1 and len(losers) == 1, (trial, outcome)
        won, lost = ids[winners[0]], outcome[losers[0]]
        assert lost.winner == won and repr(won) in str(lost), str(lost)
        assert read_channel(store, "production").release_id == won
        current = won
    entries = history_agrees(store, "production")
    assert len(entries) == TRIALS  # one move per trial: no lost and no extra update


def test_unconditioned_promotions_never_lose_an_update(kit, tmp_path):
    """Without expected_current both may succeed one after the other, but every success is in history."""
    store = kit.store()
    rels = [make_release(tmp_path / s, small=1, seed=s) for s in "abcd"]
    for i, rel in enumerate(rels):
        stage_release(rel, f"free-{i}", store)
    barrier = threading.Barrier(len(rels))
    won: list[str] = []
    lost: list[ConflictError] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            promote(rels[i], f"free-{i}", store, "production", expected_current=UNSET)
            won.append(f"free-{i}")
        except ConflictError as exc:
            lost.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(rels))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(won) + len(lost) == len(rels) and won
    entries = history_agrees(store, "production")
    assert sorted(e.release_id for e in entries) == sorted(won)
    assert all(exc.winner in won for exc in lost)


def test_pointer_moved_between_read_and_write_is_a_conflict(kit, tmp_path):
    """The conditional write itself (not the expected_current check) refuses a stale pointer."""
    store = kit.store()
    for name in ("one", "two", "three"):
        stage_release(make_release(tmp_path / name, small=1, seed=name), name, store)
    move_channel(store, "production", "one")
    other = kit.store()

    def someone_else_moves_it() -> None:
        move_channel(other, "production", "two")

    racing = kit.store()
    racing.backend = TriggerBackend(racing.backend, lambda op, key: op == "put_bytes" and key == "channels/production.json",
                                    someone_else_moves_it)
    with pytest.raises(ConflictError) as err:
        move_channel(racing, "production", "three")  # read "one", then "two" lands before its write
    assert err.value.winner == "two" and "'two' won" in str(err.value)
    assert read_channel(store, "production").release_id == "two"
    assert [e.release_id for e in history_agrees(store, "production")] == ["one", "two"]
