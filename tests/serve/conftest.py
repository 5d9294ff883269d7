"""Fixtures for the roll-out tests: a local store with two releases, a fleet of two local Tritons."""

from __future__ import annotations

import pytest

from .support import build_release, local_fleet, local_store


@pytest.fixture
def store(tmp_path):
    return local_store(tmp_path)


@pytest.fixture
def two_releases(tmp_path, store):
    """Release 1 (a good classifier) promoted; release 2 (another model) built, promoted later by the test."""
    first = build_release(tmp_path, store, "lr", "iris-r1")
    second = build_release(tmp_path, store, "weak", "iris-r2", promote_it=False)
    return first, second


@pytest.fixture
def fleet(tmp_path):
    with local_fleet(tmp_path) as (fleet, servers):
        yield fleet, servers
