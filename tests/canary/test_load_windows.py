"""Windows sized by requests as well as time, and the rows a window counts (canary/measure/load.py, fakes, no server).

A slow model's window runs on past ``window_s`` until it holds ``min_requests`` requests, within its
share of the budget; the rows counted are the rows each request reported sending.
"""

from __future__ import annotations

import time

import pytest

from model_release.canary.measure.load import LoadRunner, measure, paired_ratios
from model_release.triton.requester import Requester

pytestmark = pytest.mark.serial  # windows of real sleeps: measured alone, after the parallel part of make test


class Slow(Requester):
    """``ms`` per request, ``rows`` rows each."""

    def __init__(self, ms: float, rows: int = 5) -> None:
        self.ms, self.rows = ms, rows

    def send(self, batch: int) -> int:
        time.sleep(self.ms / 1e3)
        return self.rows


def test_a_slow_models_window_runs_on_until_it_holds_min_requests_and_counts_the_rows_sent() -> None:
    runner = LoadRunner(lambda t: Slow(20, rows=5), concurrency=2, min_requests=30)
    try:
        window = runner.window("a", 0.05, until_s=10.0)
        plain = runner.window("a", 0.05)  # without until_s: time only, as tuning's trials and warm-ups are
    finally:
        runner.close()
    # 30 requests of 20 ms, 2 in flight: at least 0.3 s, where window_s alone would have held about 5
    assert window.requests >= 30 and window.seconds >= 0.3 and window.seconds < 5
    assert window.rows == 5 * window.requests and window.histogram.count == window.requests
    assert plain.requests < 30 and plain.seconds < 0.3


def test_the_run_on_stops_at_until_s_when_min_requests_is_out_of_reach() -> None:
    runner = LoadRunner(lambda t: Slow(20), concurrency=1, min_requests=1_000)
    try:
        window = runner.window("a", 0.05, until_s=0.3)
    finally:
        runner.close()
    assert 0.3 <= window.seconds < 1.0 and 5 <= window.requests < 1_000


def test_each_target_of_a_round_gets_the_same_room_and_the_pairs_say_the_requests_they_rest_on() -> None:
    runner = LoadRunner(lambda t: Slow(10 if t == "a" else 20), concurrency=2, min_requests=40)
    try:
        measured = measure(runner, ["a", "b"], warmup_s=0.0, window_s=0.05, stable_windows=2, stability=10.0, budget_s=1.0)
    finally:
        runner.close()
    a, b = measured["a"].windows, measured["b"].windows
    # round 1: each may run on for 0.5 s; a (200 requests/s) reaches 40 in about 0.2 s, b (100/s) in about 0.4 s
    assert a[0].requests >= 40 and b[0].requests >= 40
    assert len(a) == len(b)  # A B A B: the last round too
    paired = paired_ratios(measured["a"], measured["b"])
    assert paired["requests"] == [min(x.requests, y.requests) for x, y in zip(a, b)]
    assert paired["requests_per_s"] == pytest.approx(min(w.requests / w.seconds for w in a + b), rel=1e-3)
    assert 60 < paired["requests_per_s"] < 110  # b's rate: 2 in flight at 20 ms
    assert measured["a"].figures(2)["fewest_requests_per_window"] == min(w.requests for w in a)


def test_a_budget_too_small_for_min_requests_ends_with_short_windows_not_an_overrun() -> None:
    runner = LoadRunner(lambda t: Slow(20), concurrency=1, min_requests=500)
    try:
        started = time.perf_counter()
        measured = measure(runner, ["a", "b"], warmup_s=0.0, window_s=0.05, stable_windows=2, stability=10.0, budget_s=0.6)
        took = time.perf_counter() - started
    finally:
        runner.close()
    windows = measured["a"].windows + measured["b"].windows
    assert all(w.requests < 500 for w in windows) and took < 0.6 + 0.5  # the budget, plus a last window and a request
