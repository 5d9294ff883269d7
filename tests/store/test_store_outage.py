"""The store going away in the middle of a promotion, at several points.

S3: a TCP proxy (``CuttableProxy``) sits between boto3 and the real moto server; cutting it drops
every connection and refuses new ones while moto keeps its state, which is what an endpoint
outage looks like to the client. The proxy is cut from inside the promotion at each point (after
some files, part-way through the multipart transfer of the large file, before verification,
and at the release.json, _COMPLETE and pointer writes, located by a trigger wrapper around the
backend that only calls ``proxy.go_away()``: the failure itself is the real network failure).
Local folder: there is no endpoint, so the same trigger wrapper makes every later store
operation fail. ``test_moto_killed_and_restarted`` shows the other path: moto itself killed
mid-upload and restarted (its in-memory state is lost, so the rerun uploads everything).
"""

from __future__ import annotations

import json

import pytest

from model_release.errors import InfraError
from model_release.local.moto_process import MotoServer, ensure_bucket
from model_release.store import open_store, promote, read_channel, verify_release

from .conftest import fast_client
from .support import CuttableProxy, TriggerBackend, history_agrees, make_release

pytestmark = pytest.mark.integration

BIG = 20 * 1024 * 1024

POINTS = {
    "after-3-files": None,  # from the progress callback
    "mid-multipart": None,  # by bytes through the proxy (S3 only)
    "before-verify": "first read of the prefix after an upload",
    "at-release-json": lambda op, key: op == "put_bytes" and key.endswith("/release.json"),
    "at-complete-marker": lambda op, key: op == "put_bytes" and key.endswith("/_COMPLETE"),
    "at-pointer": lambda op, key: op == "put_bytes" and key.startswith("channels/"),
}


def _trigger(point: str):  # noqa: ANN202
    rule = POINTS[point]
    return rule if callable(rule) else (lambda op, key: False)


@pytest.mark.parametrize("point", list(POINTS))
def test_outage_leaves_pointer_and_nothing_complete_then_rerun_completes(kit, tmp_path, point):
    if point == "mid-multipart" and kit.kind != "s3":
        pytest.skip("the local-folder store writes a file whole (temporary file + rename): no partial transfer to cut")
    rel = make_release(tmp_path / "new", small=30, big=BIG if point == "mid-multipart" else 0, seed="new")
    direct = kit.direct
    promote(make_release(tmp_path / "old", small=2, seed="old"), "iris-old", direct, "production")

    proxy = None
    if kit.kind == "s3":
        proxy = CuttableProxy(int(kit.endpoint_url.rsplit(":", 1)[1]))
        store = kit.store(proxy.endpoint_url)
        go_away = proxy.go_away
        wrapped = TriggerBackend(store.backend, _trigger(point), go_away)
    else:
        store = kit.store()
        wrapped = TriggerBackend(store.backend, _trigger(point), None, fail_after_trigger=True)
    if point == "before-verify":
        uploads: list[str] = []

        def before_verify(op: str, key: str) -> bool:
            if op == "put_file":
                uploads.append(key)
            return op in ("head", "list") and bool(uploads)  # the first read after the uploads

        wrapped.trigger = before_verify
    store.backend = wrapped
    progress = None
    if point == "after-3-files":
        def progress(p):  # noqa: ANN001
            if p.files_done >= 3:
                wrapped.fire()
    if point == "mid-multipart":
        proxy.cut_after_bytes(BIG // 2)  # the large file goes first: this lands inside its parts
    try:
        with pytest.raises(InfraError):
            promote(rel, "iris-new", store, "production", progress=progress)
        # the pointer is untouched and nothing looks complete
        assert read_channel(direct, "production").release_id == "iris-old"
        if point != "at-pointer":
            assert direct.read_record("iris-new") is None
            assert not verify_release(direct, "iris-new").ok
        else:  # everything up to the completion record went through: complete means verified
            assert verify_release(direct, "iris-new").ok
        uploaded_before = {o.key for o in direct.backend.list("releases/iris-new/")}
        if point == "after-3-files":
            assert len(uploaded_before) >= 3
        # the endpoint comes back; a rerun resumes and completes
        if proxy is not None:
            proxy.restore()
        store.backend = wrapped.inner
        result = promote(rel, "iris-new", store, "production")
    finally:
        if proxy is not None:
            proxy.close()
    files = json.loads((rel / "release.json").read_text())["files"]
    kept = {k[len("releases/iris-new/"):] for k in uploaded_before} & set(files)
    assert result.uploaded + result.skipped == len(files)
    if point != "mid-multipart":
        assert result.skipped >= len(kept)  # objects that made it across were not sent again
    assert verify_release(direct, "iris-new").ok and verify_release(direct, "iris-new", deep=True).ok
    assert read_channel(direct, "production").release_id == "iris-new"
    assert [e.release_id for e in history_agrees(direct, "production")] == ["iris-old", "iris-new"]


def test_moto_killed_and_restarted(tmp_path):
    rel = make_release(tmp_path / "r", small=20, seed="restart")
    server = MotoServer().start()
    try:
        ensure_bucket(server.endpoint_url, "restart")
        store = open_store("s3://restart/models", s3_client=fast_client(server.endpoint_url))

        def kill_after_two(p):  # noqa: ANN001
            if p.files_done == 2 and server.running:
                server.stop()

        with pytest.raises(InfraError):
            promote(rel, "iris-1", store, "production", progress=kill_after_two)
        assert not server.running
        server.start()  # same port; moto starts empty
        ensure_bucket(server.endpoint_url, "restart")
        result = promote(rel, "iris-1", store, "production")
        assert result.uploaded == result.objects and verify_release(store, "iris-1").ok
        assert read_channel(store, "production").release_id == "iris-1"
    finally:
        server.stop()
    assert not server.running


def test_an_unreachable_endpoint_says_whether_a_write_was_cut_and_a_read_changes_nothing() -> None:
    """A read-only command (history, releases, verify) must not speak of promotion; a write says it did not complete."""
    from model_release.errors import ServiceUnavailable
    from model_release.local.ports import free_port
    from model_release.store.s3 import S3Backend

    backend = S3Backend("model-store", "iris", fast_client(f"http://127.0.0.1:{free_port()}"))  # nothing listens there
    with pytest.raises(ServiceUnavailable) as read:
        backend.head("channels/production.json")
    assert "during HEAD of s3://model-store/iris/channels/production.json" in str(read.value)
    assert "nothing was changed" in str(read.value) and "promot" not in str(read.value)
    with pytest.raises(ServiceUnavailable) as write:
        backend.put_bytes("channels/production.json", b"{}")
    assert "this write did not complete" in str(write.value) and "a promotion resumes its uploads" in str(write.value)
