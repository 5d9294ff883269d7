"""The stage seam: a registry error restated after the pointer moved keeps its class and attributes."""

from __future__ import annotations

from typing import Any

import pytest

from model_release.errors import ConflictError, ServiceUnavailable, StoreError
from model_release.store import promote, read_channel, rollback

from .support import make_release

pytestmark = pytest.mark.integration


class RefusingFollower:
    """A RegistryFollower (the protocol promotion and rollback call) that refuses with ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls: list[str] = []

    def on_promote(self, manifest: dict[str, Any], channel: str, release_id: str, report_uri: str | None) -> str | None:
        self.calls.append(f"promote {release_id}")
        raise self.error

    def on_rollback(self, manifest: dict[str, Any], channel: str, release_id: str, report_uri: str | None) -> str | None:
        self.calls.append(f"rollback {release_id}")
        raise self.error


def _errors() -> list[Exception]:
    return [
        ConflictError("alias production moved to version 7 meanwhile", winner="iris-7", stage="registry"),
        StoreError("model version iris v1 is gone", stage="registry"),
        ServiceUnavailable("MLflow did not answer"),
    ]


@pytest.mark.parametrize("error", _errors(), ids=lambda e: type(e).__name__)
def test_promote_restates_a_registry_error_keeping_class_stage_and_winner(kit, tmp_path, error):
    store = kit.store()
    follower = RefusingFollower(error)
    with pytest.raises(type(error)) as err:
        promote(make_release(tmp_path / "r1", small=1), "r1", store, "production", follower=follower)
    got = err.value
    assert type(got) is type(error) and got.stage == error.stage
    assert getattr(got, "winner", None) == getattr(error, "winner", None)
    assert got.message.startswith("channel 'production' now points at 'r1', but the registry did not follow: ")
    assert error.message in got.message and "idempotent" in got.message
    assert str(got).count(f"{error.stage}:") <= 1  # the stage prefix is not repeated inside the message
    assert read_channel(store, "production").release_id == "r1" and follower.calls == ["promote r1"]


@pytest.mark.parametrize("error", _errors(), ids=lambda e: type(e).__name__)
def test_rollback_restates_a_registry_error_keeping_class_stage_and_winner(kit, tmp_path, error):
    store = kit.store()
    for rid in ("r1", "r2"):
        promote(make_release(tmp_path / rid, small=1, seed=rid), rid, store, "production")
    with pytest.raises(type(error)) as err:
        rollback(store, "production", follower=RefusingFollower(error))
    got = err.value
    assert type(got) is type(error) and got.stage == error.stage
    assert getattr(got, "winner", None) == getattr(error, "winner", None)
    assert got.message.startswith("channel 'production' was rolled back to 'r1', but the registry did not follow: ")
    assert error.message in got.message and "--to r1" in got.message
    assert read_channel(store, "production").release_id == "r1"

