"""Property: whatever the spec variation, the assembler's output is lint-clean (no errors, no warnings)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from model_release.repository.assemble import assemble
from model_release.repository.config import read_config
from model_release.repository.lint import lint_repository
from model_release.workspace import Workspace

from .support import export_result, intake_result, make_spec

names = st.from_regex(r"[A-Za-z][A-Za-z0-9_\-]{0,20}", fullmatch=True)
labels = st.lists(st.text(min_size=1, max_size=12), min_size=3, max_size=3, unique=True)


@st.composite
def repositories(draw):
    shape = draw(st.sampled_from(["classifier", "single", "cascade", "fanout"]))
    max_batch = draw(st.sampled_from([0, 1, 8, 64, 1000]))
    repository = {
        "shape": shape,
        "max_batch_size": max_batch,
        "instances": draw(st.integers(1, 4)),
        "model_version": draw(st.none() | st.integers(1, 30)),
        "top_k": draw(st.integers(1, 3)),
        "preprocess": draw(st.booleans()),
        "labels": draw(st.none() | labels),
    }
    if max_batch and draw(st.booleans()):
        repository["dynamic_batching"] = {
            "max_queue_delay_microseconds": draw(st.integers(0, 10_000)),
            "preferred_batch_size": draw(st.lists(st.integers(1, max_batch), max_size=3, unique=True)),
        }
    elif draw(st.booleans()):
        repository["dynamic_batching"] = None
    if shape == "cascade":
        small_is_release = draw(st.booleans())
        repository["cascade"] = {
            "small": "release" if small_is_release else "tree.onnx",
            "large": "tree.onnx" if small_is_release else "release",
            "threshold": draw(st.floats(0.01, 1.0)),
        }
    if shape == "fanout":
        keys = draw(st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True), min_size=1, max_size=3, unique=True))
        members = {"main": "release", **{k: draw(st.sampled_from(["tree.onnx", "weak.onnx"])) for k in keys if k != "main"}}
        if len(members) < 2:
            members["other"] = "weak.onnx"
        repository["fanout"] = {"members": members, "combine": draw(st.sampled_from(["mean", "max", "min"]))}
    return draw(names), repository


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(repositories())
def test_assembled_repositories_are_lint_clean(onnx_models, case):
    name, repository = case
    spec = make_spec(name, base_dir=onnx_models["lr"].parent, **repository)
    with tempfile.TemporaryDirectory() as tmp:
        result = assemble(spec, intake_result(), export_result(onnx_models["lr"]), Workspace("prop", Path(tmp)))
        report = lint_repository(result.repository_dir)
        assert report.findings == [], [str(f) for f in report.findings]
        version = repository["model_version"] or 1
        assert set(result.models.values()) == {version}
        assert result.entry_model == name == result.load_order[-1]
        entry = read_config(Path(result.repository_dir) / name / "config.pbtxt")
        assert entry.max_batch_size == repository["max_batch_size"]
        assert list(entry.version_policy.specific.versions) == [version]
