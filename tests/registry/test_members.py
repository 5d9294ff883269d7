"""Pipeline members from the registry, on a real MLflow store with two small registered sklearn models."""

from __future__ import annotations

import pytest

from model_release.errors import IntakeError
from model_release.intake.members import Lineage, changed_members, parse_member, pipeline_identity, resolve_members


@pytest.mark.parametrize("value,kind,name,alias,version", [
    ("release", "release", None, None, None),
    ("models:/iris-small@candidate", "registered", "iris-small", "candidate", None),
    ("models:/iris-large/3", "registered", "iris-large", None, 3),
    ("large.onnx", "unregistered", None, None, None),
])
def test_a_member_is_the_release_a_registered_model_or_a_file(value, kind, name, alias, version) -> None:
    ref = parse_member(value)
    assert (ref.kind, ref.name, ref.alias, ref.version) == (kind, name, alias, version)


@pytest.mark.parametrize("value", ["models:/iris-large", "models:/iris-large/0", "models:/a@b/3", "models:/x@1bad!",
                                   "large.pt", "models:/"])
def test_a_bad_member_is_refused_with_the_forms_that_are_valid(value) -> None:
    with pytest.raises(ValueError, match="models:/NAME@ALIAS"):
        parse_member(value)


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """Two registered sklearn models: iris-small (versions 1, 2; @candidate on 2) and iris-large (version 1)."""
    import mlflow
    from mlflow import MlflowClient
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression
    from sklearn.tree import DecisionTreeClassifier

    from model_release.local.mlflow import use_local_tracking

    root = tmp_path_factory.mktemp("mlflow")
    uri = use_local_tracking(root)
    x, y = load_iris(return_X_y=True)
    for name, model in (("iris-small", LogisticRegression(max_iter=200)), ("iris-small", DecisionTreeClassifier(max_depth=2)),
                        ("iris-large", DecisionTreeClassifier())):
        with mlflow.start_run():
            mlflow.sklearn.log_model(model.fit(x, y), name="model", registered_model_name=name,
                                     pip_requirements=["scikit-learn"], skops_trusted_types=["sklearn.tree._tree.Tree"])
    client = MlflowClient(uri, registry_uri=uri)
    client.set_registered_model_alias("iris-small", "candidate", "2")
    client.set_registered_model_alias("iris-large", "candidate", "1")
    return uri, client


def test_members_resolve_to_pinned_versions_with_their_lineage(registry) -> None:
    uri, client = registry
    pinned = resolve_members(uri, {"small": "models:/iris-small@candidate", "large": "models:/iris-large/1",
                                   "extra": "extra.onnx"})
    small = pinned["small"]
    assert (small.kind, small.name, small.version, small.alias) == ("registered", "iris-small", "2", "candidate")
    assert small.run_id == client.get_model_version("iris-small", "2").run_id and small.source
    assert pinned["extra"] == Lineage("extra", "unregistered", source="extra.onnx")
    assert pipeline_identity(pinned) == "extra=extra.onnx,large=iris-large/1,small=iris-small/2"


def test_only_a_member_whose_alias_moved_counts_as_changed(registry) -> None:
    uri, client = registry
    members = {"small": "models:/iris-small@candidate", "large": "models:/iris-large@candidate"}
    before = {k: v.to_dict() for k, v in resolve_members(uri, members).items()}
    assert changed_members(resolve_members(uri, members), before) == []  # nothing new: no alias moved
    client.set_registered_model_alias("iris-small", "candidate", "1")
    try:
        now = resolve_members(uri, members)
        assert changed_members(now, before) == ["small"]  # the large one is reused
        assert pipeline_identity(now) != pipeline_identity({k: Lineage(**v) for k, v in before.items()})
    finally:
        client.set_registered_model_alias("iris-small", "candidate", "2")
    assert changed_members(resolve_members(uri, members), None) == ["large", "small"]


def test_a_member_that_does_not_exist_is_named(registry) -> None:
    uri, _ = registry
    with pytest.raises(IntakeError, match=r"member 'large' \(models:/iris-large@champion\): no such model, alias or version"):
        resolve_members(uri, {"small": "release", "large": "models:/iris-large@champion"})


def test_a_cascade_member_is_a_file_or_a_registered_model_and_nothing_else() -> None:
    from pydantic import ValidationError

    from model_release.spec.shapes import CascadeSpec

    assert CascadeSpec(small="release", large="large.onnx", threshold=0.9).large == "large.onnx"
    assert CascadeSpec(small="release", large="models:/iris-large@candidate", threshold=0.9).large == "models:/iris-large@candidate"
    with pytest.raises(ValidationError, match="models:/NAME@ALIAS, models:/NAME/VERSION or a path to an .onnx file"):
        CascadeSpec(small="release", large="large.pt", threshold=0.9)
