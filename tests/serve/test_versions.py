"""Serving version numbers: decided by the store's history, kept for unchanged content, never reused."""

from __future__ import annotations

import pytest

from model_release.errors import ConflictError, StoreError
from model_release.serve.versions import assign_versions, model_digest, read_versions, served_models, versions_key
from model_release.store.backend import PreconditionFailed


def manifest(leaf: str, post: str = "p", *, release_version: int = 1) -> dict:
    v = release_version
    return {
        "repository": {"entry_model": "iris", "load_order": ["iris_model", "iris_post", "iris"],
                       "models": {"iris_model": v, "iris_post": v, "iris": v}},
        "files": {
            "models/iris_model/config.pbtxt": {"sha256": "c1", "size": 1},
            f"models/iris_model/{v}/model.onnx": {"sha256": leaf, "size": 1},
            "models/iris_post/config.pbtxt": {"sha256": "c2", "size": 1},
            f"models/iris_post/{v}/model.py": {"sha256": post, "size": 1},
            "models/iris/config.pbtxt": {"sha256": "c3", "size": 1},
            f"models/iris/{v}/.keep": {"sha256": "e", "size": 0},
        },
    }


def test_the_entry_ensemble_is_not_numbered():
    assert served_models(manifest("a")) == ["iris_model", "iris_post"]


def test_an_unchanged_model_keeps_its_version_and_a_changed_one_gets_the_next(store):
    assert assign_versions(store, "production", "r1", manifest("a")) == {"iris_model": 1, "iris_post": 1}
    assert assign_versions(store, "production", "r2", manifest("b")) == {"iris_model": 2, "iris_post": 1}
    # the same files under another release version folder are still unchanged
    assert assign_versions(store, "production", "r3", manifest("b", release_version=7)) == {"iris_model": 2, "iris_post": 1}
    # content seen before (release 1's leaf again) gets release 1's number back, never a reused one
    assert assign_versions(store, "production", "r4", manifest("a", "q")) == {"iris_model": 1, "iris_post": 2}
    assert assign_versions(store, "production", "r5", manifest("c")) == {"iris_model": 3, "iris_post": 1}


def test_numbering_a_release_again_returns_the_same_numbers_without_a_write(store):
    assign_versions(store, "production", "r1", manifest("a"))
    before = store.backend.get_bytes(versions_key("production"))
    assert assign_versions(store, "production", "r1", manifest("a")) == {"iris_model": 1, "iris_post": 1}
    assert store.backend.get_bytes(versions_key("production")) == before


def test_the_digest_ignores_the_release_version_but_not_the_files():
    assert model_digest(manifest("a"), "iris_model") == model_digest(manifest("a", release_version=3), "iris_model")
    assert model_digest(manifest("a"), "iris_model") != model_digest(manifest("b"), "iris_model")
    with pytest.raises(StoreError, match="lists no file of model 'nope'"):
        model_digest(manifest("a"), "nope")


class LosingBackend:
    """Every conditional write of the version map loses (another roll-out keeps winning)."""

    def __init__(self, inner):
        self.inner, self.uri = inner, inner.uri

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def put_bytes(self, key, data, **conditions):
        if key.endswith("versions.json"):
            raise PreconditionFailed("lost")
        return self.inner.put_bytes(key, data, **conditions)


def test_a_map_that_keeps_changing_is_a_conflict_not_a_silent_overwrite(store):
    from model_release.store.model_store import ModelStore

    losing = ModelStore(LosingBackend(store.backend))
    with pytest.raises(ConflictError, match="changed 5 times while numbering 'r1'"):
        assign_versions(losing, "production", "r1", manifest("a"))
    assert read_versions(store, "production").models == {}


def bls_manifest(small: str) -> dict:
    """A cascade: the BLS router (entry) calls small and large; only small's file changes between releases."""
    return {
        "repository": {"entry_model": "c", "load_order": ["c_small", "c_large", "c"],
                       "models": {"c_small": 1, "c_large": 1, "c": 1}, "calls": {"c": ["c_small", "c_large"]}},
        "files": {"models/c_small/1/model.onnx": {"sha256": small, "size": 1},
                  "models/c_large/1/model.onnx": {"sha256": "L", "size": 1},
                  "models/c/1/model.py": {"sha256": "router", "size": 1}},
    }


def test_a_bls_model_gets_a_new_number_when_a_model_it_calls_does(store):
    assert assign_versions(store, "production", "r1", bls_manifest("a")) == {"c_small": 1, "c_large": 1, "c": 1}
    # the router's own files are unchanged, but its pins are not: it must not keep version 1
    assert assign_versions(store, "production", "r2", bls_manifest("b")) == {"c_small": 2, "c_large": 1, "c": 2}
    assert assign_versions(store, "production", "r3", bls_manifest("a")) == {"c_small": 1, "c_large": 1, "c": 1}
