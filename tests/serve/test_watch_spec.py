"""``serve.watch`` in the release spec: defaults, a full section, and each bad field named with its value."""

from __future__ import annotations

import pytest

from model_release.errors import SpecError
from model_release.spec import ServeSpec, WatchLimit, WatchSpec, load_spec, parse_spec

BASE = {"name": "iris", "model": {"name": "iris-classifier", "alias": "candidate"}}


def test_a_spec_without_serve_gets_the_default_watch() -> None:
    spec = parse_spec(BASE)
    assert spec.serve == ServeSpec() and spec.serve.watch == WatchSpec()
    watch = spec.serve.watch
    assert watch.enabled and (watch.bake_s, watch.interval_s, watch.budget_s) == (120, 10, 600)
    assert watch.error_rate == WatchLimit(absolute=0.05, ratio=2.0, floor=0.005)
    assert watch.p99_us == WatchLimit(ratio=1.5, floor=5000) and watch.mean_request_us == WatchLimit(ratio=1.5, floor=1000)


def test_a_full_watch_section_from_yaml(tmp_path) -> None:
    path = tmp_path / "iris.yaml"
    path.write_text(
        "name: iris\nmodel: {name: iris-classifier, alias: candidate}\n"
        "serve:\n  watch:\n    bake_s: 60\n    interval_s: 5\n    min_requests: 50\n    failures: 3\n"
        "    settle: 3\n    budget_s: 300\n    error_rate: {absolute: 0.01}\n    p99_us: {absolute: 25000, ratio: 1.2}\n"
        "    error_signal: bls_step_errors_total\n    probe: {rows: probe.json, requests: 8, timeout_s: 2}\n"
    )
    watch = load_spec(path).serve.watch
    assert (watch.bake_s, watch.interval_s, watch.min_requests, watch.failures, watch.settle) == (60, 5, 50, 3, 3)
    assert watch.error_rate == WatchLimit(absolute=0.01) and watch.p99_us.ceiling(10000) == (12000, "ratio")
    assert watch.error_signal == "bls_step_errors_total"
    assert (watch.probe.rows, watch.probe.requests, watch.probe.timeout_s) == ("probe.json", 8, 2)


def test_an_override_reaches_the_watch() -> None:
    assert parse_spec(BASE, overrides={"serve.watch.bake_s": 30}).serve.watch.bake_s == 30


@pytest.mark.parametrize("watch, message", [
    ({"bake_s": -1}, "serve.watch.bake_s: Input should be greater than 0 (got -1)"),
    ({"bake": 30}, "serve.watch.bake: unknown field 'serve.watch.bake'"),
    ({"min_requests": True}, "serve.watch.min_requests: true is a boolean, not a number"),
    ({"error_rate": {"ratio": 0.5}}, "serve.watch.error_rate.ratio: Input should be greater than or equal to 1"),
    ({"interval_s": 600}, "serve.watch: interval_s 600 is longer than bake_s 120: no measurement would end"),
    ({"budget_s": 60}, "serve.watch: budget_s 60 is shorter than bake_s 120"),
    ({"settle": 61}, "serve.watch: settle 61 x interval_s 10 exceeds budget_s 600"),
    ({"error_signal": "bad name"}, "serve.watch.error_signal: String should match pattern"),
    ({"probe": {"requests": 65}}, "serve.watch.probe.requests: Input should be less than or equal to 64"),
])
def test_each_bad_watch_field_is_named_with_its_value(watch, message) -> None:
    with pytest.raises(SpecError, match="release spec <dict> is invalid") as info:
        parse_spec({**BASE, "serve": {"watch": watch}})
    assert message in str(info.value)
