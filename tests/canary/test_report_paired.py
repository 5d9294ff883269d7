"""The report page's paired sections (flips, per class and per slice, calibration), drawn from report.json's
``quality.paired`` as the judge writes it: bounded at any class count, and where a section cannot be drawn
(no ground truth, no champion, a regressor, no class scores) its place says why.

The reports here are built by the real judge functions (:mod:`model_release.canary.judge.paired_quality`)
on synthetic answers; a real release's page, opened in Chromium, is in tests/e2e/test_report_pages.py.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from model_release.canary.judge.outcome import finite
from model_release.canary.judge.paired_quality import PairedLimits, classifier_findings, regressor_findings
from model_release.canary.judge.quality import Classified
from model_release.canary.report import plotdata as pd
from model_release.canary.report.decision import terminal
from model_release.canary.report.document import write_reports
from model_release.canary.report.page import render_html

BASE = {
    "release": "iris", "release_id": "iris-2", "passed": True, "verdict": "passed",
    "model": {"name": "iris-classifier", "version": "3"},
    "server": {"version": "2.51.0", "mode": "local", "description": "CPU"},
    "champion": {"kind": "served", "name": "release iris-1 (iris-classifier v2)", "release_id": "iris-1"},
    "gates": [{"name": "quality.accuracy", "passed": True, "setting": "canary.quality.accuracy", "candidate": 0.9,
               "champion": 0.9, "limit": "at most 0.01 worse", "message": "fine"}],
}


def _scores(predicted: np.ndarray, classes: int, confidence: float, rng: np.random.Generator) -> np.ndarray:
    """Class scores whose top-1 is ``predicted`` with about ``confidence``, the rest spread over the other classes."""
    top = np.clip(confidence + rng.normal(scale=0.08, size=len(predicted)), 1.0 / classes + 0.01, 0.999)
    s = np.repeat(((1 - top) / (classes - 1))[:, None], classes, axis=1)
    s[np.arange(len(predicted)), predicted] = top
    return s


def _reads(n: int = 600, classes: int = 3, *, seed: int = 0, scores: bool = True,
           support: np.ndarray | None = None) -> tuple[Classified, Classified]:
    """A candidate and a champion on the same rows: about 90% right each, differing on some rows."""
    rng = np.random.default_rng(seed)
    p = support / support.sum() if support is not None else None
    truth = rng.choice(classes, n, p=p)
    mine = np.where(rng.random(n) < 0.9, truth, rng.integers(0, classes, n))
    theirs = np.where(rng.random(n) < 0.9, truth, rng.integers(0, classes, n))
    served = [f"c{i:03d}" for i in range(classes)] if classes > 3 else ["setosa", "versicolor", "virginica"][:classes]
    return (Classified(served, truth, mine, _scores(mine, classes, 0.9, rng) if scores else None),
            Classified(served, truth, theirs, _scores(theirs, classes, 0.7, rng) if scores else None))


def _quality(mine: Classified, theirs: Classified | None, limits: PairedLimits | None = None, **kw) -> dict:  # noqa: ANN003
    """The report's ``quality`` section as the judge writes it (``quality.paired``: its sections and findings)."""
    findings, sections = classifier_findings(mine, theirs, limits or PairedLimits(), **kw)
    paired = finite({**sections, "findings": [f.to_dict() for f in findings]})
    accuracy = lambda r: float((r.predicted == r.truth).mean())  # noqa: E731
    return json.loads(json.dumps({
        "task": "classification", "target": "species", "rows": len(mine.truth),
        "candidate": {"accuracy": accuracy(mine), "log_loss": 0.3}, "champion": {"accuracy": accuracy(theirs), "log_loss": 0.5}
        if theirs is not None else None, "paired": paired}))


def _sections(page: str) -> dict[str, str]:
    """data-section -> the HTML of that collapsible part."""
    return dict(re.findall(r"<details class='paired' data-section='([^']+)'[^>]*>(.*?)</details>", page, flags=re.S))


def _placeholder(page: str, label: str) -> str | None:
    found = re.search(rf"<figure class='plot none' data-plot='{label}'><div class='placeholder'>([^<]*)<", page)
    return found.group(1) if found else None


# --- the data: bounded, from quality.paired ----------------------------------------------------------------


def test_the_paired_plot_data_stays_bounded_with_300_classes_and_keeps_the_blocked_class() -> None:
    support = np.r_[np.full(8, 60.0), np.full(292, 1.0)]  # 8 classes gated (>= 30 rows), 292 only reported
    mine, theirs = _reads(n=6000, classes=300, seed=3, support=support)
    collapsed = mine.truth == 5  # the candidate never answers class c005 right: its recall collapses
    mine.predicted[collapsed] = 6
    slices = {"region": np.array([f"r{i % 40:02d}" for i in range(6000)], dtype=object)}
    quality = _quality(mine, theirs, PairedLimits(bins=50), slices=slices)
    assert len(quality["paired"]["classes"]) == 300  # the judge's table keeps every class; the page's data does not

    data = pd.paired_section(quality)

    classes = data["classes"]
    assert len(classes["rows"]) == pd.MAX_CLASSES and classes["classes"] == 300
    assert classes["left_out"]["classes"] == 300 - pd.MAX_CLASSES and classes["gated"] >= 8
    kept = {r["class"]: r for r in classes["rows"]}
    assert kept["c005"]["recall_outcome"] == "block" and kept["c005"]["recall_change"] < -0.5
    assert [r["class"] for r in classes["rows"]] == sorted(kept)  # shown in the model's class order
    assert len(data["flips"]["by_class"]) <= pd.MAX_CLASSES and data["flips"]["by_class"][0]["class"] == "c005"
    region = data["slices"]["columns"]["region"]
    assert region["slices"] == 40 and len(region["rows"]) == pd.MAX_SLICES and region["left_out"] == 40 - pd.MAX_SLICES
    bins = data["reliability"]["candidate"]["bins"]
    assert len(bins) <= pd.MAX_RELIABILITY_BINS and data["reliability"]["candidate"]["bins_judged"] == 50
    assert sum(b["rows"] for b in bins) == quality["paired"]["reliability"]["candidate"]["rows"]
    assert len(json.dumps(data)) < 40_000

    page = render_html({**BASE, "quality": quality})
    table = _sections(page)["classes"]
    assert table.count("<tr") == 2 + pd.MAX_CLASSES and "The other 280" in table
    assert "<details class='paired' data-section='classes' open>" in page  # a blocked class opens the table


def test_reliability_bins_merge_by_their_rows() -> None:
    bins = [{"lower": i / 4, "upper": (i + 1) / 4, "rows": r, "confidence": c, "accuracy": a}
            for i, (r, c, a) in enumerate([(1, 0.1, 0.0), (3, 0.3, 1.0), (0, None, None), (2, 0.9, 0.5)])]
    merged = pd.merge_bins(bins, most=2)
    assert merged == [{"lower": 0.0, "upper": 0.5, "rows": 4, "confidence": 0.25, "accuracy": 0.75},
                      {"lower": 0.5, "upper": 1.0, "rows": 2, "confidence": 0.9, "accuracy": 0.5}]
    assert pd.merge_bins(bins, most=4) == bins


def test_write_reports_keeps_the_paired_plot_data_in_report_json(tmp_path) -> None:
    mine, theirs = _reads()
    report = {**BASE, "quality": _quality(mine, theirs)}
    json_path, html_path = write_reports(tmp_path, report)
    written = json.loads(json_path.read_text())
    assert written["plots"]["paired"] == json.loads(json.dumps(pd.paired_section(report["quality"])))
    assert "data-section='flips'" in html_path.read_text()
    assert pd.with_paired_plots({**BASE, "quality": {"skipped": "no ground truth"}}).get("plots") is None


# --- the page ----------------------------------------------------------------------------------------------


def test_flips_sit_side_by_side_with_the_bound_and_p_value_the_gates_state() -> None:
    mine, theirs = _reads()
    quality = _quality(mine, theirs)
    flips = quality["paired"]["flips"]

    page = render_html({**BASE, "quality": quality})

    part = _sections(page)["flips"]
    header = part[part.index("<th class='neg'>"):]
    assert header.index("negative flips") < header.index("positive flips")
    first = re.search(r"<td><b>all golden rows</b></td>(.*?)</tr>", part).group(1)
    n = flips["rows"]
    assert f"{flips['negative']} <span class='muted'>({flips['negative'] / n:.2%})" in first
    assert f"{flips['positive']} <span class='muted'>({flips['positive'] / n:.2%})" in first
    # the limit is the larger of 5% and the champion's error rate (canary.champion.max_negative_flips_per_error 1.0)
    assert flips["allowed_share"] == max(0.05, flips["champion_error"])
    assert f"at most {flips['negative_share']['upper']:.1%} with 95% confidence; limit {flips['allowed_share']:.1%}" in first
    gates = {f["name"]: f for f in quality["paired"]["findings"]}
    assert gates["flips.negative"]["message"].replace("'", "&#x27;") in part
    assert "(p = " in gates["quality.accuracy"]["message"] and gates["quality.accuracy"]["message"] in part
    assert "<details class='paired' data-section='flips' open>" in page


def test_per_class_table_shows_both_models_the_change_and_which_classes_are_gated() -> None:
    mine, theirs = _reads(n=200, support=np.array([10.0, 50.0, 40.0]))  # setosa about 20 rows of 200: reported only
    quality = _quality(mine, theirs)
    row = {r["class"]: r for r in quality["paired"]["classes"]}

    part = _sections(render_html({**BASE, "quality": quality}))["classes"]

    setosa = re.search(r"<td><b>setosa</b></td>(.*?)</tr>", part, flags=re.S).group(1)
    answers = min(row["setosa"]["answered"].values())
    assert f">{row['setosa']['support']}<" in setosa
    assert (f"reported only (recall: {row['setosa']['support']} rows, precision: {answers} answers; a class needs 30 "
            "(canary.classes.min_support))") in setosa
    versicolor = re.search(r"<td><b>versicolor</b></td>(.*?)</tr>", part, flags=re.S).group(1)
    recall = row["versicolor"]["recall"]
    cells = re.findall(r"<td class='num'>(.*?)</td>", versicolor)
    assert cells[1:4] == [f"{recall['candidate']:.1%}", f"{recall['champion']:.1%}", cells[3]]
    change = (recall["candidate"] - recall["champion"]) * 100
    assert f"{change:+.1f} pts" in cells[3] and "recall <span class='mark passed'>✓ pass</span>" in versicolor


def test_the_reliability_diagram_is_inline_svg_with_text_and_ece_and_log_loss_beside_it() -> None:
    mine, theirs = _reads()
    quality = _quality(mine, theirs)

    page = render_html({**BASE, "quality": quality})

    part = _sections(page)["calibration"]
    figure = re.search(r"<figure class='plot' data-plot='reliability'>(<svg .*?</svg>)", part, flags=re.S).group(1)
    assert "<text" in figure and "top-1 class score" in figure and "calibrated" in figure  # text stays text
    ece = quality["paired"]["reliability"]["candidate"]["ece"]
    assert f"ECE {ece:.4g} (champion {quality['paired']['reliability']['champion']['ece']:.4g})" in part
    assert "log loss 0.3 (champion 0.5)" in part and "quality.log_loss" in part
    assert "<script" not in page and "http://" not in page and "https://" not in page


def test_without_a_champion_each_part_says_so_and_the_candidates_calibration_is_drawn() -> None:
    mine, _ = _reads()
    report = {**BASE, "champion": {"kind": "none", "reason": "this is the channel's first release"},
              "quality": _quality(mine, None)}

    page = render_html(report)

    parts = _sections(page)
    for key in ("flips", "classes"):
        assert f"<p class='none' data-section='{key}'>No champion: this is the channel&#x27;s first release</p>" in parts[key]
    assert "data-plot='reliability'><svg" in parts["calibration"]
    assert "No champion: this is the channel&#x27;s first release." in parts["calibration"]


@pytest.mark.parametrize(("case", "quality", "says"), [
    ("no ground truth", {"skipped": "no ground truth: golden.target is not set"}, "No ground truth: golden.target is not set"),
    ("regressor", {"task": "regression", "candidate": {"rmse": 1.0}, "paired": {}}, None),
    ("labels only", None, None),
])
def test_where_a_part_cannot_be_drawn_its_place_says_why(case, quality, says) -> None:
    if case == "labels only":
        mine, theirs = _reads(scores=False)
        quality = _quality(mine, theirs)

    page = render_html({**BASE, "quality": quality})

    parts = _sections(page)
    reliability = _placeholder(page, "reliability")
    if case == "no ground truth":
        assert reliability == says
        for key in ("flips", "classes"):
            assert f"<p class='none' data-section='{key}'>{says}</p>" in parts[key]
    elif case == "regressor":
        assert reliability == "No class scores: a regressor&#x27;s predictions carry no confidence to calibrate"
        assert ("No flips for a regressor: its rows are not right or wrong</p>" in parts["flips"]  # no champion: no changes above
                and "No classes for a regressor" in parts["classes"])
    else:
        assert reliability == "No class scores: the candidate serves labels only, so there is nothing to calibrate"
        assert "all golden rows" in parts["flips"] and "<td><b>setosa</b></td>" in parts["classes"]


def test_a_regressors_paired_changes_are_listed_with_their_bounds() -> None:
    rng = np.random.default_rng(2)
    truth = rng.normal(size=500)
    findings = regressor_findings(truth, truth + rng.normal(scale=0.5, size=500), truth + rng.normal(scale=0.5, size=500))
    quality = {"task": "regression", "candidate": {"rmse": 0.5}, "champion": {"rmse": 0.5},
               "paired": finite({"findings": [f.to_dict() for f in findings]})}

    parts = _sections(render_html({**BASE, "quality": quality}))
    part = parts["changes"]
    assert "(its paired changes are above)" in parts["flips"]

    rmse = next(f for f in quality["paired"]["findings"] if f["name"] == "quality.rmse")
    assert "<b>quality.rmse</b>" in part and f"{rmse['data']['drop']['upper']:.4g}" in part


def test_slices_get_their_own_table_when_the_golden_set_has_them() -> None:
    mine, theirs = _reads(n=600)
    slices = {"region": np.array(["eu", "us", "apac"] * 195 + ["tiny"] * 15, dtype=object)}
    part = _sections(render_html({**BASE, "quality": _quality(mine, theirs, slices=slices)}))["slices"]
    assert "golden column region" in part
    for value in ("eu", "us", "apac"):
        assert f"<td><b>region={value}</b></td>" in part
    assert re.search(r"<td><b>region=tiny</b></td>.*?reported only \(15 golden rows", part, flags=re.S)


def test_a_canary_that_stopped_early_says_so_in_each_part() -> None:
    page = render_html({**BASE, "gates": None, "passed": False, "verdict": "rejected"})
    assert "not measured: the canary stopped before this" in _sections(page)["flips"]
    assert _placeholder(page, "reliability").startswith("not measured")


def test_the_paired_parts_come_after_the_decision_and_before_latency() -> None:
    mine, theirs = _reads()
    page = render_html({**BASE, "quality": _quality(mine, theirs)})
    assert (page.index("</header>") < page.index("<h2>Against the production champion") < page.index("<h2>Row by row")
            < page.index("data-section='flips'") < page.index("data-section='calibration'") < page.index("<h2>Latency"))


def test_the_terminal_still_prints_one_line_per_gate_with_the_paired_gates() -> None:
    mine, theirs = _reads()
    quality = _quality(mine, theirs)
    gates = [{"name": f["name"], "passed": f["passed"], "setting": f["setting"], "candidate": f["candidate"],
              "champion": f["champion"], "limit": f["limit"], "message": f["message"]} for f in quality["paired"]["findings"]
             if not f["name"].startswith("class.")]
    text = terminal({**BASE, "gates": gates, "quality": quality})
    lines = text.splitlines()
    assert all(len(line) <= 120 for line in lines), [line for line in lines if len(line) > 120]
    flips = quality["paired"]["flips"]
    line = next(line for line in lines if line.startswith("✓ flips.negative"))
    assert f"{flips['negative'] / flips['rows']:.2%}" in line and line.endswith("its right rows")  # a share, not 0.0517
    ece = quality["paired"]["reliability"]
    assert (f"row by row: {flips['negative']} of 600 rows the champion got right are now wrong, {flips['positive']} now right"
            f" · ECE {ece['candidate']['ece']:.4g} (champion {ece['champion']['ece']:.4g})") in lines
    assert "row by row" not in terminal(BASE)
