"""``model-release store ...`` on a local-folder store and on moto."""

from __future__ import annotations

import json

import pytest

from model_release.store import promote, read_channel
from model_release.store.cli import main

from .support import make_release

pytestmark = pytest.mark.integration


def _run(capsys, *argv: str) -> tuple[int, object, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, (json.loads(out.out) if out.out.strip() else None), out.err


def _reach(kit, monkeypatch) -> None:
    """The CLI reaches an S3 kit's endpoint through the environment, as a terminal would."""
    if kit.kind == "s3":
        monkeypatch.setenv("MODEL_RELEASE_S3_ENDPOINT_URL", kit.endpoint_url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "cli-test")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "cli-test")
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


def test_cli_history_releases_verify_rollback_retention(kit, tmp_path, capsys, monkeypatch):
    store = kit.store()
    _reach(kit, monkeypatch)
    for name in ("r1", "r2"):
        promote(make_release(tmp_path / name, small=1, seed=name), name, store, "production")
    code, hist, _ = _run(capsys, "store", "history", "--store", kit.uri, "--channel", "production")
    assert code == 0 and [h["release_id"] for h in hist] == ["r1", "r2"]
    code, hist, err = _run(capsys, "store", "history", "--store", kit.uri, "--channel", "prod")  # a typo
    assert code == 2 and hist is None and "channel 'prod' has no history" in err and "its channels: production" in err
    code, rels, _ = _run(capsys, "releases", "--store", kit.uri)
    assert code == 0 and {r["release_id"]: r["channels"] for r in rels} == {"r1": [], "r2": ["production"]}
    code, report, _ = _run(capsys, "verify", "--release", "r2", "--store", kit.uri, "--deep")
    assert code == 0 and report["ok"] is True
    code, back, _ = _run(capsys, "rollback", "--store", kit.uri, "--channel", "production")
    assert code == 0 and back["to_release"] == "r1"
    assert read_channel(store, "production").release_id == "r1"
    code, ret, _ = _run(capsys, "retention", "--store", kit.uri, "--keep", "0", "--protect-days", "0", "--dry-run")
    # r1 is pointed at and r2 is the newest verified release: retention keeps both
    assert code == 0 and ret == {"deleted": [], "dry_run": True}

    store.backend.put_bytes("releases/r1/reports/report.json", b"{}")
    code, report, _ = _run(capsys, "verify", "--release", "r1", "--store", kit.uri)
    assert code == 4 and not report["ok"] and "reports/report.json" in report["problems"]  # the store holds something wrong


def test_cli_verify_of_a_release_the_store_does_not_hold_says_so_in_one_line(kit, tmp_path, capsys, monkeypatch):
    store = kit.store()
    _reach(kit, monkeypatch)
    promote(make_release(tmp_path / "r1", small=1, seed="r1"), "r1", store, "production")
    code, report, err = _run(capsys, "verify", "--release", "r9", "--store", kit.uri)
    assert code == 2 and report is None and err.count("\n") == 1  # a release the store does not have: bad input
    assert f"store {kit.uri} holds no release 'r9'" in err and f"model-release store releases --store {kit.uri}" in err
    store.backend.delete([k.key for k in store.backend.list("releases/r1/") if not k.key.endswith("release.json")])
    code, report, err = _run(capsys, "verify", "--release", "r1", "--store", kit.uri)  # one object left: a problem report
    assert code == 4 and report["problems"] and err == ""


def test_cli_errors_are_one_line_and_non_zero(tmp_path, capsys):
    uri = (tmp_path / "empty").as_uri()
    code, _, err = _run(capsys, "rollback", "--store", uri, "--channel", "production")
    assert code == 2 and err.count("\n") == 1 and "does not exist" in err and str(tmp_path / "empty") in err
    assert not (tmp_path / "empty").exists()
    (tmp_path / "empty").mkdir()
    code, _, err = _run(capsys, "rollback", "--store", uri, "--channel", "production")
    assert code == 2 and err.count("\n") == 1 and "points at nothing" in err  # nothing to roll back: not an outage
    code, _, err = _run(capsys, "history", "--store", "ftp://nope")
    assert code == 2 and err.count("\n") == 1 and "s3://BUCKET" in err
    code, _, err = _run(capsys, "retention", "--store", uri)
    assert code == 2 and "--keep" in err
    code, _, err = _run(capsys, "history", "--store", uri, "--channel", "bad/channel")
    assert code == 2 and "channel" in err


def test_old_spellings_still_work_for_one_release_and_say_so(kit, tmp_path, capsys, monkeypatch):
    """--to, a positional release id and --mlflow-tracking-uri became --release and --tracking-uri (model_release.flags)."""
    store = kit.store()
    _reach(kit, monkeypatch)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    for name in ("r1", "r2"):
        promote(make_release(tmp_path / name, small=1, seed=name), name, store, "production")
    code, back, err = _run(capsys, "rollback", "--store", kit.uri, "--to", "r1")
    assert code == 0 and back["to_release"] == "r1"
    assert "--to is deprecated and goes in the next release; use --release" in err
    code, report, err = _run(capsys, "verify", "r2", "--store", kit.uri)
    assert code == 0 and report["release_id"] == "r2" and "a positional release id is deprecated" in err
    code, _, err = _run(capsys, "verify", "r2", "--release", "r1", "--store", kit.uri)
    assert code == 2 and "give the release once" in err


def test_a_terminal_reads_lines_and_a_pipe_reads_json() -> None:
    from model_release.store.text import text

    history = [{"seq": 1, "updated_at": "2026-12-06T07:00:00+00:00", "action": "promote", "release_id": "r1",
                "updated_by": "ci@host"}, {"seq": 2, "updated_at": "2026-12-06T08:00:00+00:00", "action": "rollback",
                                            "release_id": "r0\x1b[2J", "updated_by": "me"}]
    lines = text("history", history).splitlines()
    assert lines[1].split() == ["1", "2026-12-06T07:00:00", "promote", "r1", "ci@host"]
    assert "\x1b" not in lines[2] and "r0\\x1b[2J" in lines[2]  # store contents are others' writing: escaped
    assert text("verify", {"release_id": "r1", "ok": False, "objects": 3, "bytes": 9,
                           "problems": {"a.onnx": "sha256 differs"}}).splitlines() == [
        "release r1: DOES NOT VERIFY, 3 objects, 9 bytes", "  a.onnx: sha256 differs"]
    assert text("history", []) == "no move yet: nothing was promoted to this channel"
