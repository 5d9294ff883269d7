"""The spec's serve section: defaults, the warm-up factor's bounds, no fleet in a spec."""

from __future__ import annotations

import pytest

from model_release.errors import SpecError
from model_release.serve.warmup import limit_ms
from model_release.spec import parse_spec

BASE = {"name": "iris", "model": {"name": "iris-classifier", "alias": "candidate"}}


def test_defaults_roll_out_with_three_probes_and_factor_20():
    spec = parse_spec(BASE)
    assert spec.serve.rollout is True and (spec.serve.warmup.requests, spec.serve.warmup.factor) == (3, 20.0)


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
