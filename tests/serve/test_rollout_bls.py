"""A roll-out of a release whose entry is a BLS router (the cascade shape) under steady traffic, and back.

The router's version folder carries pins.json (the versions of small and large it calls); its number
changes when a callee's does, so the router version a request reaches decides every model it touches.
"""

from __future__ import annotations

import json

import pytest

from model_release.serve.rollout import roll_out
from model_release.serve.versions import read_versions
from model_release.store.channels import rollback

from ..repository.support import sklearn_onnx
from .support import CHANNEL, NAME, RequestLoop, build_release, fast_options, local_fleet, switches

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_cascade_rolls_out_and_back_with_its_router_pinned_and_no_failed_or_mixed_answer(tmp_path, store):
    large = tmp_path / "large" / "model.onnx"
    sklearn_onnx(large, "tree")
    first = build_release(tmp_path, store, "lr", "cas-r1", cascade_large=str(large))
    second = build_release(tmp_path, store, "weak", "cas-r2", promote_it=False, cascade_large=str(large))
    assert not (abs(first.expected - second.expected) < 1e-4).all()
    with local_fleet(tmp_path, store) as live:
        fleet, options = live.fleet, fast_options()
        with RequestLoop(fleet, [first, second]) as loop:
            loop.wait_for(150)
            second.promote(store)
            forward = roll_out(store, CHANNEL, options)
            loop.wait_for(150)
            rollback(store, CHANNEL)
            back = roll_out(store, CHANNEL, options)
            loop.wait_for(150)
    assert loop.traffic.failures == [] and loop.traffic.mixed == [], (loop.traffic.failures[:2], loop.traffic.mixed[:2])
    for server in fleet.servers:
        assert switches(loop.traffic, server.name) == [first.release_id, second.release_id, first.release_id]
    versions = read_versions(store, CHANNEL)
    assert versions.release_versions(second.release_id) == {"iris_small": 2, "iris_large": 1, NAME: 2}
    pins = json.loads((tmp_path / "serve-1" / "models" / NAME / "2" / "pins.json").read_text())
    assert pins == {"iris_small": 2, "iris_large": 1}
    steps = [(st.model, st.action) for st in forward.servers[0].steps]
    assert sorted(steps[:-2]) == [("iris_large", "skip"), ("iris_small", "copy"), ("iris_small", "load")]
    assert steps[-2:] == [(NAME, "copy"), (NAME, "switch")]  # the router last: its load is the switch
    assert [st.action for st in back.servers[0].steps] == ["skip", "skip", "switch"]  # nothing copied or loaded
