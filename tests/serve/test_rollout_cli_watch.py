"""``model-release rollout`` at a terminal rolls out as the DAG's roll-out does: the steps and watch it builds.

A local-folder store holding a release whose manifest records its spec, and two agents registered in
it; the roll-out itself is replaced by a capture of the options the CLI built (the live roll-out through
the CLI, with its watch, is in tests/serve/test_watch_rollout.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from model_release.errors import SpecError, UserError
from model_release.serve import cli
from model_release.serve.membership import AgentState, publish
from model_release.serve.record import RolloutRecord
from model_release.serve.watch import HttpProbe
from model_release.spec import parse_spec
from model_release.store import open_store, promote
from model_release.store.keys import MANIFEST

from ..store.support import make_release

CHANNEL = "production"
BASE = {"name": "iris", "model": {"name": "iris-classifier", "alias": "candidate"}}
BODY = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}


def _promoted(tmp_path: Path, release_id: str, serve: dict[str, Any] | None, **spec: Any) -> Any:
    """A store whose channel points at ``release_id``, recording a spec read from ``tmp_path/specs`` (None: no spec)."""
    store = open_store((tmp_path / "store").as_uri())
    folder = make_release(tmp_path / release_id, small=1, seed=release_id)
    manifest = json.loads((folder / MANIFEST).read_text())
    if serve is not None:
        recorded = parse_spec({**BASE, **spec, "serve": serve}, base_dir=str(tmp_path / "specs"), source="specs/iris.yaml")
        manifest["spec"] = recorded.model_dump(mode="json")
    (folder / MANIFEST).write_text(json.dumps(manifest))
    promote(folder, release_id, store, CHANNEL)
    return store


def _agents(store, metrics: bool = True) -> None:
    """Two agents registered in the store (their heartbeat now), with metrics endpoints or without."""
    for i in (1, 2):
        publish(store, AgentState(f"serve-{i}", CHANNEL, f"127.0.0.1:{9000 + i}",
                                  f"http://127.0.0.1:{9100 + i}/metrics" if metrics else None))


@pytest.fixture
def captured(monkeypatch) -> dict[str, Any]:
    """What ``rollout_main`` passed to the roll-out (which is not run)."""
    seen: dict[str, Any] = {}

    def capture(store, channel, options, *, release_id=None, progress=None):  # noqa: ANN001, ANN202
        seen.update(options=options, release_id=release_id)
        return RolloutRecord(channel, release_id, {})

    monkeypatch.setattr(cli, "roll_out", capture)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return seen


def _main(store, tmp_path: Path, *extra: str, metrics: bool = True) -> None:
    _agents(store, metrics)
    assert cli.rollout_main(["--channel", CHANNEL, "--store", store.uri, *extra]) == 0


def test_the_recorded_specs_watch_is_the_plan_with_its_probe_rows_and_the_alias_to_move_back(tmp_path, captured, capsys) -> None:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "rows.json").write_text(json.dumps([BODY]))
    serve = {"watch": {"bake_s": 30, "interval_s": 5, "probe": {"rows": "rows.json", "requests": 2}},
             "rollout": {"steps": [{"servers": 1}, {"percent": 25}, {"percent": 100}], "swap": "in_place"}}
    store = _promoted(tmp_path, "r1", serve)
    _main(store, tmp_path, "--tracking-uri", "http://127.0.0.1:5000")
    plan = captured["options"].watch
    assert captured["release_id"] == "r1"  # the pointer's release: its spec is the one read
    assert (plan.spec.bake_s, plan.spec.interval_s) == (30, 5)
    assert isinstance(plan.probe, HttpProbe) and plan.probe.requests == 2  # rows.json beside the recorded spec
    assert (plan.follower.tracking_uri, plan.follower.alias) == ("http://127.0.0.1:5000", "production")
    assert plan.baseline is None
    rollout = captured["options"].spec  # the recorded spec's steps and swap too
    assert [(st.servers, st.percent) for st in rollout.steps] == [(1, None), (None, 25), (None, 100)]
    assert rollout.swap == "in_place"
    assert "watch: each step watched by the spec recorded in release r1: bake 30 s" in capsys.readouterr().err


def test_no_watch_and_a_disabled_watch_roll_out_unwatched(tmp_path, captured, capsys) -> None:
    store = _promoted(tmp_path, "r1", {"watch": {"enabled": False}})
    _main(store, tmp_path)
    assert captured["options"].watch is None
    assert "serve.watch.enabled is false in the spec recorded in release r1" in capsys.readouterr().err
    store = _promoted(tmp_path / "b", "r2", {})
    _main(store, tmp_path / "b", "--no-watch")  # the default watch, not wanted here
    assert captured["options"].watch is None


def test_a_release_that_recorded_no_spec_is_not_watched_and_says_so(tmp_path, captured, capsys) -> None:
    store = _promoted(tmp_path, "r1", None)
    _main(store, tmp_path)
    assert captured["options"].watch is None
    assert "release r1 recorded no spec, so its steps are not watched; pass --spec FILE" in capsys.readouterr().err


def test_a_spec_file_overrides_the_recorded_one(tmp_path, captured) -> None:
    store = _promoted(tmp_path, "r1", {"watch": {"enabled": False}})
    spec = tmp_path / "other" / "iris.yaml"
    spec.parent.mkdir()
    spec.write_text("name: iris\nmodel: {name: iris-classifier, alias: candidate}\npromote: {mlflow_alias: null}\n"
                    "serve:\n  watch: {bake_s: 8, interval_s: 2}\n")
    _main(store, tmp_path, "--spec", str(spec))
    plan = captured["options"].watch
    assert (plan.spec.bake_s, plan.spec.interval_s) == (8, 2) and plan.follower is None  # no alias to move


def test_a_watch_that_would_move_the_alias_needs_a_tracking_uri(tmp_path, captured) -> None:
    store = _promoted(tmp_path, "r1", {})  # promote.mlflow_alias defaults to production
    with pytest.raises(UserError, match=r"^model-release rollout: the spec recorded in release r1 moves the MLflow alias "
                       r"'production' with the channel pointer \(promote.mlflow_alias\), so a watch that rolls back must "
                       r"move it back too: pass --tracking-uri URI or set MLFLOW_TRACKING_URI, or roll out with "
                       r"--no-watch$"):
        _main(store, tmp_path)
    assert captured == {}  # refused before anything moved
    _main(store, tmp_path, metrics=False)  # just outside: a fleet without metrics is not watched, so nothing moves back
    assert captured["options"].watch.follower is None


def test_probe_rows_not_readable_here_say_how_to_go_on(tmp_path, captured) -> None:
    store = _promoted(tmp_path, "r1", {"watch": {"probe": {"rows": "missing.json"}}}, promote={"mlflow_alias": None})
    with pytest.raises(SpecError, match=r"serve.watch.probe.rows: cannot read .*missing.json.* \(from the spec recorded in "
                       r"release r1\); pass --spec FILE where its files are, or --no-watch$"):
        _main(store, tmp_path)
    assert captured == {}


def test_spec_and_no_watch_together_are_refused(tmp_path, captured) -> None:
    store = _promoted(tmp_path, "r1", {})
    with pytest.raises(UserError, match="argument --no-watch: not allowed with argument --spec"):
        _main(store, tmp_path, "--spec", "x.yaml", "--no-watch")


def test_the_old_spelling_of_the_tracking_uri_still_works_and_says_so(tmp_path, captured, capsys) -> None:
    store = _promoted(tmp_path, "r1", {})
    _main(store, tmp_path, "--mlflow-tracking-uri", "http://127.0.0.1:5000")
    assert captured["options"].watch.follower.tracking_uri == "http://127.0.0.1:5000"
    assert "--mlflow-tracking-uri is deprecated and goes in the next release; use --tracking-uri" in capsys.readouterr().err
