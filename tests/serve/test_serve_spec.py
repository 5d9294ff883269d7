"""The spec's serve section: defaults, the warm-up factor's bounds, no fleet in a spec."""

from __future__ import annotations

import pytest

from model_release.errors import SpecError
from model_release.serve.warmup import limit_ms
from model_release.spec import parse_spec

BASE = {"name": "iris", "model": {"name": "iris-classifier", "alias": "candidate"}}


def test_defaults_roll_out_with_three_probes_and_factor_20():
    spec = parse_spec(BASE)
    assert spec.serve.rollout.enabled and (spec.serve.warmup.requests, spec.serve.warmup.factor) == (3, 20.0)
    rollout = spec.serve.rollout  # one server, then the rest; side by side; no failure allowed
    assert [(s.servers, s.percent, s.max_failures) for s in rollout.steps] == [(1, None, 0), (None, 100, 0)]
    assert (rollout.swap, rollout.drain_s, rollout.deadline_s, rollout.silent_after_s) == ("side_by_side", 10, 600, 30)


def test_rollout_false_is_the_earlier_spelling_of_enabled_false():
    assert parse_spec({**BASE, "serve": {"rollout": False}}).serve.rollout.enabled is False
    assert parse_spec({**BASE, "serve": {"rollout": True}}).serve.rollout.steps[-1].percent == 100


@pytest.mark.parametrize("steps, error", [
    ([{"servers": 1}, {"percent": 100}], None),
    ([{"servers": 1}, {"percent": 99.9}], "the last step must be {percent: 100}, so that every server of the fleet is reached"),
    ([{"servers": 1, "percent": 10}, {"percent": 100}], "a step names exactly one of servers (a count) and percent"),
    ([{"percent": 100.1}], "serve.rollout.steps.0.percent"),
    ([{"servers": 0}, {"percent": 100}], "serve.rollout.steps.0.servers"),
    ([], "serve.rollout.steps"),
])
def test_steps_end_at_the_whole_fleet_and_each_names_one_size(steps, error):
    data = {**BASE, "serve": {"rollout": {"steps": steps}}}
    if error is None:
        assert len(parse_spec(data).serve.rollout.steps) == len(steps)
    else:
        with pytest.raises(SpecError) as caught:
            parse_spec(data)
        assert error in caught.value.message


@pytest.mark.parametrize("new, max_failures, percent, budget", [(10, 0, 0.0, 0), (10, 1, 0.0, 1), (500, 0, 1.0, 5),
                                                               (99, 0, 1.0, 0), (100, 0, 1.0, 1), (500, 7, 1.0, 7)])
def test_a_step_s_failure_budget_is_the_larger_of_its_count_and_its_share(new, max_failures, percent, budget):
    spec = parse_spec({**BASE, "serve": {"rollout": {"steps": [
        {"percent": 100, "max_failures": max_failures, "max_failed_percent": percent}]}}})
    assert spec.serve.rollout.steps[0].budget(new) == budget


def test_the_swap_is_side_by_side_or_in_place():
    assert parse_spec({**BASE, "serve": {"rollout": {"swap": "in_place"}}}).serve.rollout.swap == "in_place"
    with pytest.raises(SpecError, match="serve.rollout.swap"):
        parse_spec({**BASE, "serve": {"rollout": {"swap": "blue_green"}}})


@pytest.mark.parametrize("factor, ok", [(1.0, False), (1.01, True), (10_000.0, True), (10_000.5, False)])
def test_the_warmup_factor_is_above_1_and_bounded(factor, ok):
    data = {**BASE, "serve": {"warmup": {"factor": factor}}}
    if ok:
        assert parse_spec(data).serve.warmup.factor == factor
    else:
        with pytest.raises(SpecError, match="serve.warmup.factor"):
            parse_spec(data)


def test_servers_never_go_in_a_spec():
    with pytest.raises(SpecError, match="serve.fleet: unknown field"):
        parse_spec({**BASE, "serve": {"fleet": [{"url": "127.0.0.1:8000"}]}})


def test_the_first_request_limit_is_the_canary_p99_times_the_factor():
    assert limit_ms(4.0, 20) == 80.0
    assert limit_ms(None, 20) is None and limit_ms(float("nan"), 20) is None
