"""``canary.load`` for the tests that are about something other than latency: one source for both users.

The end-to-end tests (tests/e2e/conftest.py ``NOT_ABOUT_LATENCY``, as dotted spec settings) and the
canary tests' :func:`tests.canary.support.make_release` run the load phase and report it, briefly,
with ratio limits that no noise can trip (10,000 x the champion's p99, 1/10,000 of its throughput).
The ratio gates decide from an interval over the window pairs, and a straddling interval is
inconclusive, so the limits must lie beyond any interval a busy machine gives: 20 / 0.05 were not
(CI saw 4 pairs give 1.73x, 0.112 to 26.7, inconclusive: a short window's p99 at one request in
flight is about its slowest request, and one window caught a stall); tests/canary/test_latency_gates.py
checks that spread and worse pass, for both users.

The phase measures 4 pairs of 0.1 s windows after a 0.1 s warm-up (budget_s 0.8), at least 3 where
windows overrun: in tests/e2e/test_judging.py's 13 phases, 0.3 s windows (2.4 s, warm-up 0.2 s) cost
87 CPU-s against 74 for 0.15 s (1.2 s), and those 63 against 56 for 0.1 s (A/B/A/B each time), the
same tests passing. The latency gates are tested at their boundaries there and in
tests/canary/test_load_phase.py, which passes its own ``load``.

``min_requests`` 1: a window is its 0.1 s whatever it holds, as before windows were sized by
requests; at the default 100 a busy worker's last window, cut by the budget, would make a pass
inconclusive (tests/canary/test_load_ratio_figures.py tests that rule).
"""

from __future__ import annotations

#: the load phase's settings (``canary.load``) that both users share
LOAD: dict[str, float] = {"warmup_s": 0.1, "window_s": 0.1, "stable_windows": 4, "budget_s": 0.8, "min_requests": 1,
                          "max_p99_ratio": 1.0e4, "min_throughput_ratio": 1.0e-4}
