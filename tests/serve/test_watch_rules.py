"""The watch's rules at their boundaries, with a fake fleet whose metrics endpoints render Prometheus text.

Unit tests: no server. The fake clock advances only when the watch sleeps; at each sleep the fake
fleet's traffic function adds requests to the servers' cumulative counters, and the watch reads them
through its real reader and parser (only the HTTP fetch is fake).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from pydantic import ValidationError

from model_release.errors import ServiceUnavailable, SpecError
from model_release.serve.watch import (
    FAIL, INCONCLUSIVE, PASS, HttpProbe, MetricsReader, ProbeResult, Release, WatchedServer, WatchFailed,
    WatchInconclusive, WatchLimit, WatchSpec, load_probe_bodies, probe_from_spec, watch_wave,
)
from model_release.serve.watch.figures import ServerInterval, counter_delta, model_delta
from model_release.serve.watch.metrics import MetricsFormatError, ModelFigures, parse_metrics
from model_release.serve.watch.rules import judge, show

OLD = Release("iris v1", "iris", 1)
NEW = Release("iris v2", "iris", 2)


# ---- fakes -----------------------------------------------------------------------------------
class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.on_sleep: Callable[[float], None] = lambda s: None

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.on_sleep(seconds)


@dataclass
class Series:
    success: float = 0
    failure: float = 0
    request_us: float = 0
    queue_us: float = 0
    p99_us: float = math.nan
    extra: dict[str, float] = field(default_factory=dict)


class FakeFleet:
    """Servers' metrics as Triton renders them, per server and (model, version); unreachable on demand."""

    def __init__(self, clock: FakeClock) -> None:
        self.series: dict[str, dict[tuple[str, int], Series]] = {}
        self.down: set[str] = set()
        self.fetched: list[str] = []
        self.tick: Callable[["FakeFleet"], None] = lambda fleet: None
        clock.on_sleep = lambda s: self.tick(self)

    def server(self, name: str, *releases: Release) -> WatchedServer:
        self.series[name] = {(r.entry, r.version): Series() for r in releases}
        return WatchedServer(name, f"http://{name}:8002/metrics", f"{name}:8000")

    def serve(self, name: str, release: Release, n: int, *, failures: int = 0, mean_us: float = 2000,
              queue_us: float = 50, p99_us: float | None = None) -> None:
        s = self.series[name][(release.entry, release.version)]
        s.success += n - failures
        s.failure += failures
        s.request_us += (n - failures) * mean_us
        s.queue_us += (n - failures) * queue_us
        s.p99_us = p99_us if p99_us is not None else mean_us * 1.2

    def fetch(self, url: str, timeout: float) -> str:
        self.fetched.append(url)
        name = url.split("//")[1].split(":")[0]
        if name in self.down:
            raise ConnectionRefusedError(111, "Connection refused")
        lines = ["# HELP nv_inference_request_success Number of successful inference requests"]
        for (model, version), s in self.series.get(name, {}).items():
            lab = f'model="{model}",version="{version}"'
            lines += [
                f"nv_inference_request_success{{{lab}}} {s.success:g}",
                f'nv_inference_request_failure{{model="{model}",reason="BACKEND",version="{version}"}} {s.failure:g}',
                f'nv_inference_request_failure{{model="{model}",reason="OTHER",version="{version}"}} 0',
                f"nv_inference_request_duration_us{{{lab}}} {s.request_us:g}",
                f"nv_inference_queue_duration_us{{{lab}}} {s.queue_us:g}",
                f'nv_inference_request_summary_us{{{lab},quantile="0.99"}} {"NaN" if math.isnan(s.p99_us) else s.p99_us}',
            ] + [f"{k}{{{lab}}} {v:g}" for k, v in s.extra.items()]
        return "\n".join(lines) + "\n"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fleet(clock: FakeClock) -> FakeFleet:
    return FakeFleet(clock)


def spec(**kw) -> WatchSpec:
    base = dict(bake_s=30, interval_s=10, budget_s=60, min_requests=20, failures=2, settle=2)
    base.update(kw)
    return WatchSpec(**base)


def run(fleet: FakeFleet, clock: FakeClock, new, old, watch: WatchSpec, **kw):
    return watch_wave(new, old, NEW, OLD, watch, clock=clock,
                      sampler=MetricsReader(clock.monotonic, fetch=fleet.fetch), **kw)


def interval(server="s1", role="new", requests=100.0, failures=0.0, mean_us=2000.0, queue_us=50.0,
             p99_us=2400.0, **kw) -> ServerInterval:
    release = NEW if role == "new" else OLD
    ok = requests - failures
    return ServerInterval(server, role, release.label, release.entry, release.version, requests, failures,
                          ok * mean_us, ok * queue_us, p99_us, False, **kw)


# ---- the parser and the reader ---------------------------------------------------------------
def test_the_parser_reads_labels_with_escapes_nan_and_samples_without_labels():
    text = (
        "# TYPE nv_inference_request_success counter\n"
        'nv_inference_request_success{model="a\\"b\\\\c",version="1"} 12\n'
        'nv_inference_request_summary_us{model="m",version="2",quantile="0.99"} NaN\n'
        "nv_gpu_utilization 0.5 1700000000\n"
    )
    samples = parse_metrics(text)
    assert samples["nv_inference_request_success"][(("model", 'a"b\\c'), ("version", "1"))] == 12
    assert math.isnan(samples["nv_inference_request_summary_us"][(("model", "m"), ("quantile", "0.99"), ("version", "2"))])
    assert samples["nv_gpu_utilization"][()] == 0.5


@pytest.mark.parametrize("line", ['x{model="m" 1', 'x{model=m} 1', "x{} abc", "justaname"])
def test_the_parser_refuses_a_line_that_is_not_prometheus_text(line):
    with pytest.raises(MetricsFormatError, match="x|justaname"):
        parse_metrics(line)


def test_an_endpoint_that_answers_no_metrics_is_unavailable_naming_the_server(clock):
    reader = MetricsReader(clock.monotonic, fetch=lambda url, t: "<html>login</html>")
    with pytest.raises(ServiceUnavailable, match=r"server 'serve-2' \(http://h:8002/metrics\) answered something"):
        reader(WatchedServer("serve-2", "http://h:8002/metrics"))


def test_a_snapshot_sums_failure_reasons_and_reads_the_p99_of_its_version(clock, fleet):
    server = fleet.server("s1", OLD, NEW)
    fleet.serve("s1", NEW, 100, failures=3, mean_us=1000, p99_us=1500)
    snap = MetricsReader(clock.monotonic, fetch=fleet.fetch)(server)
    assert snap.model("iris", 2) == ModelFigures(97, 3, 97000, 97 * 50, 1500, True)
    assert snap.model("iris", 1).success == 0 and math.isnan(snap.model("iris", 1).p99_us)
    assert snap.model("iris", 9) == ModelFigures()  # absent: zeros, not present


# ---- deltas and resets -----------------------------------------------------------------------
def test_a_counter_that_went_down_was_reset_and_counts_from_zero_never_negative():
    assert counter_delta(100, 130) == (30, False)
    assert counter_delta(100, 7) == (7, True)
    assert counter_delta(None, 5) == (5, False)  # a series that appeared
    assert counter_delta(100, None) == (0, True)  # a series that vanished (version unloaded)


def test_a_reload_resets_success_and_durations_together_but_not_the_failure_counter():
    before = ModelFigures(success=500, failure=4, request_us=1e6, queue_us=1e4, present=True)
    after = ModelFigures(success=30, failure=4, request_us=6e4, queue_us=600, present=True)  # as 2.51 does
    d, reset = model_delta(before, after)
    assert reset and d == {"success": 30, "request_us": 6e4, "queue_us": 600, "failure": 0}
    d, reset = model_delta(after, ModelFigures())
    assert reset and set(d.values()) == {0.0}


def test_a_reset_mid_watch_is_no_negative_rate_and_the_measurement_says_reset(clock, fleet):
    new = fleet.server("s1", NEW)
    ticks = iter(range(100))

    def traffic(f: FakeFleet) -> None:
        if next(ticks) == 1:  # the model was unloaded and loaded between two samples, then served 30
            f.series["s1"][("iris", 2)] = Series(failure=f.series["s1"][("iris", 2)].failure)
            f.serve("s1", NEW, 30)
        else:
            f.serve("s1", NEW, 50)

    fleet.tick = traffic
    verdict = run(fleet, clock, [new], [], spec())
    assert verdict.outcome == PASS
    second = verdict.measurements[1].new[0]
    assert second.reset and second.requests == 30 and second.failures == 0
    assert all(m.new[0].requests >= 0 for m in verdict.measurements)


# ---- limits ----------------------------------------------------------------------------------
def test_a_limit_takes_the_lower_of_absolute_and_ratio_and_floors_the_old_figure():
    limit = WatchLimit(absolute=0.01, ratio=2.0, floor=0.005)
    assert limit.ceiling(0.0) == (0.01, "absolute")  # 2 x max(0, 0.5%) = 1%: not below the absolute
    assert limit.ceiling(0.002) == (0.01, "absolute")
    assert limit.ceiling(0.0045) == (0.01, "absolute")  # floored to 0.5%
    assert WatchLimit(absolute=0.05, ratio=2.0, floor=0.005).ceiling(0.02) == (0.04, "ratio")
    assert limit.ceiling(None) == (0.01, "absolute")
    assert WatchLimit(ratio=1.5).ceiling(None) == (None, "none")
    assert WatchLimit(ratio=1.5, floor=1000).ceiling(200) == (1500, "ratio")


@pytest.mark.parametrize("failures, status", [(10, PASS), (11, FAIL)])
def test_error_rate_absolute_just_inside_and_just_outside(failures, status):
    m = judge(spec(error_rate=WatchLimit(absolute=0.01)), [interval(requests=1000, failures=failures)], [])
    assert m.status == status
    if status == FAIL:
        assert m.reason == "error rate 1.1% against no figure, limit 1.0%"


@pytest.mark.parametrize("failures, status", [(20, PASS), (21, FAIL)])
def test_error_rate_ratio_to_the_old_release_just_inside_and_just_outside(failures, status):
    watch = spec(error_rate=WatchLimit(ratio=2.0))
    m = judge(watch, [interval(requests=1000, failures=failures)], [interval("o1", "old", 1000, failures=10)])
    assert m.status == status
    if status == FAIL:
        assert m.reason == "error rate 2.1% against 1.0%, limit 2.0%"


def test_the_issue_s_sentence_for_an_error_rate_against_a_clean_old_release():
    m = judge(spec(), [interval(requests=1000, failures=41)], [interval("o1", "old", 1000)])
    assert m.status == FAIL and m.reason == "error rate 4.1% against 0.0%, limit 1.0%"


@pytest.mark.parametrize("figure, field_name, key", [
    ("mean request time", "mean_request_us", "mean_us"), ("mean queue time", "mean_queue_us", "queue_us"),
])
@pytest.mark.parametrize("new_us, status", [(15000, PASS), (15001, FAIL)])
def test_mean_times_ratio_just_inside_and_just_outside(figure, field_name, key, new_us, status):
    old = interval("o1", "old", 100, **{key: 10000})
    m = judge(spec(), [interval(requests=100, **{key: new_us})], [old])
    assert m.status == status
    if status == FAIL:
        assert m.reason == f"{figure} 15 ms against 10 ms, limit 15 ms" and m.checks


@pytest.mark.parametrize("field_name, key", [("mean_request_us", "mean_us"), ("mean_queue_us", "queue_us")])
@pytest.mark.parametrize("new_us, status", [(20000, PASS), (20001, FAIL)])
def test_mean_times_absolute_just_inside_and_just_outside(field_name, key, new_us, status):
    watch = spec(**{field_name: WatchLimit(absolute=20000)})
    m = judge(watch, [interval(requests=100, **{key: new_us})], [])
    assert m.status == status


def test_means_count_successes_only():
    m = judge(spec(mean_request_us=WatchLimit(absolute=2000)), [interval(requests=100, failures=0, mean_us=2000)], [])
    assert m.status == PASS
    d = interval(requests=100, failures=50, mean_us=2000).as_dict()
    assert d["mean_request_us"] == 2000  # 50 successes x 2000 us over 50, not over 100


@pytest.mark.parametrize("p99, status", [(15000, PASS), (15001, FAIL)])
def test_p99_per_server_against_the_old_servers_highest_just_inside_and_outside(p99, status):
    old = [interval("o1", "old", 100, p99_us=8000), interval("o2", "old", 100, p99_us=10000)]
    new = [interval("n1", requests=50, p99_us=15000), interval("n2", requests=50, p99_us=p99)]
    m = judge(spec(), new, old)
    assert m.status == status
    assert [c.server for c in m.checks if c.figure == "p99"] == ["n1", "n2"]  # one per server, never averaged
    if status == FAIL:
        assert m.reason == "p99 on n2 15 ms against 10 ms, limit 15 ms"


@pytest.mark.parametrize("p99, status", [(50000, PASS), (50001, FAIL)])
def test_p99_absolute_just_inside_and_just_outside(p99, status):
    m = judge(spec(p99_us=WatchLimit(absolute=50000)), [interval(requests=100, p99_us=p99)], [])
    assert m.status == status


def test_a_missing_p99_with_traffic_is_unsettled_not_a_pass():
    m = judge(spec(), [interval(requests=100, p99_us=math.nan)], [interval("o1", "old", 100)])
    assert m.status == INCONCLUSIVE and "no p99 in s1's summary window" in m.reason


def test_a_ratio_limit_without_an_old_figure_is_noted_not_judged_and_the_baseline_stands_in():
    m = judge(spec(), [interval(requests=100, mean_us=90000)], [])
    assert m.status == PASS and any("mean request time: not judged" in n for n in m.notes)
    m = judge(spec(), [interval(requests=100, mean_us=90000)], [], baseline={"mean request time": 10000})
    assert m.status == FAIL and m.reason.startswith("mean request time 90 ms against 10 ms, limit 15 ms")


@pytest.mark.parametrize("traffic, status", [(19, INCONCLUSIVE), (20, PASS)])
def test_the_minimum_request_count_just_inside_and_just_outside(traffic, status):
    m = judge(spec(), [interval(requests=traffic)], [])
    assert m.status == status
    if status == INCONCLUSIVE:
        assert m.reason.startswith("too little traffic: 19 requests of user traffic to the new release")


def test_probe_requests_are_not_traffic_but_are_judged_even_below_the_minimum():
    quiet = interval(requests=20, probes_sent=4, probe_errors=0, probes_extra=4)  # 16 user requests
    assert judge(spec(), [quiet], []).status == INCONCLUSIVE
    failing = interval(requests=20, probes_sent=4, probe_errors=1, probes_extra=4, probe_error="HTTP 500: x")
    m = judge(spec(), [failing], [])
    assert m.status == FAIL and m.reason == "probe error rate 25.0% against no figure, limit 5.0%"


def test_a_signal_of_the_user_s_own_traffic_is_counted_as_traffic():
    mine = interval(requests=20, probes_sent=20, probe_errors=0, probes_extra=0)
    assert judge(spec(), [mine], []).status == PASS


# ---- the wave --------------------------------------------------------------------------------
def steady(new_fail: int = 0, new_mean: float = 2000, n: int = 100):
    def traffic(f: FakeFleet) -> None:
        f.serve("n1", NEW, n, failures=new_fail, mean_us=new_mean)
        f.serve("o1", OLD, n)
    return traffic


def test_a_good_release_under_steady_traffic_passes_at_the_end_of_the_bake_time(clock, fleet):
    new, old = fleet.server("n1", OLD, NEW), fleet.server("o1", OLD)
    fleet.tick = steady()
    verdict = run(fleet, clock, [new], [old], spec())
    assert verdict.outcome == PASS and verdict.error() is None
    assert verdict.elapsed_s == 30 and len(verdict.measurements) == 3
    assert verdict.baseline["error rate"] == 0 and verdict.baseline["mean request time"] == 2000
    json.dumps(verdict.as_dict(), allow_nan=False)  # the report's figures per measurement


def test_a_release_that_errors_is_rolled_back_after_the_failure_count_within_one_bake_time(clock, fleet):
    new, old = fleet.server("n1", NEW), fleet.server("o1", OLD)
    fleet.tick = steady(new_fail=41, n=1000)
    verdict = run(fleet, clock, [new], [old], spec())
    assert verdict.outcome == FAIL and len(verdict.measurements) == 2 and verdict.elapsed_s == 20
    assert verdict.sentence == "error rate 4.1% against 0.0%, limit 1.0%"
    err = verdict.error()
    assert isinstance(err, WatchFailed)
    assert str(err).startswith("watch: iris v2: error rate 4.1% against 0.0%, limit 1.0%; rolled back by the watch")


def test_one_failing_measurement_below_the_failure_count_holds_until_the_figures_settle(clock, fleet):
    new, old = fleet.server("n1", NEW), fleet.server("o1", OLD)
    ticks = iter(range(100))
    fleet.tick = lambda f: steady(new_fail=50 if next(ticks) == 1 else 0)(f)  # a spike in the 2nd interval
    verdict = run(fleet, clock, [new], [old], spec(bake_s=20, budget_s=60))
    assert [m.status for m in verdict.measurements] == [PASS, FAIL, PASS, PASS]
    assert verdict.outcome == PASS and verdict.elapsed_s == 40  # bake time was 20 s: it waited to settle


def test_the_failure_count_just_reached_rolls_back(clock, fleet):
    new, old = fleet.server("n1", NEW), fleet.server("o1", OLD)
    fleet.tick = steady(new_fail=50)
    verdict = run(fleet, clock, [new], [old], spec(failures=3, bake_s=60, budget_s=120))
    assert verdict.outcome == FAIL and len(verdict.measurements) == 3


def test_no_traffic_during_the_bake_time_is_inconclusive_then_the_budget_stops_and_asks_a_person(clock, fleet):
    new, old = fleet.server("n1", NEW), fleet.server("o1", OLD)
    verdict = run(fleet, clock, [new], [old], spec())
    assert verdict.outcome == INCONCLUSIVE and verdict.elapsed_s == 60 and len(verdict.measurements) == 6
    assert all(m.status == INCONCLUSIVE for m in verdict.measurements)
    err = verdict.error()
    assert isinstance(err, WatchInconclusive) and err.exit_code == 5
    assert "could not judge the wave in 60 s (budget_s 60): too little traffic: 0 requests" in str(err)
    assert "the wave holds (no server moved)" in str(err) and "rerun the roll-out" in str(err)


def test_probes_alone_never_pass_a_silent_wave(clock, fleet):
    new, old = fleet.server("n1", NEW), fleet.server("o1", OLD)

    def probe(server: WatchedServer, release: Release) -> ProbeResult:
        fleet.serve(server.name, release, 4)  # the probes land in Triton's counters too
        return ProbeResult(sent=4, errors=0)

    verdict = run(fleet, clock, [new], [old], spec(min_requests=4), probe=probe)
    assert verdict.outcome == INCONCLUSIVE


def test_a_probe_catches_an_error_response_that_triton_counts_as_a_success(clock, fleet):
    new, old = fleet.server("n1", NEW), fleet.server("o1", OLD)
    fleet.tick = steady()

    def probe(server: WatchedServer, release: Release) -> ProbeResult:
        bad = release is NEW
        return ProbeResult(4, 4 if bad else 0, "HTTP 500: negative input" if bad else None)

    verdict = run(fleet, clock, [new], [old], spec(), probe=probe)
    assert verdict.outcome == FAIL and verdict.sentence == "probe error rate 100.0% against 0.0%, limit 1.0%"
    assert verdict.measurements[0].new[0].probe_error == "HTTP 500: negative input"


def test_a_metrics_signal_counts_errors_a_python_step_answered_as_successes(clock, fleet):
    new, old = fleet.server("n1", NEW), fleet.server("o1", OLD)

    def traffic(f: FakeFleet) -> None:
        steady()(f)
        errs = f.series["n1"][("iris", 2)].extra
        errs["bls_step_errors_total"] = errs.get("bls_step_errors_total", 0) + 5
    fleet.tick = traffic
    verdict = run(fleet, clock, [new], [old], spec(error_signal="bls_step_errors_total"))
    assert verdict.outcome == FAIL and verdict.sentence == "signal error rate 5.0% against 0.0%, limit 1.0%"


def test_a_latency_regression_names_both_p99s_and_the_limit(clock, fleet):
    new, old = fleet.server("n1", NEW), fleet.server("o1", OLD)

    def traffic(f: FakeFleet) -> None:
        f.serve("n1", NEW, 100, mean_us=2000, p99_us=40000)
        f.serve("o1", OLD, 100, mean_us=2000, p99_us=5000)
    fleet.tick = traffic
    verdict = run(fleet, clock, [new], [old], spec())
    assert verdict.outcome == FAIL and verdict.sentence == "p99 on n1 40 ms against 5 ms, limit 7.5 ms"


def test_the_last_wave_compares_with_the_baseline_of_earlier_waves(clock, fleet):
    new = fleet.server("n1", NEW)
    fleet.tick = lambda f: f.serve("n1", NEW, 100, mean_us=9000)
    verdict = run(fleet, clock, [new], [], spec(), baseline={"mean request time": 2000, "p99": 2400})
    assert verdict.outcome == FAIL and verdict.sentence.startswith("mean request time 9 ms against 2 ms, limit 3 ms")


@pytest.mark.parametrize("when", ["start", "mid-watch"])
def test_an_unreachable_metrics_endpoint_holds_the_wave_and_names_the_server(clock, fleet, when):
    new, old = fleet.server("n1", NEW), fleet.server("serve-old-1", OLD)
    ticks = iter(range(100))
    fleet.tick = lambda f: (f.serve("n1", NEW, 100), next(ticks) == 1 and f.down.add("serve-old-1"))
    if when == "start":
        fleet.down.add("serve-old-1")
    probes: list[str] = []
    with pytest.raises(ServiceUnavailable) as info:
        run(fleet, clock, [new], [old], spec(), probe=lambda s, r: probes.append(s.name) or ProbeResult())
    assert str(info.value).startswith(
        "watch: the metrics endpoint of server 'serve-old-1' (http://serve-old-1:8002/metrics) is unreachable"
    )
    assert "then rerun the roll-out" in str(info.value)
    assert len(probes) == (0 if when == "start" else 4)  # nothing else happened after the read failed


# ---- the spec and the probe ------------------------------------------------------------------
def test_the_spec_refuses_rules_that_could_never_decide():
    with pytest.raises(ValidationError, match="interval_s 60 is longer than bake_s 30"):
        WatchSpec(bake_s=30, interval_s=60)
    with pytest.raises(ValidationError, match="budget_s 60 is shorter than bake_s 120"):
        WatchSpec(budget_s=60)
    with pytest.raises(ValidationError, match="true is a boolean, not a number"):
        WatchSpec(min_requests=True)
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        WatchLimit(ratio=0.9)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        WatchSpec(bake=30)


def test_show_prints_shares_as_percentages_and_times_in_milliseconds():
    assert [show("error rate", v) for v in (0.0, 0.041, 0.01, 0.0105)] == ["0.0%", "4.1%", "1.0%", "1.05%"]
    assert show("p99", 15000) == "15 ms" and show("p99", None) == "no figure"


def test_the_http_probe_counts_error_answers_and_unreachable_servers_bounded_per_interval():
    calls: list[str] = []

    def post(url: str, body: bytes, timeout: float) -> tuple[int, str]:
        calls.append(url)
        x = json.loads(body)["inputs"][0]["data"][0]
        if x < 0:
            return 500, '{"error":"negative input"}'
        if x > 100:
            raise ConnectionRefusedError(111, "Connection refused")
        return 200, "{}"

    bodies = [{"inputs": [{"name": "X", "shape": [1], "datatype": "FP32", "data": [v]}]} for v in (1, -1, 500)]
    probe = HttpProbe(bodies, requests=4, post=post)
    result = probe(WatchedServer("n1", "http://h:8002/metrics", "h:8000"), NEW)
    assert result == ProbeResult(4, 2, "HTTP 500: negative input")
    assert calls == ["http://h:8000/v2/models/iris/versions/2/infer"] * 4
    with pytest.raises(ValueError, match="requests 65 is not valid; valid: 1 to 64"):
        HttpProbe(bodies, requests=65)


def test_probe_bodies_come_from_a_json_list_or_a_clear_spec_error(tmp_path):
    good = tmp_path / "probe.json"
    good.write_text('[{"inputs": []}]')
    assert load_probe_bodies(good) == [{"inputs": []}]
    (tmp_path / "bad.json").write_text('{"inputs": []}')
    with pytest.raises(SpecError, match="is not a non-empty list of request bodies"):
        load_probe_bodies(tmp_path / "bad.json")
    with pytest.raises(SpecError, match="cannot read .* as JSON"):
        load_probe_bodies(tmp_path / "missing.json")


def test_the_probe_comes_from_the_spec_with_its_rows_resolved(tmp_path):
    (tmp_path / "probe.json").write_text('[{"inputs": [{"name": "X", "shape": [1], "datatype": "FP32", "data": [-1]}]}]')
    watch = spec(probe={"rows": "probe.json", "requests": 3})
    probe = probe_from_spec(watch, lambda p: tmp_path / p)
    assert isinstance(probe, HttpProbe) and probe.requests == 3
    assert probe_from_spec(spec(), lambda p: tmp_path / p) is None


def test_a_watch_turned_off_passes_at_once_and_says_so(clock, fleet):
    verdict = run(fleet, clock, [fleet.server("n1", NEW)], [], spec(enabled=False))
    assert verdict.outcome == PASS and verdict.sentence == "not watched: serve.watch.enabled is false"
    assert fleet.fetched == [] and clock.now == 1000.0


def test_slow_reads_do_not_stretch_the_intervals(clock, fleet):
    new = fleet.server("n1", NEW)
    fleet.tick = lambda f: f.serve("n1", NEW, 100)

    def slow_sampler(server):
        clock.now += 0.5  # each read takes half a second
        return MetricsReader(clock.monotonic, fetch=fleet.fetch)(server)

    verdict = watch_wave([new], [], NEW, OLD, spec(), clock=clock, sampler=slow_sampler)
    assert [m.at_s for m in verdict.measurements] == [10.5, 20.5, 30.5]  # a stretched one: 11, 21.5, 32


def test_a_new_server_that_reports_no_figures_for_the_new_release_holds_the_wave(clock, fleet):
    new = fleet.server("n1", OLD)  # the new version is not loaded there: Triton has no series for it
    fleet.tick = lambda f: f.serve("n1", OLD, 100)
    verdict = run(fleet, clock, [new], [], spec())
    assert verdict.outcome == INCONCLUSIVE
    assert "n1 reports no figures for iris version 2 (is the new release loaded there?)" in verdict.sentence


def test_a_reader_that_breaks_mid_answer_is_unavailable_naming_the_server(clock):
    import http.client

    def fetch(url: str, timeout: float) -> str:
        raise http.client.IncompleteRead(b"nv_inference")

    with pytest.raises(ServiceUnavailable, match="server 'n1' .* is unreachable"):
        MetricsReader(clock.monotonic, fetch=fetch)(WatchedServer("n1", "http://h:8002/metrics"))
