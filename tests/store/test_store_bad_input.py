"""Bad input to the store: refused on one line with exit 2, before anything is read or written.

Store URIs that would open another store than the one named (a query or fragment dropped, a
percent-encoded separator or ``..`` decoded into another folder), a typo'd store path, names
that are not names, numbers that are not numbers; and the write probe the pipeline runs before
any stage (``ModelStore.check_writable``).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from model_release.cli import main as model_release_main
from model_release.errors import SpecError, StoreError
from model_release.local.moto_process import ensure_bucket
from model_release.store import open_store, promote
from model_release.store.cli import main as store_main

from .conftest import fast_client
from .support import make_release

pytestmark = pytest.mark.integration

SECRET = "wJalrXUtnFEMI-bad-input-secret"

#: (id, argv with {uri} for the store under test and {tmp} for the test's folder, text the one line must hold)
BAD = [
    ("uri-fragment", ["history", "--store", "{uri}#production"], "has a fragment '#production'"),
    ("uri-query", ["releases", "--store", "{uri}?versionId=3"], "has a query '?versionId=3'"),
    ("uri-encoded-slash", ["history", "--store", "file://{tmp}/a%2F..%2F..%2Fescaped"], "'%2F', a percent-encoded '/'"),
    ("uri-encoded-dots", ["releases", "--store", "file://{tmp}/a/%2e%2e/%2E%2E/escaped"], "'..' segment (after percent-decoding)"),
    ("uri-dotdot", ["verify", "--release", "r1", "--store", "file://{tmp}/store/../escaped"], "has a '.' or '..' segment"),
    ("uri-s3-dotdot", ["history", "--store", "s3://bucket/team/../other"], "has a '.' or '..' segment"),
    ("uri-nul", ["history", "--store", "file://{tmp}/a%00b"], "'%00'"),
    ("uri-backslash", ["history", "--store", "s3://bucket/team\\iris"], "has a backslash"),
    ("uri-credentials", ["releases", "--store", f"s3://AKIAEXAMPLE:{SECRET}@bucket/p"], "'s3://***@bucket/p'"),
    ("uri-endpoint-in-uri", ["releases", "--store", "s3://127.0.0.1:9000/bucket"], "'127.0.0.1:9000' is not an S3 bucket name"),
    ("uri-scheme", ["history", "--store", "ftp://host/store"], "use s3://BUCKET[/PREFIX] or file:///ABSOLUTE/PATH"),
    ("uri-relative-file", ["history", "--store", "file://relative/path"], "'file://relative/path' is not valid"),
    ("uri-no-bucket", ["history", "--store", "s3:///nobucket"], "'s3:///nobucket' is not valid"),
    ("uri-empty-segment", ["history", "--store", "s3://bucket/a//b"], "empty segment"),
    ("uri-typo-folder", ["history", "--store", "file://{tmp}/stor"], "/stor does not exist"),
    ("channel-slash", ["history", "--store", "{uri}", "--channel", "bad/channel"], "channel 'bad/channel' is not valid"),
    ("channel-empty", ["rollback", "--store", "{uri}", "--channel", ""], "channel '' is not valid"),
    ("channel-digit", ["rollback", "--store", "{uri}", "--channel", "1production"], "channel '1production' is not valid"),
    ("channel-long", ["repair-pointer", "--store", "{uri}", "--channel", "c" * 65, "--release", "r1"], f"channel '{'c' * 65}' is not valid"),
    ("release-dotdot", ["verify", "--release", "../r1", "--store", "{uri}"], "release id '../r1' is not valid"),
    ("release-traversal", ["rollback", "--store", "{uri}", "--release", "r1/../r2"], "release id 'r1/../r2' is not valid"),
    ("release-empty", ["rollback", "--store", "{uri}", "--release", ""], "release id '' is not valid"),
    ("release-space", ["repair-pointer", "--store", "{uri}", "--channel", "production", "--release", "a b"], "release id 'a b' is not valid"),
    ("release-long", ["verify", "--release", "r" * 129, "--store", "{uri}"], "is not valid: use letters, digits"),
    ("days-nan", ["retention", "--store", "{uri}", "--keep", "1", "--protect-days", "nan"], "'nan' is not valid; give a number of days from 0 to 36500"),
    ("days-inf", ["retention", "--store", "{uri}", "--keep", "1", "--protect-days", "inf"], "'inf' is not valid"),
    ("days-minus-inf", ["retention", "--store", "{uri}", "--keep", "1", "--protect-days=-inf"], "'-inf' is not valid"),
    ("days-huge", ["retention", "--store", "{uri}", "--keep", "1", "--protect-days", "1e12"], "'1e12' is not valid"),
    ("days-negative", ["retention", "--store", "{uri}", "--keep", "0", "--protect-days", "-1"], "'-1' is not valid"),
    ("days-word", ["retention", "--store", "{uri}", "--keep", "0", "--protect-days", "week"], "'week' is not valid"),
    ("keep-negative", ["retention", "--store", "{uri}", "--keep", "-1", "--protect-days", "0"], "keep=-1 is not valid"),
    ("keep-fraction", ["retention", "--store", "{uri}", "--keep", "1.5"], "invalid int value: '1.5'"),
    ("missing-keep", ["retention", "--store", "{uri}"], "the following arguments are required: --keep"),
    ("missing-release", ["repair-pointer", "--store", "{uri}"], "required: --release"),
    ("missing-release-verify", ["verify", "--store", "{uri}"], "verify needs --release ID"),
    ("missing-store", ["history", "--channel", "production"], "--store is required (or set MODEL_RELEASE_STORE)"),
    ("missing-command", [], "required: command"),
    ("unknown-command", ["promote", "--store", "{uri}"], "invalid choice: 'promote'"),
]


class Table:
    """One populated store (two releases on ``production``) that every bad-input case runs against."""

    def __init__(self, kind: str, uri: str, store: object, endpoint_url: str | None) -> None:
        self.kind, self.uri, self.store, self.endpoint_url = kind, uri, store, endpoint_url

    def state(self, tmp_path: Path) -> object:
        """Everything in the store, and every path under the test's own folder."""
        around = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
        be = self.store.backend
        if self.kind == "s3":
            objects = be.client.list_objects_v2(Bucket=be.bucket).get("Contents", [])
            uploads = be.client.list_multipart_uploads(Bucket=be.bucket).get("Uploads", [])
            return sorted((o["Key"], o["ETag"]) for o in objects), sorted(u["Key"] for u in uploads), around
        return sorted(str(p.relative_to(be.root)) for p in be.root.rglob("*")), around


@pytest.fixture(scope="module", params=["s3", "file"])
def table(request, tmp_path_factory):  # noqa: ANN001, ANN201
    root = tmp_path_factory.mktemp("bad-input")
    endpoint = None
    if request.param == "s3":
        endpoint = request.getfixturevalue("moto").endpoint_url
        bucket = f"bad-input-{uuid.uuid4().hex[:10]}"
        ensure_bucket(endpoint, bucket)
        uri = f"s3://{bucket}/team/iris"
        store = open_store(uri, s3_client=fast_client(endpoint))
    else:
        uri = (root / "store").as_uri()
        store = open_store(uri)
    for rid in ("r1", "r2"):
        promote(make_release(root / "src" / rid, small=1, seed=rid), rid, store, "production")
    return Table(request.param, uri, store, endpoint)


@pytest.fixture
def cli_env(table, monkeypatch):  # noqa: ANN001, ANN201
    monkeypatch.delenv("MODEL_RELEASE_STORE", raising=False)
    if table.kind == "s3":
        monkeypatch.setenv("MODEL_RELEASE_S3_ENDPOINT_URL", table.endpoint_url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "bad-input-test")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "bad-input-test")
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    return table


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_store_cli_input_is_one_line_exit_2_and_changes_nothing(cli_env, tmp_path, capsys, case):
    table = cli_env
    _, argv, expected = case
    argv = [a.format(uri=table.uri, tmp=tmp_path) for a in argv]
    before = table.state(tmp_path)
    capsys.readouterr()
    code = model_release_main(["store", *argv])
    out = capsys.readouterr()
    assert code == 2, out.err
    assert out.out == "" and out.err.count("\n") == 1 and "Traceback" not in out.err, out.err
    assert expected in out.err, out.err
    assert SECRET not in out.err
    assert table.state(tmp_path) == before
    assert not (tmp_path.parent / "escaped").exists() and not (tmp_path / "escaped").exists()


def test_top_level_rollback_refuses_bad_input_the_same_way(cli_env, tmp_path, capsys):
    table = cli_env
    before = table.state(tmp_path)
    for argv, expected in (
        (["rollback", "--store", table.uri, "--release", "../r1"], "release id '../r1' is not valid"),
        (["rollback", "--store", f"{table.uri}#x"], "has a fragment '#x'"),
        (["rollback", "--store", table.uri, "--channel", "prod uction"], "channel 'prod uction' is not valid"),
    ):
        code = model_release_main(argv)
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and expected in err, err
    assert table.state(tmp_path) == before


def test_open_store_refuses_what_it_used_to_open_as_another_store(tmp_path):
    # a fragment or query was dropped (the base store opened); percent-decoding escaped the folder
    for uri, why in ((f"{(tmp_path / 's').as_uri()}#staging", "fragment"), ("s3://bucket/p?prefix=other", "query"),
                     (f"file://{tmp_path}/a%2F..%2F..%2Fescaped", "%2F"), (f"file://{tmp_path}/a/%2e%2e/x", "'..'")):
        with pytest.raises(SpecError, match="is not valid") as err:
            open_store(uri, s3_client=object())
        assert why in str(err.value)
    assert list(tmp_path.iterdir()) == []
    ok = open_store(f"file://{tmp_path}/with%20space")  # ordinary percent-encoding still works
    assert ok.backend.root == tmp_path / "with space" and not ok.backend.root.exists()


# -- item 5: read-only commands create nothing -------------------------------------------------------
def test_read_only_commands_on_a_typod_local_path_create_nothing(tmp_path, capsys):
    typo = tmp_path / "stores" / "iris-typo"
    for argv in (["history", "--channel", "production"], ["releases"], ["verify", "--release", "r1"], ["verify", "--release", "r1", "--deep"],
                 ["rollback"], ["retention", "--keep", "1"], ["repair-pointer", "--channel", "production", "--release", "r1"]):
        code = store_main([*argv, "--store", typo.as_uri()])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and f"local store folder {typo} does not exist" in err, err
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "file").write_text("not a folder")
    code = store_main(["releases", "--store", (tmp_path / "file").as_uri()])
    assert code == 2 and "is not a folder" in capsys.readouterr().err


def test_read_only_commands_on_s3_create_nothing(moto, monkeypatch, capsys):
    monkeypatch.setenv("MODEL_RELEASE_S3_ENDPOINT_URL", moto.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "bad-input-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "bad-input-test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    bucket = f"empty-{uuid.uuid4().hex[:10]}"
    ensure_bucket(moto.endpoint_url, bucket)
    for argv in (["history"], ["releases"], ["verify", "--release", "r1"]):
        code = store_main([*argv, "--store", f"s3://{bucket}/typo"])
        capsys.readouterr()
        assert code in (0, 2)  # verify of a release the empty store does not have: bad input
    client = fast_client(moto.endpoint_url)
    assert client.list_objects_v2(Bucket=bucket).get("KeyCount") == 0
    missing = f"missing-{uuid.uuid4().hex[:10]}"
    code = store_main(["history", "--store", f"s3://{missing}/p"])
    err = capsys.readouterr().err
    assert code == 4 and err.count("\n") == 1 and f"bucket {missing!r} does not exist" in err, err
    assert missing not in [b["Name"] for b in client.list_buckets()["Buckets"]]


# -- item 10: the write probe ------------------------------------------------------------------------
def test_check_writable_on_moto(moto):
    client = fast_client(moto.endpoint_url)
    missing = open_store("s3://no-such-bucket-for-probe/team", s3_client=client)
    with pytest.raises(StoreError) as err:
        missing.check_writable()
    assert type(err.value) is StoreError
    assert "bucket 'no-such-bucket-for-probe' does not exist" in str(err.value) and "create it" in str(err.value)
    with pytest.raises(StoreError, match="does not exist"):
        missing.check_readable()
    ensure_bucket(moto.endpoint_url, "probe-ok")
    store = open_store("s3://probe-ok/team", s3_client=client)
    store.check_writable()
    store.check_readable()
    assert client.list_objects_v2(Bucket="probe-ok").get("KeyCount") == 0  # the probe left nothing
    assert client.list_multipart_uploads(Bucket="probe-ok").get("Uploads", []) == []


def _immutable(folder: Path) -> bool:
    """Make ``folder`` unwritable even for root (chattr +i); chmod for anyone else."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return True
    return subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0


def _mutable(folder: Path) -> None:
    if os.geteuid() != 0:
        folder.chmod(0o755)
    else:
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True)


def test_check_writable_on_a_local_folder(tmp_path):
    to_create = open_store((tmp_path / "new" / "store").as_uri())
    to_create.check_writable()  # its parent is writable: a promotion will create it
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(SpecError, match="does not exist"):
        to_create.check_readable()

    (tmp_path / "a-file").write_text("x")
    under_file = open_store((tmp_path / "a-file" / "store").as_uri())
    with pytest.raises(StoreError, match=f"its parent {tmp_path / 'a-file'} is a file, not a folder"):
        under_file.check_writable()

    locked = tmp_path / "locked"
    (locked / "store").mkdir(parents=True)
    if not _immutable(locked / "store"):
        pytest.skip("this machine can make no folder unwritable for this user (no chattr)")
    try:
        store = open_store((locked / "store").as_uri())
        with pytest.raises(StoreError) as err:
            store.check_writable()
        assert type(err.value) is StoreError
        assert f"local store folder {locked / 'store'} is not writable" in str(err.value)
        assert "permissions" in str(err.value)
        store.check_readable()  # reading it is fine
    finally:
        _mutable(locked / "store")
    assert list((locked / "store").iterdir()) == []
