"""The audit trail in the store: rejected candidates' reports (no models) and each channel's history page.

A local-folder store with small release folders; the page rendered from real canary runs in a real
browser is in tests/e2e/test_report_pages.py.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from model_release.errors import ServiceUnavailable
from model_release.pipeline import Services, keep_rejected_reports
from model_release.spec import parse_spec
from model_release.store import (
    ModelStore, keep_rejection, open_store, promote, read_channel, rejections, rollback, write_channel_page,
)
from model_release.store.history_page import events
from model_release.store.keys import MANIFEST, page_key
from model_release.types import CanaryResult
from model_release.workspace import Workspace

from ..plot_layout import assert_laid_out, capture_plots
from .support import TriggerBackend, make_release


def _release(tmp_path: Path, name: str, accuracy: float, p99: float) -> Path:
    """A release folder whose manifest carries the canary's verdict and key figures, as promotion writes them."""
    folder = make_release(tmp_path / name, small=1, seed=name, version=name[-1])
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["canary"] = {"passed": True, "figures": {"quality": {"task": "classification", "candidate": {"accuracy": accuracy}},
                                                      "timing": {"p99_ms": p99}},
                          "trigger": {"actor": "airflow", "dag_id": "model_release", "dag_run_id": f"manual__{name}"}}
    (folder / MANIFEST).write_text(json.dumps(manifest))
    return folder


def _rejected_report(tmp_path: Path, release_id: str) -> tuple[Path, Path]:
    report = {"release_id": release_id, "passed": False, "verdict": "rejected",
              "reasons": ["accuracy of the served candidate is 0.86 [canary.quality.accuracy]"],
              "model": {"name": "iris", "version": "3"}, "champion": {"kind": "served", "release_id": "r2"},
              "quality": {"task": "classification", "candidate": {"accuracy": 0.86}},
              "load_phase": {"candidate": {"p99_ms": 3.0}},
              "gates": [{"name": "quality.accuracy", "passed": False}]}
    json_path, html_path = tmp_path / "report.json", tmp_path / "report.html"
    json_path.write_text(json.dumps(report))
    html_path.write_text("<html>rejected</html>")
    return json_path, html_path


def test_a_rejection_keeps_its_reports_and_record_but_no_model(tmp_path) -> None:
    store = open_store((tmp_path / "store").as_uri())
    json_path, html_path = _rejected_report(tmp_path, "iris-bad")
    where = keep_rejection(store, "iris-bad", "production", json_path, html_path, trigger={"actor": "ci@host"})
    assert where == f"{store.uri}/rejected/iris-bad/"
    keys = sorted(o.key for o in store.backend.list("rejected/"))
    assert keys == ["rejected/iris-bad/rejected.json", "rejected/iris-bad/reports/report.html", "rejected/iris-bad/reports/report.json"]
    (record,) = rejections(store, "production")
    assert record.reasons == ["accuracy of the served candidate is 0.86 [canary.quality.accuracy]"]
    assert record.figures["quality"]["candidate"] == {"accuracy": 0.86} and record.figures["timing"]["p99_ms"] == 3.0
    assert record.champion == "r2" and record.rejected_by == {"actor": "ci@host"}
    assert rejections(store, "staging") == [] and store.release_ids() == []  # not a release, and no other channel's


def test_the_channel_page_lists_promotions_the_rejection_and_the_rollback_in_order(tmp_path) -> None:
    store = open_store((tmp_path / "store").as_uri())
    promote(_release(tmp_path, "r1", 0.97, 4.0), "r1", store, "production")
    promote(_release(tmp_path, "r2", 0.98, 3.5), "r2", store, "production")
    json_path, html_path = _rejected_report(tmp_path, "r3")
    keep_rejection(store, "r3", "production", json_path, html_path, trigger={"actor": "ci@host"})
    rollback(store, "production")  # the page is rewritten by the rollback itself
    evs = events(store, "production")
    assert [(e.action, e.release_id) for e in evs] == [("promote", "r1"), ("promote", "r2"), ("rejected", "r3"), ("rollback", "r1")]
    page = (tmp_path / "store" / page_key("production")).read_text()
    rows = re.findall(r"data-action='([a-z]+)' data-release='([^']+)'", page)
    assert rows == [("promote", "r1"), ("promote", "r2"), ("rejected", "r3"), ("rollback", "r1")]
    assert "model_release / manual__r2" in page and "Now serving:</b> <code>r1</code>" in page
    links = re.findall(r"<a href='([^']+)'>report</a>", page)
    assert links == ["../releases/r1/reports/report.html", "../releases/r2/reports/report.html",
                     "../rejected/r3/reports/report.html", "../releases/r1/reports/report.html"]
    assert all((tmp_path / "store" / "channels" / link).resolve().is_file() for link in links)
    assert "<svg" in page and "data-plot='channel-figures'" in page
    # a rejection's row names the gates that failed; its reasons in full are on hover (and in its report)
    assert ("title='accuracy of the served candidate is 0.86 [canary.quality.accuracy]'>failed quality.accuracy "
            "(judged against r2)</td>") in page


def test_the_history_plot_is_laid_out_at_fixed_margins_with_every_text_inside(tmp_path, monkeypatch) -> None:
    """Wide tick numbers (a p99 in the thousands of ms) and many releases (two-line dates under each)."""
    from model_release.store import history_page

    drawn = capture_plots(monkeypatch, history_page)
    store = open_store((tmp_path / "store").as_uri())
    for i in range(1, 13):
        promote(_release(tmp_path, f"r{i}", 0.9 + i / 200, 3.5 * 10 ** (i % 4)), f"r{i}", store, "production")
    drawn.clear()
    write_channel_page(store, "production")
    assert [label for label, _ in drawn] == ["channel-figures"]
    assert_laid_out(drawn[0][1], "channel-figures")


def test_a_page_that_cannot_be_written_never_fails_the_promotion(tmp_path, caplog) -> None:
    inner = open_store((tmp_path / "store").as_uri()).backend
    backend = TriggerBackend(inner, lambda op, key: op == "put_bytes" and key.endswith(".html"), fail_after_trigger=True)
    store = ModelStore(backend)
    with caplog.at_level(logging.WARNING, logger="model_release.store.history_page"):
        result = promote(_release(tmp_path, "r1", 0.97, 4.0), "r1", store, "production")
    assert result.channel == "production" and read_channel(ModelStore(inner), "production").release_id == "r1"
    assert "channel page of production" in caplog.text and "model-release store page" in caplog.text
    assert not (tmp_path / "store" / "channels" / "production.html").exists()
    assert write_channel_page(ModelStore(inner), "production").endswith("channels/production.html")  # by hand, later


def test_a_rejection_the_store_cannot_take_is_logged_and_the_reports_stay_in_the_workspace(tmp_path, caplog) -> None:
    spec = parse_spec({"name": "iris", "model": {"name": "iris-classifier", "alias": "candidate"},
                       "promote": {"store": "s3://model-store/iris"}})
    json_path, html_path = _rejected_report(tmp_path, "iris-x")
    result = CanaryResult(passed=False, report_json=str(json_path), report_html=str(html_path), summary="rejected")

    def unreachable(uri: str) -> ModelStore:
        raise ServiceUnavailable(f"the store {uri} did not answer (test)")

    with caplog.at_level(logging.WARNING, logger="model_release.pipeline"):
        assert keep_rejected_reports(spec, Workspace("iris-x", tmp_path / "ws"), Services(open_store=unreachable), result) is None
    assert "the rejected candidate's reports were not kept in the store s3://model-store/iris" in caplog.text
    assert f"they stay in the workspace at {json_path}" in caplog.text
