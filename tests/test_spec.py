"""The release spec: valid specs load, each bad field is named with its value and what is valid."""

from __future__ import annotations

import pytest
import yaml

from model_release.errors import SpecError
from model_release.spec import load_spec, parse_spec, spec_from_record

from .conftest import PROJECT

BASE = {"name": "iris", "model": {"name": "iris-classifier", "alias": "candidate"}}


def test_every_shipped_spec_is_valid() -> None:
    specs = sorted((PROJECT / "releases").glob("*.yaml"))
    assert specs
    for path in specs:
        spec = load_spec(path)
        assert spec.base_dir == str(path.parent)
        assert spec.source == str(path) and spec.where == str(path)
    assert parse_spec(BASE).where == "the release spec 'iris'"


@pytest.mark.parametrize("key", ["base_dir", "source"])
def test_where_a_spec_was_read_from_is_recorded_by_model_release_and_refused_in_a_spec(tmp_path, key) -> None:
    path = tmp_path / "iris.yaml"
    path.write_text(yaml.safe_dump({**BASE, key: "/elsewhere"}))
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert f"{key}: unknown field '{key}'" in str(caught.value) and str(path) in str(caught.value)
    with pytest.raises(SpecError, match=f"unknown field '{key}'"):
        parse_spec({**BASE, key: "x"})


def test_a_recorded_spec_resolves_its_paths_where_it_was_read(tmp_path) -> None:
    path = tmp_path / "specs" / "iris.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump({**BASE, "golden": {"source": "file", "path": "golden.npz"}}))
    recorded = load_spec(path).model_dump(mode="json")  # what the manifest and export/spec.json hold
    again = spec_from_record(recorded, origin="recorded in release r")
    assert again.resolve_path(again.golden.path) == path.parent / "golden.npz"
    assert again.where == str(path)


def test_defaults_and_per_output_tolerances() -> None:
    spec = parse_spec({**BASE, "export": {"tolerances": {"default": {"atol": 0.1}, "probabilities": {"atol": 0.5, "rtol": 0}}}})
    assert spec.export.tolerances.for_output("probabilities").atol == 0.5
    assert spec.export.tolerances.for_output("probabilities").rtol == 0
    assert spec.export.tolerances.for_output("other").atol == 0.1
    assert spec.promote.channel == "production"
    assert spec.model.uri == "models:/iris-classifier@candidate"


def test_version_override_replaces_alias() -> None:
    spec = parse_spec(BASE, overrides={"model.version": 7})
    assert spec.model.version == 7 and spec.model.alias is None
    assert spec.model.uri == "models:/iris-classifier/7"


@pytest.mark.parametrize(
    ("patch", "fragments"),
    [
        ({"name": "9lives"}, ["name", "'9lives'", "letter"]),
        ({"name": "../etc"}, ["name", "'../etc'"]),
        ({"name": "iris\n"}, ["name", "'iris\\n'"]),
        ({"model": {"name": "m", "alias": "prod\n"}}, ["model.alias", "prod"]),
        ({"promote": {"channel": "production\n"}}, ["promote.channel"]),
        ({"promote": {"store": "s3://bucket/x\ny"}}, ["promote.store"]),
        ({"model": {"name": "m"}}, ["model", "alias", "version"]),
        ({"model": {"name": "m", "alias": "a", "version": 2}}, ["exactly one"]),
        ({"model": {"name": "m", "version": 0}}, ["model.version", "0"]),
        ({"promote": {"store": "ftp://x"}}, ["promote.store", "ftp://x", "s3://BUCKET"]),
        ({"promote": {"channel": "prod/../x"}}, ["promote.channel", "prod/../x"]),
        ({"repository": {"shape": "tree"}}, ["repository.shape", "'tree'", "classifier"]),
        ({"repository": {"max_batch_size": -1}}, ["repository.max_batch_size", "-1"]),
        ({"golden": {"source": "file"}}, ["golden.path", "required"]),
        ({"golden": {"source": "file", "path": "g.csv"}}, ["golden.path", ".npz"]),
        ({"canary": {"concurrency": 0}}, ["canary.concurrency", "0"]),
        ({"export": {"tolerances": {"probabilities": {"atol": -1}}}}, ["atol", "-1"]),
        ({"exprot": {}}, ["unknown field", "exprot"]),
    ],
)
def test_each_bad_field_is_named(patch, fragments) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec({**BASE, **patch})
    message = str(err.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


def test_missing_and_non_yaml_files(tmp_path) -> None:
    with pytest.raises(SpecError, match="does not exist"):
        load_spec(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(bad)
    listed = tmp_path / "list.yaml"
    listed.write_text(yaml.safe_dump([1, 2]))
    with pytest.raises(SpecError, match="mapping"):
        load_spec(listed)


@pytest.mark.parametrize(("block", "field", "bad"), [
    ({"shape": "cascade", "cascade": {"large": "big.onnx", "thresold": 0.9}}, "repository.cascade.thresold", "unknown field"),
    ({"shape": "cascade", "cascade": {"large": "big.onnx", "threshold": 1.5}}, "repository.cascade.threshold", "1.5"),
    ({"shape": "cascade", "cascade": {"large": "big.pt", "threshold": 0.9}}, "repository.cascade.large", "big.pt"),
    ({"shape": "cascade", "cascade": {"small": "a.onnx", "large": "b.onnx", "threshold": 0.9}}, "repository.cascade", "'release'"),
    ({"shape": "cascade"}, "repository", "repository.cascade is missing"),
    ({"shape": "fanout", "fanout": {"members": {"a": "release", "b": "b.onnx"}, "combine": "median"}}, "repository.fanout.combine", "median"),
    ({"shape": "fanout", "fanout": {"memebers": {"a": "release"}}}, "repository.fanout.memebers", "unknown field"),
    ({"shape": "fanout", "fanout": {"members": {"Bad Key": "release", "b": "b.onnx"}}}, "repository.fanout.members", "Bad Key"),
    ({"shape": "single", "fanout": {"members": {"a": "release", "b": "b.onnx"}}}, "repository", "shape is 'single'"),
])
def test_a_typo_in_a_cascade_or_fanout_block_fails_at_spec_load_naming_the_field(tmp_path, block, field, bad) -> None:
    """Before any stage runs (no download, export or GPU build), in well under a second."""
    import time

    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({**BASE, "repository": block}))
    started = time.perf_counter()
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert time.perf_counter() - started < 1.0
    message = str(caught.value)
    assert f"{field}:" in message and bad in message and str(path) in message
    assert "\n" not in message


def test_cascade_and_fanout_blocks_are_typed_fields() -> None:
    spec = parse_spec({**BASE, "repository": {"shape": "cascade", "cascade": {"large": "big.onnx", "threshold": 0.8}}})
    assert spec.repository.cascade.members() == {"small": "release", "large": "big.onnx"}
    assert spec.repository.cascade.output == "probabilities" and spec.repository.fanout is None
    spec = parse_spec({**BASE, "repository": {"shape": "fanout", "fanout": {"members": {"a": "release", "b": "b.onnx"}}}})
    assert spec.repository.fanout.combine == "mean"


@pytest.mark.parametrize("alias", ["bad alias!", "", "9lives!"])
def test_an_invalid_mlflow_alias_to_move_is_refused_at_spec_load(alias) -> None:
    """Checked before anything runs: promotion must not move the pointer and then fail on the alias."""
    with pytest.raises(SpecError, match="promote.mlflow_alias"):
        parse_spec({**BASE, "promote": {"mlflow_alias": alias}})
