"""Unit tests of the load phase's logic: the histogram, windows, stability, pairing, where time goes, the
latency gates at their boundaries, and the tuning grid (fakes through the Requester protocol, no server)."""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest
from tritonclient.grpc import model_config_pb2 as mc

from model_release.canary.judge import gates as gt
from model_release.canary.measure.latency import where_time_goes
from model_release.canary.measure.load import Histogram, LoadRunner, Measurement, Window, measure, paired_ratios, stable
from model_release.triton.requester import Requester, request_batches
from model_release.canary.measure.tune import Setting, grid, setting_of
from model_release.spec import parse_spec

pytestmark = pytest.mark.serial  # windows of real sleeps: measured alone, after the parallel part of make test

BASE = {"name": "iris", "model": {"name": "m", "alias": "candidate"}}


def _spec(**canary):  # noqa: ANN003, ANN202
    return parse_spec({**BASE, "canary": canary})


# --- the histogram ------------------------------------------------------------------------------------


def test_histogram_percentiles_are_within_its_precision_of_numpys() -> None:
    rng = np.random.default_rng(0)
    latencies = rng.lognormal(mean=-5, sigma=1.0, size=20_000)  # around 7 ms, long tail
    h = Histogram()
    for v in latencies:
        h.record(float(v))
    for q in (50, 90, 95, 99):
        exact = float(np.percentile(latencies, q)) * 1e3
        assert h.percentile_ms(q) == pytest.approx(exact, rel=1 / 64 + 1e-3), q
    assert h.count == 20_000 and h.figures()["max_ms"] == pytest.approx(latencies.max() * 1e3)


def test_histogram_memory_does_not_grow_with_the_count_and_histograms_merge() -> None:
    a, b = Histogram(), Histogram()
    size = a.counts.nbytes
    for i in range(10_000):
        a.record(0.001 + i * 1e-7)
    b.record(5.0)
    assert a.counts.nbytes == size and a.merge(b).count == 10_001
    assert a.percentile_ms(100) == pytest.approx(5000.0, rel=1 / 64)
    assert math.isnan(Histogram().percentile_ms(99))
    overflow = Histogram()
    overflow.record(1e4)  # beyond the last octave: counted, capped at the largest latency seen
    assert overflow.count == 1 and overflow.percentile_ms(50) == pytest.approx(1e7)


# --- windows, stability and pairs ------------------------------------------------------------------------


def _window(target: str, p_ms: float, rows_per_s: float) -> Window:
    h = Histogram()
    for _ in range(100):
        h.record(p_ms / 1e3)
    return Window(target, 1.0, 100, int(rows_per_s), 0, h)


@pytest.mark.parametrize(("p99s", "expected"), [([10, 10.5, 10.9], True), ([10, 10.5, 11.2], False), ([10, 11], False)])
def test_stability_needs_the_last_windows_within_the_tolerance(p99s, expected) -> None:
    assert stable([_window("a", p, 100) for p in p99s], 3, 0.1) is expected


def test_ratios_come_from_alternating_pairs_and_their_median() -> None:
    cand = Measurement("candidate", [_window("c", 10, 1000), _window("c", 20, 500), _window("c", 12, 900)])
    champ = Measurement("champion", [_window("b", 10, 1000), _window("b", 10, 1000), _window("b", 12, 1000)])
    paired = paired_ratios(cand, champ)
    assert paired["pairs"] == 3 and paired["p99_ratio"] == pytest.approx(1.0, rel=0.02)
    assert paired["throughput_ratio"] == pytest.approx(0.9) and paired["p99_ratios"][1] == pytest.approx(2.0, rel=0.02)


class Sleeper(Requester):
    """A requester that takes ``ms`` per request; ``fail_after`` makes every later request fail."""

    made: list[Sleeper] = []
    lock = threading.Lock()

    def __init__(self, ms: float, fail_after: int = 0, rows: int = 8) -> None:
        self.ms, self.fail_after, self.calls, self.closed, self.rows = ms, fail_after, 0, False, rows
        self.thread = threading.get_ident()
        with Sleeper.lock:
            Sleeper.made.append(self)

    def send(self, batch: int) -> None:
        assert threading.get_ident() == self.thread, "a requester is used by the thread that made it"
        self.calls += 1
        if self.fail_after and self.calls > self.fail_after:
            raise ConnectionResetError("connection reset by peer")
        time.sleep(self.ms / 1e3)
        return self.rows

    def close(self) -> None:
        self.closed = True


def test_measure_alternates_targets_stops_when_stable_and_closes_every_connection() -> None:
    Sleeper.made = []
    runner = LoadRunner(lambda target: Sleeper(2 if target == "a" else 4), concurrency=3)
    try:
        # a tolerance no jitter of this machine can exceed: both settle on their third window
        results = measure(runner, ["a", "b"], warmup_s=0.05, window_s=0.2, stable_windows=3, stability=10.0, budget_s=5)
    finally:
        runner.close()
    a, b = results["a"], results["b"]
    assert a.stable and b.stable and len(a.windows) == len(b.windows) == 3  # A B A B A B
    assert a.figures(3)["p50_ms"] < b.figures(3)["p50_ms"] and a.figures(3)["throughput_rows_per_s"] > 0
    assert len(Sleeper.made) == 6 and all(s.closed for s in Sleeper.made)


class _LateStats:
    """Statistics as Triton keeps them: a request is counted when it is released, after its answer, so
    the read just after a window's last answer has not got the last requests yet; the next read has."""

    def __init__(self) -> None:
        self.answered, self.counted, self.lock = 0, 0, threading.Lock()

    def answer(self) -> None:
        with self.lock:
            self.answered += 1

    def __call__(self) -> dict[str, dict[str, float]]:
        with self.lock:
            out = {"iris": {"success_count": float(self.counted)}}
            self.counted = self.answered  # caught up after this read
        return out


def test_each_windows_statistics_hold_exactly_its_requests_when_the_server_counts_them_late() -> None:
    stats = _LateStats()

    class Counted(Sleeper):
        def send(self, batch: int) -> int:
            rows = super().send(batch)
            stats.answer()
            return rows

    runner = LoadRunner(lambda target: Counted(1), concurrency=2, statistics=stats)
    try:
        runner.window("a", 0.05, measure=False)  # a warm-up: its last requests must not land in the first window
        windows = [runner.window("a", 0.05) for _ in range(3)]
    finally:
        runner.close()
    assert all(w.requests > 0 for w in windows)
    assert [w.stats.get("iris", {}).get("success_count", 0) for w in windows] == [w.requests for w in windows]


class _Ticking:
    """A runner on a clock of its own: each window takes 0.5 s, and whatever window holds a whole second
    (something else on the machine that runs once a second, like a poll) has its p99 at 3 ms, not 2 ms."""

    def __init__(self) -> None:
        self.now, self.order, self.disturbed = 0.0, [], {"a": 0, "b": 0}

    def window(self, target: str, seconds: float, *, measure: bool = True, until_s: float | None = None) -> Window:
        tick = math.floor(self.now) == self.now
        self.now += 0.5
        histogram = Histogram()
        for _ in range(100):
            histogram.record(0.001)
        histogram.record(0.003 if tick else 0.002)  # the slowest of 101 requests: the window's p99
        if measure:
            self.order.append(target)
            self.disturbed[target] += tick
        return Window(target, 0.5, 101, 1616, 0, histogram)


def test_a_disturbance_that_keeps_time_with_the_rounds_falls_on_both_targets_in_turn() -> None:
    runner = _Ticking()
    results = measure(runner, ["a", "b"], warmup_s=0.5, window_s=0.5, stable_windows=50, stability=0.01, budget_s=8.0)
    # each round in the other order: A B B A A B ..., so a once-a-second disturbance falls on a, then b
    assert runner.order[:6] == ["a", "b", "b", "a", "a", "b"]
    assert runner.disturbed["a"] == runner.disturbed["b"] == 4
    ratios = paired_ratios(results["a"], results["b"])["p99_ratios"]
    assert len(ratios) == 8 and math.exp(np.mean(np.log(ratios))) == pytest.approx(1.0, abs=0.02)


def test_measure_stops_at_the_budget_and_says_it_did_not_settle() -> None:
    start = time.monotonic()

    class Drifting(Requester):  # latency doubles every 0.15 s: no two windows' p50 agree within 1%, however busy the machine
        def send(self, batch: int) -> int:
            time.sleep(1e-3 * 2 ** ((time.monotonic() - start) / 0.15))
            return 1

    runner = LoadRunner(lambda t: Drifting(), concurrency=2)
    try:
        result = measure(runner, ["a"], warmup_s=0.0, window_s=0.15, stable_windows=3, stability=0.01, budget_s=0.5)["a"]
    finally:
        runner.close()
    assert 1 <= len(result.windows) <= 5 and result.figures(3)["stable"] is False


def test_errors_are_counted_with_the_first_one_kept_and_stop_that_target() -> None:
    runner = LoadRunner(lambda t: Sleeper(1, fail_after=3, rows=4), concurrency=2)
    try:
        result = measure(runner, ["a"], warmup_s=0.0, window_s=0.1, stable_windows=2, stability=0.5, budget_s=2)["a"]
    finally:
        runner.close()
    figures = result.figures(2)
    assert len(result.windows) == 1 and figures["errors"] > 0
    assert figures["first_error"] == "ConnectionResetError: connection reset by peer"


def test_a_dead_server_ends_the_window_at_once() -> None:
    dead = threading.Event()

    class Hanging(Requester):
        def send(self, batch: int) -> int:
            dead.set()
            time.sleep(30)  # a request blocked on a server that died
            return 1

    runner = LoadRunner(lambda t: Hanging(), concurrency=2, alive=lambda: "exited with code -9" if dead.is_set() else None)
    started = time.perf_counter()
    window = runner.window("a", 10.0)
    assert time.perf_counter() - started < 5 and window.errors >= 1 and window.first_error == "exited with code -9"
    assert runner.window("a", 1.0).requests == 0  # nothing more is sent


def test_requests_are_built_once_from_golden_rows_and_cycled() -> None:
    golden = {"x": np.arange(10, dtype=np.float32).reshape(10, 1)}
    batches = request_batches(golden, 4)
    assert [b["x"][:, 0].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]
    big = request_batches({"x": np.zeros((100_000, 3), np.float32)}, 16)
    assert len(big) == 32  # memory follows the pool, not the golden set


# --- where the time goes ---------------------------------------------------------------------------------


def test_a_callers_own_time_excludes_the_requests_it_made() -> None:
    stats = {
        "router": {"success_count": 10, "success_ns": 100e6, "queue_ns": 5e6, "compute_infer_ns": 95e6, "inference_count": 160,
                   "execution_count": 10},
        "small": {"success_count": 10, "success_ns": 40e6, "queue_ns": 10e6, "compute_infer_ns": 30e6},
        "large": {"success_count": 4, "success_ns": 40e6, "queue_ns": 0, "compute_infer_ns": 40e6},
    }
    m = Measurement("candidate", [Window("candidate", 1.0, 10, 160, 0, Histogram(), stats=stats)])
    figures = where_time_goes(m, 3, {"router": ["small", "large"]})
    assert figures["router"]["own_ms"] == pytest.approx(2.0) and figures["router"]["calls"] == ["small", "large"]
    assert figures["small"]["queue_ms"] == pytest.approx(1.0) and figures["small"]["compute_ms"] == pytest.approx(3.0)
    assert figures["large"]["request_ms"] == pytest.approx(10.0) and "own_ms" not in figures["large"]


# --- the latency gates at their boundaries -----------------------------------------------------------------


def _figures(p99: float, tput: float, errors: int = 0, stable_: bool = True) -> dict:
    return {"p99_ms": p99, "throughput_rows_per_s": tput, "errors": errors, "requests": 500, "stable": stable_,
            "first_error": "ConnectionError: refused" if errors else None}


# the ratios to the champion, decided from their intervals over the window pairs: tests/canary/test_latency_gates.py


@pytest.mark.parametrize(("p99", "passes"), [(20.0, True), (20.001, False)])
def test_the_absolute_slo_at_its_boundary_and_a_window_that_did_not_settle_is_said(p99, passes) -> None:
    gates = gt.load_gates(_spec(p99_ms=20), _figures(p99, 1000, stable_=False), None, "", "no champion")
    slo = next(g for g in gates if g.name == "load.slo_p99")
    assert slo.passed is passes
    assert passes or ("exceeds canary.p99_ms 20 ms" in slo.message and "not settled" in slo.message)
    assert [g.passed for g in gates if g.name.endswith("ratio")] == [None, None]


def test_any_request_error_under_load_fails() -> None:
    gate = gt.load_gates(_spec(), _figures(10, 1000, errors=1), None, "", "none")[0]
    assert gate.failed and "1 request(s) failed under load (the first: ConnectionError: refused)" in gate.message


# --- the tuning grid ---------------------------------------------------------------------------------------


def _config(batching: bool = True) -> mc.ModelConfig:
    config = mc.ModelConfig(name="leaf", backend="onnxruntime", max_batch_size=16)
    config.instance_group.add(count=1, kind=mc.ModelInstanceGroup.KIND_AUTO)
    if batching:
        config.dynamic_batching.max_queue_delay_microseconds = 100
    return config


def test_a_setting_applies_to_a_copy_and_reads_back() -> None:
    original = _config()
    tuned = Setting(2, True, 500, (8, 32)).apply(original)
    assert tuned.instance_group[0].count == 2 and tuned.dynamic_batching.max_queue_delay_microseconds == 500
    assert list(tuned.dynamic_batching.preferred_batch_size) == [8]  # 32 > max_batch_size 16 is left out
    assert original.instance_group[0].count == 1 and setting_of(original) == Setting(1, True, 100)
    assert not Setting(1, False).apply(original).HasField("dynamic_batching")


def test_the_grid_starts_with_the_templates_setting_and_has_no_repeats() -> None:
    spec = _spec(tune={"enabled": True, "instances": [1, 2], "dynamic_batching": [False, True], "max_queue_delay_us": [100, 500]})
    default = setting_of(_config())
    settings = grid(spec, default)
    assert settings[0] == default and len(settings) == len(set(settings)) == 6
    assert Setting(2, False) in settings and Setting(2, True, 500) in settings


class _Server:
    """The load API as tuning uses it: each reload recorded as (model, instances, batching)."""

    def __init__(self) -> None:
        self.reloads: list[tuple[str, int, bool]] = []

    def load_with_config(self, name: str, config: mc.ModelConfig) -> float:
        self.reloads.append((name, config.instance_group[0].count, config.HasField("dynamic_batching")))
        return 0.0


class _Runner:
    """Windows whose throughput is the served setting's (rows per second = 1000 x instances)."""

    def __init__(self, leaves: "Leaves") -> None:
        self.leaves, self.measured, self.windows = leaves, [], []

    def window(self, target: str, seconds: float, *, measure: bool = True) -> Window:
        h = Histogram()
        h.record(0.002)
        instances = self.leaves.current.instances
        self.windows.append(("measured" if measure else "warm-up", instances))
        if measure:
            self.measured.append(instances)
        return Window(target, 1.0, 1, 1000 * instances, 0, h)


def _tuning(**tune):  # noqa: ANN003, ANN202
    return _spec(tune={"enabled": True, "trial_s": 0.1, **tune}, load={"warmup_s": 0.1})


def test_a_setting_already_served_is_not_reloaded_and_a_failed_reload_leaves_none_known() -> None:
    from model_release.canary.measure.tune import Leaves
    from model_release.errors import CanaryRejected

    server = _Server()
    leaves = Leaves(server, {"leaf": _config(batching=False)})
    assert leaves.current == Setting(1, False)  # as Triton serves it
    leaves.load(Setting(1, False))
    assert server.reloads == [] and leaves.skipped == 1
    leaves.load(Setting(2, False))
    leaves.load(Setting(2, False))
    assert server.reloads == [("leaf", 2, False)] and (leaves.reloads, leaves.skipped) == (1, 2)

    def refuse(name: str, config: mc.ModelConfig) -> float:
        raise CanaryRejected('model "leaf" refused a tuning configuration: no')

    server.load_with_config = refuse
    with pytest.raises(CanaryRejected, match="refused a tuning configuration"):
        leaves.load(Setting(1, True))
    assert leaves.current is None  # so the next load of any setting reloads


def test_leaves_served_with_different_settings_start_from_none_known() -> None:
    from model_release.canary.measure.tune import Leaves

    two = _config(batching=False)
    two.instance_group[0].count = 2
    assert Leaves(_Server(), {"a": _config(batching=False), "b": two}).current is None


def test_the_confirmation_measures_pick_default_default_pick_and_reloads_only_on_a_switch() -> None:
    from model_release.canary.measure.tune import Leaves, _confirm

    default, chosen = Setting(1, False), Setting(2, False)
    server = _Server()
    leaves = Leaves(server, {"leaf": _config(batching=False)})
    leaves.load(chosen)  # the grid's last trial left the pick loaded
    server.reloads.clear()
    runner = _Runner(leaves)
    confirm = _confirm(_tuning(), leaves, runner, chosen, default)
    assert runner.measured == [2, 1, 1, 2]  # ABBA: a drift over the four windows weighs on both alike
    assert confirm["chosen_throughput"] == 2000 and confirm["default_throughput"] == 1000
    assert confirm["rounds"] == {"chosen": [2000, 2000], "default": [1000, 1000]}
    assert [r[1] for r in server.reloads] == [1, 2] and leaves.current == chosen  # two switches; the pick stays served

    # a window is warmed up only after a reload: the pick, served already, is measured at once; so is the second default
    assert runner.windows == [("measured", 2), ("warm-up", 1), ("measured", 1), ("measured", 1), ("warm-up", 2), ("measured", 2)]

    leaves.load(Setting(2, True))  # the grid ended on another setting: one reload more, to the pick
    server.reloads.clear()
    runner.measured.clear()
    _confirm(_tuning(), leaves, runner, chosen, default)
    assert runner.measured == [2, 1, 1, 2] and len(server.reloads) == 3


def test_the_champions_p99_window_is_measured_without_a_warm_up_it_was_replayed_before() -> None:
    from model_release.canary.measure.tune import Leaves, _p99_limit

    runner = _Runner(Leaves(_Server(), {"leaf": _config(batching=False)}))
    limit, why = _p99_limit(_tuning(), runner, True)
    assert runner.windows == [("measured", 1)]
    assert limit == pytest.approx(1.25 * 2.0, rel=0.05) and why.startswith("1.25 x the champion's p99 2.0")
