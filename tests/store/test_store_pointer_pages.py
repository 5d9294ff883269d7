"""A pointer move renders nothing; every caller that moved the pointer rewrites the channel's page.

Real stores (moto over HTTP and a local folder) with small release folders.
"""

from __future__ import annotations

import re
from pathlib import Path

from model_release.pipeline import Services, keep_rejected_reports
from model_release.spec import parse_spec
from model_release.store import move_channel, promote, read_channel, repair_pointer, rollback, stage_release
from model_release.store.cli import main as store_cli
from model_release.store.keys import page_key
from model_release.types import CanaryResult
from model_release.workspace import Workspace

from .support import history_agrees, make_release
from .test_channel_page import _rejected_report


def _rows(store, channel: str = "production") -> list[tuple[str, str]]:
    got = store.backend.get_bytes(page_key(channel))
    assert got is not None, "the channel's page was not written"
    return re.findall(r"data-action='([a-z]+)' data-release='([^']+)'", got[0].decode())


def test_a_move_writes_pointer_and_history_and_no_page(kit, tmp_path: Path) -> None:
    store = kit.store()
    for rid in ("r1", "r2"):
        stage_release(make_release(tmp_path / rid, small=1, seed=rid), rid, store)
    move_channel(store, "production", "r1")
    pointer, previous, moved = move_channel(store, "production", "r2")
    assert (pointer.release_id, previous, moved) == ("r2", "r1", True)
    assert [(e.seq, e.release_id) for e in history_agrees(store, "production")] == [(1, "r1"), (2, "r2")]
    assert read_channel(store, "production").release_id == "r2"
    assert store.backend.get_bytes(page_key("production")) is None


def test_promote_rollback_repair_the_cli_and_a_rejection_each_rewrite_the_page(kit, tmp_path: Path) -> None:
    store = kit.store()
    promote(make_release(tmp_path / "r1", small=1, seed="r1"), "r1", store, "production")
    assert _rows(store) == [("promote", "r1")]
    promote(make_release(tmp_path / "r2", small=1, seed="r2"), "r2", store, "production")
    assert _rows(store) == [("promote", "r1"), ("promote", "r2")]
    rollback(store, "production")
    assert _rows(store)[-1] == ("rollback", "r1")
    repair_pointer(store, "production", "r2")
    assert _rows(store)[-1] == ("repair", "r2")
    if kit.kind == "file":  # the CLI opens the store by URI (the S3 kit's endpoint is the test's client)
        assert store_cli(["rollback", "--store", kit.uri, "--channel", "production", "--release", "r1"]) == 0
        assert _rows(store)[-1] == ("rollback", "r1")
        assert store_cli(["repair-pointer", "--store", kit.uri, "--channel", "production", "--release", "r2"]) == 0
        assert _rows(store)[-1] == ("repair", "r2")
    spec = parse_spec({"name": "iris", "model": {"name": "iris-classifier", "alias": "candidate"},
                       "promote": {"store": kit.uri}})
    json_path, html_path = _rejected_report(tmp_path, "r3")
    result = CanaryResult(passed=False, report_json=str(json_path), report_html=str(html_path), summary="rejected")
    assert keep_rejected_reports(spec, Workspace("r3", tmp_path / "ws"), Services(open_store=lambda uri: store), result)
    assert ("rejected", "r3") in _rows(store)
    history_agrees(store, "production")
