"""Registered-model names are checked by MLflow's own rule: what MLflow 3.17's registry and its models:/ URIs accept.

The rule is read from the installed MLflow and compared name by name: its validator (which every
registry store applies), its file store's extra refusals, and its models:/ URI parser, which must
give the name back. The product refuses a few names more (control characters, leading or trailing
spaces), each listed here; every other name goes the way MLflow's rule goes.
"""

from __future__ import annotations

import pytest

from model_release import names
from model_release.errors import SpecError
from model_release.intake.members import parse_member, resolve_members
from model_release.spec import parse_spec

#: names MLflow's rule decides (accepts or refuses) and the product follows
CORPUS = ["iris", "iris large", "iris-classifier", "Iris_Classifier.v2", "a..b", "a.", "ü-modèle", "x" * 256,
          "iris/large", "iris:large", "a%b", "a?b", ".", "..", "..x", "/x", "", "   ", "a#b", "a'b",
          "iris\tlarge"]  # a tab: urllib drops it from a models:/ URI, which then names another model
#: names MLflow accepts that the product refuses, and why
STRICTER = {"iris\x07large": "a control character", " iris": "a leading space", "iris ": "a trailing space",
            "x" * 257: "longer than MLflow's 256-character column",
            # MLflow's URI parser gives 'a@b' back, but its download of models:/a@b/1 asks the registry for model 'a'
            "a@b": "a URI that MLflow's artifact download reads as another model",
            "a\\b": "a path separator to MLflow's file store on Windows (this one runs on POSIX)"}


def mlflow_accepts(name: str) -> bool:
    """Whether MLflow 3.17's registry stores accept ``name`` and its models:/ URIs give it back."""
    from mlflow.exceptions import MlflowException
    from mlflow.store.artifact.utils.models import _parse_model_uri
    from mlflow.store.model_registry.file_store import _validate_model_name as file_store_rule
    from mlflow.utils.validation import _validate_model_name as registry_rule

    try:
        registry_rule(name)
        file_store_rule(name)
        by_version, by_alias = _parse_model_uri(f"models:/{name}/3"), _parse_model_uri(f"models:/{name}@champion")
    except MlflowException:
        return False
    return (by_version.name, by_version.version, by_alias.name, by_alias.alias) == (name, "3", name, "champion")


@pytest.mark.parametrize("name", CORPUS)
def test_a_name_is_accepted_exactly_when_mlflows_rule_accepts_it(name) -> None:
    assert names.is_registered_model(name) == mlflow_accepts(name), name


@pytest.mark.parametrize("name, why", STRICTER.items())
def test_the_few_names_refused_beyond_mlflows_rule(name, why) -> None:
    assert mlflow_accepts(name) and not names.is_registered_model(name), why


def test_the_spec_and_a_member_reference_follow_the_rule() -> None:
    spec = parse_spec({"name": "iris", "model": {"name": "iris large", "alias": "candidate"}})
    assert spec.model.uri == "models:/iris large@candidate"
    assert parse_member("models:/iris large/3").name == "iris large"
    with pytest.raises(SpecError, match=r"'a\?b' is not a registered model name: 1 to 256 printable characters"):
        parse_spec({"name": "iris", "model": {"name": "a?b", "alias": "candidate"}})
    with pytest.raises(ValueError, match=r"models:/NAME@ALIAS"):
        parse_member("models:/a%b/3")


def test_a_name_with_a_space_is_a_model_mlflow_registers_and_resolves(tmp_path) -> None:
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    client.create_registered_model("iris large")
    client.create_model_version("iris large", source=str(tmp_path), run_id=None)
    client.set_registered_model_alias("iris large", "candidate", "1")
    pinned = resolve_members(uri, {"large": "models:/iris large@candidate"})["large"]
    assert (pinned.name, pinned.version, pinned.alias) == ("iris large", "1", "candidate")
