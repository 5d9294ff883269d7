"""A damaged store, and recovering it through the CLI.

Each test damages a real store (moto over HTTP, or the local folder) the way it happens: a pointer
rewritten by hand or by another tool, a pointer naming a release that was never uploaded, an
object changed behind the store's back, a promotion killed in the middle of a multipart upload.
Then the operator's commands (``model-release store ...``) must say what is wrong on one line,
refuse to make it worse, and offer a way out that leaves the store sound.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from model_release.cli import main as model_release_main
from model_release.errors import ConflictError, InfraError, StoreError
from model_release.store import history, list_releases, promote, read_channel, retention, rollback, verify_release
from model_release.store.channels import repair_pointer
from model_release.store.uploads import abort_stale_uploads

from .conftest import fast_client
from .support import CuttableProxy, TriggerBackend, history_agrees, make_release

pytestmark = pytest.mark.integration


@pytest.fixture
def cli(kit, monkeypatch, capsys):  # noqa: ANN001, ANN201
    """Run ``model-release store ...`` against the kit's store: (exit code, parsed stdout, stderr)."""
    if kit.kind == "s3":
        monkeypatch.setenv("MODEL_RELEASE_S3_ENDPOINT_URL", kit.endpoint_url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "damage-test")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "damage-test")
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")

    def run(*argv: str) -> tuple[int, object, str]:
        capsys.readouterr()
        code = model_release_main(["store", *argv])
        out = capsys.readouterr()
        assert "Traceback" not in out.err
        # the CLI logs to stderr too (a repair logs a WARNING): keep the command's own lines
        err = "".join(line for line in out.err.splitlines(keepends=True) if not line.startswith(("INFO ", "WARNING ")))
        return code, (json.loads(out.out) if out.out.strip() else None), err

    return run


def _promoted(kit, tmp_path, *ids: str):  # noqa: ANN001, ANN202
    store = kit.store()
    for rid in ids:
        promote(make_release(tmp_path / rid, small=2, seed=rid), rid, store, "production")
    return store


def _tamper(kit, store, key: str, data: bytes) -> None:  # noqa: ANN001
    """Change a stored object behind the store's back (a new checksum, as another tool would write it)."""
    if kit.kind == "s3":
        be = store.backend
        be.client.put_object(Bucket=be.bucket, Key=be._key(key), Body=data, ChecksumAlgorithm="SHA256")
    else:
        (Path(store.backend.root) / key).write_bytes(data)


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.endswith("\n"), err
    return err


# -- item 7: a malformed pointer -------------------------------------------------------------------
DAMAGE = {
    "missing-keys": (b'{"release_id": "t-3"}', "key 'channel' is missing"),
    "a-list": (b"[1, 2]", "it holds a JSON list, not an object"),
    "not-json": (b"release r2, I think", "it is not valid JSON"),
    "wrong-type": (b'{"channel": "production", "release_id": "r2", "previous_release": "r1", "seq": "2", '
                   b'"action": "promote"}', "key 'seq' is '2', not int"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_pointer_is_named_blocks_nothing_silently_and_repair_pointer_recovers(kit, tmp_path, cli, damage):
    store = _promoted(kit, tmp_path, "r1", "r2")
    content, why = DAMAGE[damage]
    store.backend.put_bytes("channels/production.json", content)
    key = f"{kit.uri}/channels/production.json"

    # every command that needs the pointer names the key, what is wrong and the way out
    for argv in (("rollback", "--store", kit.uri), ("retention", "--store", kit.uri, "--keep", "0", "--protect-days", "0")):
        code, out, err = cli(*argv)
        assert code == 4 and out is None
        assert f"channel pointer {key} is damaged: {why}" in _one_line(err)
        assert f"repair-pointer --store {kit.uri} --channel production --to RELEASE" in err
    r3 = make_release(tmp_path / "r3", small=1, seed="r3")
    with pytest.raises(StoreError, match="repair-pointer"):
        promote(r3, "r3", store, "production")
    assert {r.release_id for r in list_releases(store)} == {"r1", "r2"}  # nothing uploaded, nothing deleted
    assert store.backend.get_bytes("channels/production.json")[0] == content  # nothing rewrote the damage

    # the read-only commands still show the releases (to pick a repair target) and flag the pointer
    code, rels, err = cli("releases", "--store", kit.uri)
    assert code == 4 and {r["release_id"] for r in rels} >= {"r1", "r2"}
    assert "channel 'production': its pointer is damaged" in _one_line(err) and "repair-pointer" in err
    code, hist, err = cli("history", "--store", kit.uri, "--channel", "production")
    assert code == 4 and [h["release_id"] for h in hist] == ["r1", "r2"] and "damaged" in _one_line(err)

    # repair to a release that does not verify is refused, and the pointer is left as it was
    _tamper(kit, store, "releases/r1/models/iris/1/model.py", b"# tampered\n")
    code, _, err = cli("repair-pointer", "--store", kit.uri, "--channel", "production", "--release", "r1")
    assert code == 4 and "release 'r1'" in _one_line(err) and "not a complete, verified release" in err
    assert store.backend.get_bytes("channels/production.json")[0] == content

    # the way out
    code, out, err = cli("repair-pointer", "--store", kit.uri, "--channel", "production", "--release", "r2")
    assert code == 0 and err == ""
    assert out["to_release"] == "r2" and out["moved"] is True and why in out["damage"]
    pointer = read_channel(store, "production")
    assert (pointer.release_id, pointer.action, pointer.seq, pointer.previous_release) == ("r2", "repair", 3, "r2")
    entries = history_agrees(store, "production")
    assert [(e.release_id, e.action) for e in entries] == [("r1", "promote"), ("r2", "promote"), ("r2", "repair")]
    code, _, err = cli("releases", "--store", kit.uri)
    assert code == 0 and err == ""
    result = promote(r3, "r3", store, "production")  # promotion works again
    assert result.previous_release == "r2" and history_agrees(store, "production")[-1].release_id == "r3"
    code, again, _ = cli("repair-pointer", "--store", kit.uri, "--channel", "production", "--release", "r3")
    assert code == 0 and again["moved"] is False  # a retried repair changes nothing


def test_repair_pointer_is_a_conditional_write_against_the_damage_it_read(kit, tmp_path):
    """Someone rewrites the damaged pointer between the repair's read and its write: the repair loses."""
    store = _promoted(kit, tmp_path, "r1", "r2")
    store.backend.put_bytes("channels/production.json", b"garbage")
    other = kit.store()

    def someone_else_writes() -> None:
        other.backend.put_bytes("channels/production.json", b"other garbage")

    racing = kit.store()
    racing.backend = TriggerBackend(racing.backend, lambda op, key: op == "put_bytes" and key == "channels/production.json",
                                    someone_else_writes)
    with pytest.raises(ConflictError, match="changed while it was being repaired") as err:
        repair_pointer(racing, "production", "r1")
    assert err.value.winner is None  # what is there now is damaged too: no release to name
    assert store.backend.get_bytes("channels/production.json")[0] == b"other garbage"
    assert [e.release_id for e in history(store, "production")] == ["r1", "r2"]  # no repair recorded


# -- item 8: a pointer naming a release that does not exist ------------------------------------------
def _dangle(store, release_id: str = "t-3") -> None:  # noqa: ANN001
    """A well-formed pointer naming a release that was never uploaded (written by another tool)."""
    current = read_channel(store, "production")
    doc = {"channel": "production", "release_id": release_id, "previous_release": current.release_id,
           "seq": current.seq + 1, "action": "promote", "updated_at": "2026-01-01T00:00:00Z", "updated_by": "a script"}
    store.backend.put_bytes("channels/production.json", json.dumps(doc).encode())


def test_dangling_pointer_is_flagged_and_plain_rollback_picks_the_newest_verified_release(kit, tmp_path, cli):
    store = _promoted(kit, tmp_path, "r1", "r2", "r3")
    _dangle(store)
    _tamper(kit, store, "releases/r3/reports/report.json", b"{}")  # r3 no longer verifies

    code, rels, err = cli("releases", "--store", kit.uri)
    by_id = {r["release_id"]: r for r in rels}
    assert code == 4 and by_id["t-3"]["exists"] is False and by_id["t-3"]["channels"] == ["production"]
    assert "the store has no such release" in by_id["t-3"]["problem"]
    assert "channel 'production': it points at release 't-3', that does not exist" in _one_line(err)
    assert "repair-pointer" in err and by_id["r3"]["problem"] is None

    code, out, err = cli("rollback", "--store", kit.uri, "--channel", "production")
    assert code == 0, err
    assert (out["from_release"], out["to_release"]) == ("t-3", "r2")  # r3 was skipped: it does not verify
    assert read_channel(store, "production").release_id == "r2"
    code, _, err = cli("releases", "--store", kit.uri)
    assert code == 0 and err == ""


def test_retention_never_deletes_the_newest_verified_release_under_a_dangling_pointer(kit, tmp_path, cli):
    store = _promoted(kit, tmp_path, "r1", "r2")
    _tamper(kit, store, "releases/r2/models/iris/config.pbtxt", b"tampered")  # r2 no longer verifies
    _dangle(store)

    code, out, err = cli("retention", "--store", kit.uri, "--keep", "0", "--protect-days", "0", "--dry-run")
    assert code == 0 and out == {"deleted": ["r2"], "dry_run": True}, (out, err)  # r1 is the only verified one
    code, out, _ = cli("retention", "--store", kit.uri, "--keep", "0", "--protect-days", "0")
    assert code == 0 and out["deleted"] == ["r2"]
    assert [r.release_id for r in list_releases(store) if r.exists] == ["r1"] and verify_release(store, "r1").ok
    code, _, _ = cli("retention", "--store", kit.uri, "--keep", "0", "--protect-days", "0")
    assert code == 0 and verify_release(store, "r1").ok  # still there on a second pass

    code, out, _ = cli("repair-pointer", "--store", kit.uri, "--channel", "production", "--release", "r1")
    assert code == 0 and out["from_release"] == "t-3"
    assert read_channel(store, "production").release_id == "r1"
    history_agrees(store, "production")


def test_retention_keep_counts_verified_releases_only(kit, tmp_path):
    store = _promoted(kit, tmp_path, "r1", "r2", "r3", "r4")
    _tamper(kit, store, "releases/r3/models/iris/1/model.py", b"# tampered\n")
    later = datetime.now(timezone.utc) + timedelta(days=30)
    # keep=2: r4 (current) and r2, the newest verified one before it; r3 does not verify and uses no slot
    assert retention_ids(store, 2, later) == ["r1", "r3"]


def retention_ids(store, keep: int, now: datetime) -> list[str]:  # noqa: ANN001
    return sorted(retention(store, keep, protect_days=7, now=now, dry_run=True))


def test_rollback_skips_releases_that_do_not_verify(kit, tmp_path):
    store = _promoted(kit, tmp_path, "r1", "r2", "r3")
    _tamper(kit, store, "releases/r2/reports/report.html", b"<html>tampered</html>")
    assert rollback(store, "production").to_release == "r1"
    store.backend.delete(["releases/r1/_COMPLETE"])  # r1 now incomplete: nothing earlier verifies
    rollback(store, "production", "r3")
    with pytest.raises(StoreError, match="no earlier complete release that verifies"):
        rollback(store, "production")


# -- item 9: multipart uploads a killed promotion left ---------------------------------------------
def _temporary_file(store, key: str, age: timedelta) -> Path:  # noqa: ANN001
    """What a promotion killed in the middle of a local write leaves: atomic_write's temporary file."""
    target = Path(store.backend.root) / key
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.k1ll3d.model-release-tmp"
    tmp.write_bytes(os.urandom(4096))
    then = time.time() - age.total_seconds()
    os.utime(tmp, (then, then))
    return tmp


def test_killed_multipart_upload_is_aborted_by_retention_through_the_cli(moto, tmp_path, monkeypatch, capsys, caplog):
    from model_release.local.moto_process import ensure_bucket
    from model_release.store import open_store

    ensure_bucket(moto.endpoint_url, "killed-uploads")
    uri = "s3://killed-uploads/team"
    rel = make_release(tmp_path / "big", small=1, big=20 * 1024 * 1024, seed="big")
    proxy = CuttableProxy(moto.port)
    try:
        proxy.cut_after_bytes(10 * 1024 * 1024)  # the endpoint goes away inside the large file's parts
        with pytest.raises(InfraError):
            promote(rel, "big-1", open_store(uri, s3_client=fast_client(proxy.endpoint_url)), "production")
    finally:
        proxy.close()
    direct = open_store(uri, s3_client=fast_client(moto.endpoint_url))
    left = direct.backend.pending_uploads("releases/")
    assert left and all(u.key.startswith("releases/big-1/") for u in left)  # parts stored, never aborted

    monkeypatch.setenv("MODEL_RELEASE_S3_ENDPOINT_URL", moto.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "damage-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "damage-test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    caplog.set_level("WARNING", logger="model_release")
    capsys.readouterr()
    assert model_release_main(["store", "retention", "--store", uri, "--keep", "2"]) == 0
    assert json.loads(capsys.readouterr().out) == {"deleted": [], "dry_run": False}
    assert direct.backend.pending_uploads("releases/") == []  # moto dates every upload 2010: all are stale
    assert any("aborted the unfinished upload" in r.getMessage() and "releases/big-1/models/iris/1/model.onnx" in r.getMessage()
               for r in caplog.records)
    result = promote(rel, "big-1", direct, "production")  # and the release still goes through
    assert verify_release(direct, "big-1").ok and result.objects == result.uploaded + result.skipped


def test_promotion_aborts_its_own_leftovers_and_old_ones_but_not_a_running_one(kit, tmp_path, caplog):
    store = kit.store()
    now = datetime.now(timezone.utc)
    if kit.kind == "s3":
        be = store.backend
        for key in ("releases/r1/models/iris/1/model.onnx", "releases/other/models/iris/1/model.onnx"):
            be.client.create_multipart_upload(Bucket=be.bucket, Key=be._key(key), ChecksumAlgorithm="SHA256")
        started = {u.key: u.started for u in be.pending_uploads("releases/")}
        now = max(started.values()) + timedelta(hours=1)  # moto dates uploads 2010: "now" is an hour later
        # the age rule alone: an hour-old upload of another release is a running promotion, left alone
        assert abort_stale_uploads(store, now=now, dry_run=True) == []
        assert sorted(u.key for u in abort_stale_uploads(store, now=now + timedelta(days=2), dry_run=True)) == sorted(started)
        mine = abort_stale_uploads(store, release_id="r1", now=now)
        assert [u.key for u in mine] == ["releases/r1/models/iris/1/model.onnx"]
        assert [u.key for u in be.pending_uploads("releases/")] == ["releases/other/models/iris/1/model.onnx"]
        return
    own = _temporary_file(store, "releases/r1/models/iris/1/model.onnx", timedelta(minutes=5))
    running = _temporary_file(store, "releases/other/models/iris/1/model.onnx", timedelta(minutes=5))
    old = _temporary_file(store, "releases/old/models/iris/1/model.onnx", timedelta(days=3))
    caplog.set_level("WARNING", logger="model_release")
    promote(make_release(tmp_path / "r1", small=1), "r1", store, "production")
    assert not own.exists() and not old.exists() and running.exists()
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "releases/r1/models/iris/1/model.onnx" in logged and "releases/old/models/iris/1/model.onnx" in logged
    assert [u.key for u in store.backend.pending_uploads("releases/")] == ["releases/other/models/iris/1/model.onnx"]
    # a month later the other one is stale too: retention aborts it
    assert retention(store, 1, protect_days=7, now=now + timedelta(days=30)) == []
    assert store.backend.pending_uploads("releases/") == [] and not running.exists()
