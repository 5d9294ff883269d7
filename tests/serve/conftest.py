"""Fixtures for the roll-out tests: a local store with two releases, a fleet of two local Tritons with agents."""

from __future__ import annotations

import pytest

from .support import build_release, local_fleet, local_store


@pytest.fixture
def store(tmp_path):
    return local_store(tmp_path)


@pytest.fixture(scope="module")
def built_releases(tmp_path_factory):
    """Release 1 (a good classifier) and release 2 (another model), assembled once per module.

    Promotion only reads a release's folder, so the tests of a module share these folders; each test
    promotes into a store of its own (``two_releases``)."""
    tmp = tmp_path_factory.mktemp("releases")
    scratch = local_store(tmp)  # build_release needs a store; nothing is promoted into this one
    first = build_release(tmp, scratch, "lr", "iris-r1", promote_it=False)
    second = build_release(tmp, scratch, "weak", "iris-r2", promote_it=False)
    return first, second


@pytest.fixture
def two_releases(store, built_releases):
    """Release 1 promoted to this test's store; release 2 built, promoted later by the test."""
    first, second = built_releases
    first.promote(store)
    return first, second


@pytest.fixture
def fleet(tmp_path, store, two_releases):
    """Two serving Tritons with agents, each serving release 1 (the agents loaded it by themselves)."""
    with local_fleet(tmp_path, store) as live:
        yield live
