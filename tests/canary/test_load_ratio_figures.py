"""The load gates' figures: each ratio gate names its own, a pass rests on windows of enough requests, and the
rows a request carries fit the entry model (logic only: no server, no sleeps)."""

from __future__ import annotations

import pytest

from model_release.canary.judge import gates as gt
from model_release.canary.judge.latency_ratio import P99, RATIO_FIGURES, THROUGHPUT, load_ratio_findings, ratio_gate
from model_release.canary.measure.latency import CANDIDATE, CHAMPION, check_batch_rows, load_phase
from model_release.canary.measure.load import Histogram, Window
from model_release.errors import SpecError
from model_release.spec import parse_spec
from model_release.triton.server import EntryModel

BASE = {"name": "iris", "model": {"name": "m", "alias": "candidate"}}
#: window pairs of two same-speed models: well within both limits
SAME = {"pairs": 4, "p99_ratios": [1.0, 1.01, 0.99, 1.0], "throughput_ratios": [1.0, 0.99, 1.01, 1.0]}


def _load(**load):  # noqa: ANN003, ANN202
    return parse_spec({**BASE, "canary": {"load": load}}).canary.load


def _figures(p99: float, tput: float) -> dict:
    return {"p99_ms": p99, "throughput_rows_per_s": tput, "errors": 0, "requests": 500, "stable": True, "first_error": None}


# --- every ratio gate names its figure ------------------------------------------------------------------


@pytest.mark.parametrize("ratios", [[3.0], [1.0, 1.01, 0.99], [1.4, 1.1, 1.3, 1.2], [0.3, 0.31, 0.29]])
def test_each_ratio_finding_names_its_own_figure_whatever_its_outcome(ratios) -> None:
    p99, tput = load_ratio_findings({"p99_ratios": ratios, "throughput_ratios": ratios}, _load())
    assert p99.name == "load.p99_ratio" and p99.message.startswith("p99 latency under load")
    assert tput.name == "load.throughput_ratio" and tput.message.startswith("throughput under load")
    assert "p99" not in tput.message and "throughput" not in p99.message


def test_the_figures_are_defined_once_with_their_settings() -> None:
    assert [(f.gate, f.setting, f.limit_field) for f in RATIO_FIGURES] == [
        ("load.p99_ratio", "canary.load.max_p99_ratio", "max_p99_ratio"),
        ("load.throughput_ratio", "canary.load.min_throughput_ratio", "min_throughput_ratio")]
    assert ratio_gate(THROUGHPUT, [0.5, 0.52, 0.49], 0.8).message.startswith("throughput under load is ")
    assert ratio_gate(P99, [0.5, 0.52, 0.49], 1.25).message.startswith("p99 latency under load is ")


def test_the_judges_gate_rows_name_their_figures() -> None:
    """The load phase's stop check once called a throughput ratio 'p99 latency'; it and the judge now read the same
    findings (:func:`load_ratio_findings`), and so do the report's gate rows."""
    gates = gt.load_gates(parse_spec(BASE), _figures(10, 1000), _figures(10, 1000), "release r1", "", dict(SAME))
    p99, tput = (next(g for g in gates if g.name == f.gate) for f in RATIO_FIGURES)
    assert p99.message.startswith("p99 latency under load is ") and tput.message.startswith("throughput under load is ")


# --- a pass rests on windows of at least min_requests requests ------------------------------------------


@pytest.mark.parametrize(("held", "outcome"), [(100, "pass"), (99, "inconclusive")])
def test_a_pass_needs_pairs_whose_windows_hold_min_requests(held, outcome) -> None:
    paired = {**SAME, "requests": [held] * 4, "requests_per_s": 10.0}
    for finding in load_ratio_findings(paired, _load(min_requests=100, window_s=1, budget_s=20, stable_windows=3)):
        assert finding.outcome == outcome, finding.message
        assert finding.data["requests_per_window"] == {"fewest": held, "most": held}
        assert f"the windows held {held} requests each (canary.load.min_requests 100)" in finding.message
    if outcome == "inconclusive":
        assert "0 window pair(s) measured, too few for an interval" in finding.message
        assert "(the 0 of 4 pairs whose windows held 100 requests or more)" in finding.message
        assert "a window's p99 over fewer requests is about its slowest one, too few to clear the candidate" in finding.message
        # 100 requests at 10 a second: 10 s windows, 3 pairs of them: about 60 s of budget
        assert ("at the 10 requests/s measured, a window of 100 requests takes about 10 s, so 3 pairs need "
                "canary.load.budget_s of about 60 s (it is 20); or lower canary.load.min_requests") in finding.message


def test_a_pair_the_budget_cut_short_is_left_out_of_a_pass_and_the_rest_decide() -> None:
    paired = {**SAME, "p99_ratios": [3.0, 1.01, 0.99, 1.0], "requests": [40, 130, 120, 150], "requests_per_s": 10.0}
    p99, tput = load_ratio_findings(paired, _load(min_requests=100))
    assert p99.outcome == tput.outcome == "pass"
    assert p99.data["pairs"] == 3 and p99.data["pairs_measured"] == 4 and p99.data["ratios"] == [1.01, 0.99, 1.0]
    assert "3 window pairs): within canary.load.max_p99_ratio 1.25 (the 3 of 4 pairs whose windows held 100 requests or " \
           "more); the windows held 40 to 150 requests each (canary.load.min_requests 100)" in p99.message


def test_a_clear_regression_blocks_however_few_requests_its_windows_held() -> None:
    paired = {"p99_ratios": [9.0, 10.0, 11.0], "throughput_ratios": [0.1, 0.11, 0.09], "requests": [12, 14, 13],
              "requests_per_s": 30.0}
    assert [f.outcome for f in load_ratio_findings(paired, _load())] == ["block", "block"]


def test_a_report_without_the_windows_requests_is_judged_as_before() -> None:
    assert [f.outcome for f in load_ratio_findings(dict(SAME), _load())] == ["pass", "pass"]


class _Scripted:
    """Windows of ``requests`` requests each, every one at the same p99 for both targets (ratios 1.0)."""

    def __init__(self, requests: int) -> None:
        self.requests, self.measured = requests, 0

    def window(self, target: str, seconds: float, *, measure: bool = True, until_s: float | None = None) -> Window:
        histogram = Histogram()
        if not measure:
            return Window(target, seconds, 0, 0, 0, histogram)
        for i in range(self.requests):
            histogram.record((10 + i % 3) / 1e3)
        self.measured += 1
        return Window(target, seconds, self.requests, 16 * self.requests, 0, histogram)


@pytest.mark.parametrize(("requests", "windows"), [(100, 3), (99, 10)])
def test_the_phase_measures_on_while_its_windows_hold_too_few_requests_to_pass(requests, windows) -> None:
    load = _load(warmup_s=0, window_s=0.5, stable_windows=3, stability=0.1, budget_s=10, min_requests=100)
    measured = load_phase(_Scripted(requests), [CANDIDATE, CHAMPION], load)  # type: ignore[arg-type]
    assert len(measured[CANDIDATE].windows) == windows  # settled and same-speed at 3 pairs; 10 s of 0.5 s windows


# --- rows counted are rows sent -----------------------------------------------------------------------------


@pytest.mark.parametrize(("batch_rows", "refused"), [(64, False), (65, True)])
def test_batch_rows_above_the_repositorys_max_batch_size_is_refused_at_spec_load(batch_rows, refused) -> None:
    spec = {**BASE, "repository": {"max_batch_size": 64}, "canary": {"load": {"batch_rows": batch_rows}}}
    if not refused:
        assert parse_spec(spec).canary.load.batch_rows == 64
        return
    with pytest.raises(SpecError) as caught:
        parse_spec(spec)
    assert ("canary.load.batch_rows 65 is above repository.max_batch_size 64: Triton refuses a request of more rows "
            "than the entry model's max_batch_size, and cut to 64 rows the load phase would count rows it never sent. "
            "Set canary.load.batch_rows to at most 64, or raise repository.max_batch_size") in str(caught.value)


def test_without_batch_rows_a_smaller_max_batch_size_is_the_default_and_given_it_is_refused() -> None:
    assert parse_spec({**BASE, "repository": {"max_batch_size": 8}}).canary.load.batch_rows == 8
    assert parse_spec({**BASE, "repository": {"max_batch_size": 8}, "canary": {"load": {"concurrency": 2}}}).canary.load.batch_rows == 8
    assert parse_spec({**BASE, "repository": {"max_batch_size": 32}}).canary.load.batch_rows == 16
    with pytest.raises(SpecError, match="canary.load.batch_rows 16 is above repository.max_batch_size 8"):
        parse_spec({**BASE, "repository": {"max_batch_size": 8}, "canary": {"load": {"batch_rows": 16}}})


def test_a_model_that_does_not_batch_takes_any_batch_rows() -> None:
    spec = parse_spec({**BASE, "repository": {"max_batch_size": 0}, "canary": {"load": {"batch_rows": 500}}})
    assert spec.canary.load.batch_rows == 500


@pytest.mark.parametrize(("max_batch_size", "refused"), [(16, False), (15, True), (0, False)])
def test_a_served_entry_model_that_takes_fewer_rows_is_refused_before_any_request(max_batch_size, refused) -> None:
    entry = EntryModel("iris__champion", {"x": "FP32"}, {"y": "FP32"}, max_batch_size)
    if not refused:
        check_batch_rows(16, entry, CHAMPION)
        return
    with pytest.raises(SpecError, match=r"canary.load.batch_rows 16 is above the champion's entry model 'iris__champion', "
                                        r"served with max_batch_size 15: .* Set canary.load.batch_rows to at most 15$"):
        check_batch_rows(16, entry, CHAMPION)
