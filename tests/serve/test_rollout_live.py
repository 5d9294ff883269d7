"""A roll-out of release 2 over release 1 and a rollback, under steady traffic on two real local Tritons with agents.

Every response is compared row by row with each release's own probabilities: it must match exactly
one release, and no request may fail, before, during and after either move.
"""

from __future__ import annotations

import time

import pytest

from model_release.serve.control import GrpcTriton
from model_release.serve.record import read_records
from model_release.serve.release_cache import ReleaseCache
from model_release.serve.rollout import roll_out
from model_release.serve.server_repo import member_config, stage_version
from model_release.serve.versions import assign_versions, read_versions
from model_release.store.channels import rollback

from .support import CHANNEL, RequestLoop, fast_options, switches

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_roll_out_and_back_under_traffic_never_fails_or_mixes(tmp_path, store, two_releases, fleet):
    first, second = two_releases
    for triton in fleet.tritons.values():  # each agent loaded release 1 by itself, each python step once
        log = triton.log_path.read_text(errors="replace")
        assert [log.count(f'"loading: {m}:1"') for m in ("iris_model", "iris_postprocess")] == [1, 1], triton
    options = fast_options()
    with RequestLoop(fleet.fleet, [first, second]) as loop:
        loop.wait_for(200)
        second.promote(store)
        record = roll_out(store, CHANNEL, options)
        loop.wait_for(200)
        rollback(store, CHANNEL)
        t0 = time.perf_counter()
        back = roll_out(store, CHANNEL, options)
        rollback_s = time.perf_counter() - t0
        loop.wait_for(200)
    traffic = loop.traffic

    assert traffic.failures == [] and traffic.mixed == [], (traffic.failures[:3], traffic.mixed[:3])
    assert traffic.by_release[first.release_id] > 0 and traffic.by_release[second.release_id] > 0
    for server in fleet.fleet.servers:  # each server: release 1, then 2, then 1 again, never interleaved
        assert switches(traffic, server.name) == [first.release_id, second.release_id, first.release_id]
    assert record.outcome == "done" and [s.outcome for s in record.servers] == ["switched", "switched"]
    # the postprocess is unchanged between the releases: same version, not copied, not loaded
    versions = read_versions(store, CHANNEL)
    assert versions.version("iris_postprocess", first.release_id) == versions.version("iris_postprocess", second.release_id)
    assert versions.version("iris_model", second.release_id) == versions.version("iris_model", first.release_id) + 1
    loads = [(s.model, s.action) for s in record.servers[0].steps if s.action in ("copy", "load")]
    assert loads == [("iris_model", "copy"), ("iris_model", "load")]
    # the rollback loads nothing but the entry's pins
    assert [[st.action for st in s.steps] for s in back.servers] == [["skip", "skip", "switch"]] * 2
    assert rollback_s < 2 * len(fleet.servers) * 2, rollback_s  # target under 2 s per server, generous under load
    assert [r["release_id"] for r in read_records(store, CHANNEL)] == [second.release_id, first.release_id]


def test_a_member_reloaded_alone_never_takes_the_ensemble_down(tmp_path, store, two_releases, fleet):
    """#4828's case: a member reloaded (new version beside the pinned one) while the ensemble serves."""
    first, second = two_releases
    control = GrpcTriton("serve-1", fleet.tritons["serve-1"].grpc_url)
    with RequestLoop(fleet.fleet, [first, second]) as loop:
        loop.wait_for(100)
        from model_release.repository.config import read_config

        second.promote(store)
        versions = assign_versions(store, CHANNEL, second.release_id, store.read_manifest(second.release_id)[0])
        release = ReleaseCache(store, tmp_path / "cache", shim=True).prepare(second.release_id, versions)
        stage_version(release, "iris_model", tmp_path / "serve-1" / "models",
                      read_versions(store, CHANNEL).digest("iris_model", versions["iris_model"]))
        config = member_config(release, "iris_model", {1, versions["iris_model"]})
        for _ in range(3):  # reload the member alone, again and again
            control.load("iris_model", config)
            assert control.is_ready("iris") and control.is_ready("iris_model", versions["iris_model"])
        loop.wait_for(100)
    control.close()
    assert loop.traffic.failures == [] and loop.traffic.mixed == []
    assert set(loop.traffic.by_release) == {first.release_id}  # the ensemble still pins release 1's member
    assert read_config(tmp_path / "serve-1" / "models" / "iris" / "config.pbtxt").ensemble_scheduling.step[0].model_version == 1
