"""Promotion against the real moto S3 server over HTTP and against the local-folder store."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from pathlib import Path

import pytest

from model_release.errors import ChecksumMismatch, SpecError, StoreError
from model_release.store import history, open_store, promote, read_channel, stage_release, verify_release
from model_release.store.keys import MARKER

from .helpers import history_agrees, make_release

pytestmark = pytest.mark.integration


def _overwrite(kit, store, key: str, data: bytes) -> None:
    """Corrupt one stored object behind the store's back."""
    if kit.kind == "s3":
        be = store.backend
        be.client.put_object(Bucket=be.bucket, Key=be._key(key), Body=data, ChecksumAlgorithm="SHA256")
    else:
        (Path(store.backend.root) / key).write_bytes(data)


def test_promote_stages_verifies_and_moves_the_pointer(kit, tmp_path, caplog):
    rel = make_release(tmp_path / "r1", small=5)
    store = kit.store()
    with caplog.at_level(logging.INFO, logger="model_release"):
        result = promote(rel, "iris-1", store, "production", expected_current=None)
    manifest = json.loads((rel / "release.json").read_text())
    assert result.channel == "production" and result.previous_release is None
    assert result.objects == len(manifest["files"]) == result.uploaded and result.skipped == 0
    assert result.bytes == sum(e["size"] for e in manifest["files"].values())
    assert result.release_prefix == f"{kit.uri}/releases/iris-1/"
    assert read_channel(store, "production").release_id == "iris-1"
    report = verify_release(store, "iris-1")
    assert report.ok, report.problems
    assert verify_release(store, "iris-1", deep=True).ok
    # the stored objects are byte-identical to the local files
    got = store.backend.get_bytes("releases/iris-1/models/iris/config.pbtxt")
    assert got is not None and got[0] == (rel / "models/iris/config.pbtxt").read_bytes()
    assert store.backend.get_bytes("releases/iris-1/release.json")[0] == (rel / "release.json").read_bytes()
    assert any("files" in r.getMessage() and "MiB" in r.getMessage() for r in caplog.records)
    entries = history_agrees(store, "production")
    assert [(e.release_id, e.previous_release, e.action) for e in entries] == [("iris-1", None, "promote")]


def test_second_release_records_previous_and_rerun_is_idempotent(kit, tmp_path):
    store = kit.store()
    promote(make_release(tmp_path / "a", seed="a"), "iris-a", store, "production")
    rel_b = make_release(tmp_path / "b", seed="b")
    first = promote(rel_b, "iris-b", store, "production", expected_current="iris-a")
    again = promote(rel_b, "iris-b", store, "production", expected_current="iris-a")
    assert first.previous_release == "iris-a" and first.uploaded == first.objects
    assert again.uploaded == 0 and again.skipped == again.objects
    assert [e.release_id for e in history_agrees(store, "production")] == ["iris-a", "iris-b"]


def test_resume_skips_objects_already_stored(kit, tmp_path):
    rel = make_release(tmp_path / "r", small=8)
    store = kit.store()
    manifest = json.loads((rel / "release.json").read_text())
    done = sorted(manifest["files"])[:5]
    for path in done:  # an earlier attempt got these across, then died
        e = manifest["files"][path]
        store.backend.put_file(f"releases/iris-r/{path}", rel / path, sha256=e["sha256"], size=e["size"], part_digests=None)
    # and left an object the manifest does not list (a stale file from a changed build)
    store.backend.put_bytes("releases/iris-r/models/iris/2/stale.bin", b"stale")
    result = promote(rel, "iris-r", store, "production")
    assert result.skipped == 5 and result.uploaded == len(manifest["files"]) - 5
    assert store.backend.head("releases/iris-r/models/iris/2/stale.bin") is None
    assert verify_release(store, "iris-r").ok


def test_large_file_goes_multipart_and_verifies(kit, tmp_path):
    rel = make_release(tmp_path / "big", small=2, big=17 * 1024 * 1024 + 123)
    store = kit.store()
    result = promote(rel, "iris-big", store, "production")
    info = store.backend.head("releases/iris-big/models/iris/1/model.onnx")
    if kit.kind == "s3":
        assert info.multipart and info.metadata["sha256"] == hashlib.sha256((rel / "models/iris/1/model.onnx").read_bytes()).hexdigest()
    assert result.uploaded == result.objects
    assert verify_release(store, "iris-big").ok
    assert verify_release(store, "iris-big", deep=True).ok
    # a rerun keeps the multipart object (its composite checksum is recorded in its metadata)
    assert stage_release(rel, "iris-big", store).skipped == result.objects


def test_local_file_not_matching_manifest_uploads_nothing(kit, tmp_path):
    rel = make_release(tmp_path / "r")
    target = rel / "models/iris/1/model.py"
    target.write_text("# edited after assembly!\n")
    store = kit.store()
    with pytest.raises(ChecksumMismatch) as err:
        promote(rel, "iris-x", store, "production")
    msg = str(err.value)
    want = json.loads((rel / "release.json").read_text())["files"]["models/iris/1/model.py"]["sha256"]
    assert "models/iris/1/model.py" in msg and want in msg
    assert hashlib.sha256(target.read_bytes()).hexdigest() in msg
    assert list(store.backend.list("releases/")) == []
    assert read_channel(store, "production") is None


def test_local_folder_with_unlisted_file_is_refused(kit, tmp_path):
    rel = make_release(tmp_path / "r")
    (rel / "models/iris/1/extra.txt").write_text("not in the manifest")
    with pytest.raises(ChecksumMismatch, match="extra.txt"):
        promote(rel, "iris-x", kit.store(), "production")


@pytest.mark.parametrize("same_size", [True, False])
def test_object_corrupted_after_upload_stops_the_pointer(kit, tmp_path, same_size):
    rel = make_release(tmp_path / "r", small=6)
    store = kit.store()
    promote(make_release(tmp_path / "old", seed="old"), "iris-old", store, "production")
    victim = "models/iris/1/data/part-0000.bin"
    size = (rel / victim).stat().st_size
    garbage = (b"X" * size) if same_size else b"garbage"

    def corrupt_once_uploaded(p):
        if p.files_done == p.files_total:  # every upload finished, verification not started
            _overwrite(kit, store, f"releases/iris-new/{victim}", garbage)

    with pytest.raises(ChecksumMismatch) as err:
        promote(rel, "iris-new", store, "production", progress=corrupt_once_uploaded)
    assert victim in str(err.value)
    assert read_channel(store, "production").release_id == "iris-old"
    assert store.read_record("iris-new") is None  # nothing looks complete
    report = verify_release(store, "iris-new")
    assert not report.ok and MARKER in report.problems
    # a rerun re-uploads the bad object and completes
    result = promote(rel, "iris-new", store, "production")
    assert result.uploaded == 1 and verify_release(store, "iris-new").ok
    assert read_channel(store, "production").release_id == "iris-new"


def test_corrupted_complete_release_is_not_pointed_at(kit, tmp_path):
    rel = make_release(tmp_path / "r")
    store = kit.store()
    promote(rel, "iris-1", store, "staging")
    _overwrite(kit, store, "releases/iris-1/reports/report.html", b"<html>tampered</html>")
    report = verify_release(store, "iris-1")
    assert not report.ok and "reports/report.html" in report.problems
    with pytest.raises(ChecksumMismatch, match="report.html"):
        promote(rel, "iris-1", store, "production")
    assert read_channel(store, "production") is None


def test_released_prefix_is_immutable(kit, tmp_path):
    store = kit.store()
    promote(make_release(tmp_path / "a", seed="a"), "iris-1", store, "production")
    with pytest.raises(StoreError, match="immutable"):
        promote(make_release(tmp_path / "b", seed="b"), "iris-1", store, "production")
    assert verify_release(store, "iris-1").ok


def test_bad_ids_are_refused(kit, tmp_path):
    rel = make_release(tmp_path / "r")
    with pytest.raises(SpecError, match="channel"):
        promote(rel, "iris-1", kit.store(), "no/slashes")
    with pytest.raises(SpecError, match="release id"):
        promote(rel, "../escape", kit.store(), "production")


def test_open_store_rejects_other_uris():
    for bad in ("http://x/y", "file://relative/path", "s3:///nobucket", "/plain/path"):
        with pytest.raises(SpecError, match="s3://BUCKET"):
            open_store(bad)


def test_stored_checksum_is_the_manifest_sha256(moto, tmp_path):
    """The S3 read-back compares what S3 keeps (x-amz-checksum-sha256) with the manifest."""
    from model_release.local.moto_process import ensure_bucket

    from .conftest import fast_client

    ensure_bucket(moto.endpoint_url, "checksum-probe")
    client = fast_client(moto.endpoint_url)
    store = open_store("s3://checksum-probe", s3_client=client)
    rel = make_release(tmp_path / "r", small=1)
    promote(rel, "iris-1", store, "production")
    head = client.head_object(Bucket="checksum-probe", Key="releases/iris-1/models/iris/1/model.py", ChecksumMode="ENABLED")
    want = base64.b64encode(hashlib.sha256((rel / "models/iris/1/model.py").read_bytes()).digest()).decode()
    assert head["ChecksumSHA256"] == want
    assert store.triton_repository("iris-1") == f"s3://127.0.0.1:{moto.port}/checksum-probe/releases/iris-1/models"
    assert [e.release_id for e in history(store, "production")] == ["iris-1"]


def test_missing_bucket_is_a_store_error_naming_it(moto, tmp_path):
    from .conftest import fast_client

    store = open_store("s3://no-such-bucket-here/p", s3_client=fast_client(moto.endpoint_url))
    rel = make_release(tmp_path / "r", small=1, big=17 * 1024 * 1024)  # both the single-part and multipart paths
    with pytest.raises(StoreError, match="no-such-bucket-here") as err:
        promote(rel, "iris-1", store, "production")
    assert "NoSuchBucket" in str(err.value)
    assert not isinstance(err.value, ChecksumMismatch)
