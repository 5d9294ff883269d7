"""The channel page's roll-outs: each roll-out, its waves, the watch's figures beside the old release's.

The records are written by the roll-out's own record writer (:func:`model_release.serve.record.save_record`)
with watch verdicts the watch's own rules judged (:func:`model_release.serve.watch.rules.judge`), so a
change of either format shows here. A local-folder store; the live roll-outs that write the page are in
tests/serve/test_watch_rollout.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from model_release.serve.record import RolloutRecord, ServerRecord, save_record
from model_release.serve.watch import Release, ServerInterval, WatchSpec, WatchVerdict
from model_release.serve.watch.rules import FAIL, PASS, judge
from model_release.store import open_store, promote, rollback, write_channel_page
from model_release.store import rollouts_page
from model_release.store.keys import page_key, rollouts_prefix
from model_release.store.rollouts_page import MAX_PLOTTED, MAX_POINTS, MAX_ROLLOUTS, read_rollouts, rollouts_html

from ..plot_layout import assert_laid_out, capture_plots
from .support import make_release

CHANNEL = "production"
SPEC = WatchSpec.model_validate({"bake_s": 20, "interval_s": 10, "min_requests": 5, "budget_s": 60})


def _interval(server: str, role: str, release: str, *, requests: float, failures: float = 0, mean_us: float = 2000,
              p99_us: float = 4000) -> ServerInterval:
    ok = requests - failures
    return ServerInterval(server=server, role=role, release=release, model="iris", version=1, requests=requests,
                          failures=failures, request_us=mean_us * ok, queue_us=100 * ok, p99_us=p99_us, reset=False)


def _verdict(new_id: str, old_id: str, intervals: list[tuple[list[ServerInterval], list[ServerInterval]]],
             baseline: dict[str, float] | None = None) -> dict:
    """A wave's watch as the roll-out records it: each interval judged by the watch's rules, then the verdict."""
    ms = tuple(judge(SPEC, new, old, baseline=baseline, index=i, at_s=10.0 * (i + 1)) for i, (new, old) in enumerate(intervals))
    outcome = FAIL if any(m.status == FAIL for m in ms) else PASS
    sentence = next((m.reason for m in ms if m.status == FAIL), ms[-1].reason)
    return WatchVerdict(outcome, sentence, "" if outcome == PASS else "see the record", new_id, old_id,
                        ms[-1].at_s, ms, {"error rate": 0.0}).as_dict()


def _store(tmp_path: Path):
    store = open_store((tmp_path / "store").as_uri())
    for rid in ("r1", "r2"):
        promote(make_release(tmp_path / rid, small=1, seed=rid, version=rid[-1]), rid, store, CHANNEL)
    return store


def _good_rollout(store, release_id: str = "r2", old: str = "r1", who: str = "ci@host") -> RolloutRecord:
    """Two waves, each watched and passed: serve-1 first beside serve-2 on the old release, then both."""
    record = RolloutRecord(CHANNEL, release_id, {"iris": 2}, run="manual__1", who=who)
    record.servers = [ServerRecord("serve-1", 1, old, release_id, "switched", seconds=1.2),
                      ServerRecord("serve-2", 2, old, release_id, "switched", seconds=0.8)]
    wave1 = [([_interval("serve-1", "new", release_id, requests=50, mean_us=2100)],
              [_interval("serve-2", "old", old, requests=50, mean_us=2000)])] * 2
    wave2 = [([_interval("serve-1", "new", release_id, requests=50), _interval("serve-2", "new", release_id, requests=50)],
              [])] * 2
    record.watch = [{"wave": 1, **_verdict(release_id, old, wave1)},
                    {"wave": 2, **_verdict(release_id, old, wave2, baseline={"error rate": 0.0, "mean request time": 2000.0})}]
    record.outcome, record.finished_at = "done", "2026-12-01T10:00:30.000000Z"
    save_record(store, record)
    return record


def test_a_rollout_with_two_watched_waves_shows_each_wave_its_servers_and_figures(tmp_path) -> None:
    store = _store(tmp_path)
    _good_rollout(store)
    write_channel_page(store, CHANNEL)
    page = (tmp_path / "store" / page_key(CHANNEL)).read_text()
    assert re.findall(r"<details class='rollout' data-rollout='(\d+)' data-release='([^']+)' data-outcome='([^']*)' open>",
                      page) == [("1", "r2", "done")]
    section = page[page.index("data-rollout='1'"):page.index("</details>")]
    assert re.findall(r"<tr data-wave='(\d)'>", section) == ["1", "2"]
    wave1, wave2 = section.split("<tr data-wave='")[1:3]
    assert "serve-1: <span class=''>switched</span> <span class='muted'>r1 &rarr; r2</span>" in wave1
    assert "serve-2" not in wave1 and "serve-2: <span class=''>switched</span>" in wave2
    # the figures judged last, the new release's against the old release's, and the limit
    assert "error rate: <b>0.0%</b> against 0.0%, limit 1.0% <span class='good'>ok</span>" in wave1
    assert "mean request time: <b>2.1 ms</b> against 2 ms, limit 3 ms" in wave1
    assert "mean request time: <b>2 ms</b> against 2 ms, limit 3 ms" in wave2  # the last wave: the carried baseline
    assert "2 measurement(s) in 20 s" in wave1 and "<span class='badge pass'>pass</span>" in wave2
    assert "by ci@host · run manual__1" in section
    assert "data-plot='rollout-1'" in section and "<svg" in section
    assert "Serving fleet:</b> last roll-out #1 of <code>r2</code>: <span class='badge pass'>done</span>" in page
    assert "2 of 2 server(s) on <code>r2</code>" in page
    assert "<script" not in page and "http://" not in page.split("</head>")[1]  # no script, no remote asset


def test_a_watch_rollback_shows_its_sentence_figures_servers_back_and_the_pointers_move(tmp_path) -> None:
    store = _store(tmp_path)
    back = rollback(store, CHANNEL, "r1")
    record = RolloutRecord(CHANNEL, "r2", {"iris": 2}, run="scheduled__2", who="airflow")
    record.servers = [ServerRecord("serve-1", 1, "r1", "r2", "switched", seconds=1.0),
                      ServerRecord("serve-2", 2, outcome="not reached")]
    bad = [([_interval("serve-1", "new", "r2", requests=1000, failures=41)], [_interval("serve-2", "old", "r1", requests=1000)])] * 2
    record.watch = [{"wave": 1, **_verdict("r2", "r1", bad)}]
    record.reason = "rolled back by the watch: " + record.watch[0]["sentence"]
    record.rolled_back = [ServerRecord("serve-1", 1, "r2", "r1", "switched", seconds=0.3)]
    record.pointer_back = back.to_dict()
    record.outcome = "rolled back"
    save_record(store, record)
    write_channel_page(store, CHANNEL)
    page = (tmp_path / "store" / page_key(CHANNEL)).read_text()
    assert record.reason == "rolled back by the watch: error rate 4.1% against 0.0%, limit 1.0%"
    section = page[page.index("data-rollout='1'"):page.index("</details>")]
    assert "data-outcome='rolled back' open>" in section and "<span class='badge fail'>rolled back</span>" in section
    assert "<p class='reason bad'>rolled back by the watch: error rate 4.1% against 0.0%, limit 1.0%</p>" in section
    assert "error rate: <b>4.1%</b> against 0.0%, limit 1.0% <span class='bad'>over</span>" in section
    assert "serve-2: <span class='muted'>not reached</span>" in section
    assert "<tr class='failed'><td>back</td><td>serve-1: <span class=''>switched</span> <span class='muted'>r2 &rarr; r1</span>" in section
    assert "the channel pointer moved back to <code>r1</code>" in section
    assert "data-plot='rollout-1'" in section
    # the history table's rollback row says the watch made it, and why
    row = re.search(r"<tr class='' data-action='rollback' data-release='r1'>.*?</tr>", page).group(0)
    assert ">rolled back by the watch: error rate 4.1% against 0.0%, limit 1.0% (roll-out #1 of r2); from r2</td>" in row


def test_a_rollouts_plot_is_laid_out_at_fixed_margins_with_every_text_inside(tmp_path, monkeypatch) -> None:
    """Two watched waves, each figure on an axes of its own, the legend above them."""
    drawn = capture_plots(monkeypatch, rollouts_page)
    store = _store(tmp_path)
    _good_rollout(store)
    write_channel_page(store, CHANNEL)
    assert [label for label, _ in drawn] == ["rollout-1"] and len(drawn[0][1].axes) >= 3
    assert_laid_out(drawn[0][1], "rollout-1")


def test_many_rollouts_and_long_watches_stay_bounded(tmp_path) -> None:
    store = _store(tmp_path)
    long_wave = [([_interval("serve-1", "new", "r2", requests=50)], [_interval("serve-2", "old", "r1", requests=50)])] * 200
    record = RolloutRecord(CHANNEL, "r2", {"iris": 2}, who="ci@host")
    record.servers = [ServerRecord("serve-1", 1, "r1", "r2", "switched")]
    record.watch = [{"wave": 1, **_verdict("r2", "r1", long_wave)}]
    record.outcome = "done"
    save_record(store, record)
    data, _ = store.backend.get_bytes(f"{rollouts_prefix(CHANNEL)}000001.json")
    for seq in range(2, MAX_ROLLOUTS + 6):  # the same record again: the page reads each record's number from its key
        store.backend.put_bytes(f"{rollouts_prefix(CHANNEL)}{seq:06d}.json", data)
    shown = read_rollouts(store, CHANNEL)
    assert shown.total == MAX_ROLLOUTS + 5 and [r["seq"] for r in shown.records] == list(range(6, MAX_ROLLOUTS + 6))
    html = "".join(rollouts_html(shown))
    assert re.findall(r"data-rollout='(\d+)'", html) == [str(s) for s in range(MAX_ROLLOUTS + 5, 5, -1)]  # newest first
    assert re.findall(r"data-plot='rollout-(\d+)'", html) == [str(s) for s in range(MAX_ROLLOUTS + 5, MAX_ROLLOUTS + 5 - MAX_PLOTTED, -1)]
    assert f"5 older roll-out(s) not shown: the page shows the newest {MAX_ROLLOUTS}" in html
    assert len(data) > 200_000 and len(html) < 600_000, (len(data), len(html))  # the page is not the records' sum
    # a long wave is drawn from at most MAX_POINTS measurements (plus the failing ones, always kept)
    ms = [{"at_s": i, "status": "fail" if i in (3, 777) else "pass"} for i in range(1000)]
    kept = rollouts_page._thin(ms)
    assert MAX_POINTS <= len(kept) <= MAX_POINTS + 3 and {3, 777, 999} <= {m["at_s"] for m in kept}
    assert rollouts_page._thin(ms[:MAX_POINTS]) == ms[:MAX_POINTS]  # just inside the limit: all of them


def test_an_oversized_or_damaged_record_is_named_and_the_page_still_written(tmp_path, monkeypatch) -> None:
    store = _store(tmp_path)
    _good_rollout(store)
    store.backend.put_bytes(f"{rollouts_prefix(CHANNEL)}000002.json", b"{not json")
    _good_rollout(store, who="ci@host.a")  # #3, a few bytes more than #1
    limit = store.backend.head(f"{rollouts_prefix(CHANNEL)}000001.json").size
    assert limit < store.backend.head(f"{rollouts_prefix(CHANNEL)}000003.json").size <= limit + 8
    monkeypatch.setattr(rollouts_page, "MAX_RECORD_BYTES", limit)  # #1 just at the limit (read), #3 just over it
    write_channel_page(store, CHANNEL)
    page = (tmp_path / "store" / page_key(CHANNEL)).read_text()
    assert re.findall(r"data-rollout='(\d+)'", page) == ["1"]
    assert "roll-out #2: its record " in page and "000002.json is damaged; left out" in page
    assert "roll-out #3: its record " in page and "over the page" in page


def test_a_hand_edited_record_never_breaks_the_page_and_its_text_is_escaped(tmp_path) -> None:
    store = _store(tmp_path)
    doc = {"release_id": "r2", "outcome": "<b>odd</b>", "reason": "<script>alert(1)</script>", "servers": "not a list",
           "watch": [{"wave": "x"}, {"wave": 1, "measurements": [{"checks": [{"figure": "p99", "new": "fast"}]}]}]}
    store.backend.put_bytes(f"{rollouts_prefix(CHANNEL)}000001.json", json.dumps(doc).encode())
    write_channel_page(store, CHANNEL)
    page = (tmp_path / "store" / page_key(CHANNEL)).read_text()
    assert "data-rollout='1'" in page and "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "no figure judged" in page
