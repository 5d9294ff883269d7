"""Unit tests of carrying a champion's tuned setting (canary.tune.reuse_days): the ONNX structure digest, the
tuning fingerprint's parts, and the decision at its boundaries. No server: the carried release on a real
Triton is tests/canary/test_load_phase.py's tuning test."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from model_release.canary.champion import NATIVE, SERVED, Champion
from model_release.canary.measure.carry import carried, fingerprint
from model_release.errors import AssembleError
from model_release.repository.onnx_io import structure_digest
from model_release.spec import parse_spec

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
LOCAL = {"mode": "local", "description": "python-backend onnxruntime shim", "version": "2.59.0",
         "url": "127.0.0.1:40001"}
SETTING = {"instances": 2, "dynamic_batching": True, "max_queue_delay_us": 500, "preferred_batch_sizes": []}

LEAF_CONFIG = '''name: "leaf"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 3 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
'''


def _spec(**tune):  # noqa: ANN003, ANN202
    return parse_spec({"name": "iris", "model": {"name": "m", "alias": "candidate"},
                       "canary": {"tune": {"enabled": True, **tune}}})


def _linear(path: Path, *, seed: int, features: int = 4, classes: int = 3, activation: str = "Softmax",
            note: str = "") -> Path:
    """A linear classifier graph (MatMul, Add, an activation) with weights drawn from ``seed``, and a
    LinearClassifier-like float-list attribute holding the same coefficients."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.normal(size=(features, classes)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.normal(size=(classes,)).astype(np.float32), "B")
    scale = helper.make_node("Constant", [], ["S"], value=numpy_helper.from_array(
        rng.normal(size=(features,)).astype(np.float32)), name=f"const_{seed}")
    nodes = [scale, helper.make_node("Mul", ["X", "S"], ["XS"]), helper.make_node("MatMul", ["XS", "W"], ["XW"]),
             helper.make_node("Add", ["XW", "B"], ["Z"]),
             helper.make_node(activation, ["Z"], ["P"], **({"axis": 1} if activation == "Softmax" else {})),
             helper.make_node("Identity", ["P"], ["Y"], coefficients=rng.normal(size=features * classes).tolist(),
                              name=f"coefficients_{seed}")]
    graph = helper.make_graph(nodes, f"trained_{seed}", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, features])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, classes])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name=f"trainer {seed}")
    if note:
        helper.set_model_props(model, {"mlflow_run_id": note})
    path.write_bytes(model.SerializeToString())  # not onnx.save: the Identity's coefficients are not a checked attribute
    return path


# --- the ONNX structure digest ---------------------------------------------------------------------------


def test_a_graph_retrained_on_other_data_has_the_same_structure_digest(tmp_path) -> None:
    first = _linear(tmp_path / "a.onnx", seed=1, note="run-a")
    second = _linear(tmp_path / "b.onnx", seed=2, note="run-b")
    assert first.read_bytes() != second.read_bytes()
    assert structure_digest(first) == structure_digest(second)


@pytest.mark.parametrize("change", [{"features": 5}, {"classes": 4}, {"activation": "Sigmoid"}])
def test_another_architecture_size_or_input_changes_the_structure_digest(tmp_path, change) -> None:
    assert structure_digest(_linear(tmp_path / "a.onnx", seed=1)) != structure_digest(_linear(tmp_path / "b.onnx", seed=1, **change))


def test_two_scikit_learn_exports_of_one_pipeline_at_another_regularisation_share_the_digest(tmp_path) -> None:
    from skl2onnx import to_onnx
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = load_iris(return_X_y=True)
    x = x.astype(np.float32)
    paths = []
    for c, columns in ((1.0, 4), (10.0, 4), (1.0, 3)):
        model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=500)).fit(x[:, :columns], y)
        paths.append(tmp_path / f"c{c}-{columns}.onnx")
        paths[-1].write_bytes(to_onnx(model, x[:1, :columns]).SerializeToString())
    one, ten, fewer = (structure_digest(p) for p in paths)
    assert one == ten and one != fewer  # the same shape retrained; one feature fewer is another model
    assert onnx.load(str(paths[0])).SerializeToString() != onnx.load(str(paths[1])).SerializeToString()


def test_tree_ensembles_retrained_on_other_rows_match_and_another_size_or_depth_does_not(tmp_path) -> None:
    """A retrain grows other branches (another node count) within the same tree count and depth limit; the counts
    are compared rounded up (trees to a power of two, depth to a multiple of four)."""
    import xgboost
    from onnxmltools import convert_xgboost
    from onnxmltools.convert.common.data_types import FloatTensorType
    from skl2onnx import to_onnx
    from sklearn.datasets import load_iris
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.tree import DecisionTreeClassifier

    x, y = load_iris(return_X_y=True)
    x = x.astype(np.float32)
    rows = [np.random.default_rng(seed).choice(150, 120, replace=False) for seed in (1, 2)]

    def digest(model, rows, name):  # noqa: ANN001, ANN202
        model.fit(x[rows], y[rows])
        if isinstance(model, xgboost.XGBClassifier):
            proto = convert_xgboost(model, initial_types=[("input", FloatTensorType([None, 4]))], target_opset=15)
        else:
            proto = to_onnx(model, x[:1], target_opset={"": 17, "ai.onnx.ml": 3})
        (tmp_path / name).write_bytes(proto.SerializeToString())
        return structure_digest(tmp_path / name), (tmp_path / name).stat().st_size

    for make in (lambda: DecisionTreeClassifier(max_depth=3, random_state=0),
                 lambda: RandomForestClassifier(n_estimators=12, max_depth=4, random_state=0),
                 lambda: xgboost.XGBClassifier(n_estimators=8, max_depth=3, random_state=0)):
        (first, size_a), (second, size_b) = (digest(make(), r, f"m{i}.onnx") for i, r in enumerate(rows))
        assert first == second, make()
    assert size_a != size_b  # the last pair's trees differ (other node counts) yet match
    forest = digest(RandomForestClassifier(n_estimators=12, max_depth=4, random_state=0), rows[0], "a.onnx")[0]
    assert digest(RandomForestClassifier(n_estimators=16, max_depth=3, random_state=0), rows[0], "b.onnx")[0] == forest
    assert digest(RandomForestClassifier(n_estimators=17, max_depth=4, random_state=0), rows[0], "c.onnx")[0] != forest
    assert digest(RandomForestClassifier(n_estimators=12, max_depth=5, random_state=0), rows[0], "d.onnx")[0] != forest


def _tiled(path: Path, repeats: list[int], *, note: str = "") -> Path:
    node = helper.make_node("Tile", ["X", "R"], ["Y"])
    if note:
        node.metadata_props.add(key="trace", value=note)
    graph = helper.make_graph([node], "tile", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 4])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, None])],
                              [numpy_helper.from_array(np.array(repeats, dtype=np.int64), "R")])
    if note:
        graph.metadata_props.add(key="run", value=note)
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return path


def test_integer_tensors_read_as_shapes_are_structure_and_metadata_at_any_level_is_not(tmp_path) -> None:
    once = structure_digest(_tiled(tmp_path / "a.onnx", [1, 1]))
    assert structure_digest(_tiled(tmp_path / "b.onnx", [1000, 1])) != once  # 1000 times the rows out
    assert structure_digest(_tiled(tmp_path / "c.onnx", [1, 1], note="/home/someone/run-7")) == once


def _gathered(path: Path, columns: list[int], *, opsets: tuple[tuple[str, int], ...] = (("", 17), ("ai.onnx.ml", 3))) -> Path:
    """Learnt integers (the columns a feature selection kept) read as indices, not as a shape."""
    node = helper.make_node("Gather", ["X", "C"], ["Y"], axis=1)
    graph = helper.make_graph([node], "select", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 8])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, len(columns)])],
                              [numpy_helper.from_array(np.array(columns, dtype=np.int64), "C")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    path.write_bytes(model.SerializeToString())
    return path


def test_learnt_integers_are_weights_and_the_opsets_order_is_not_structure(tmp_path) -> None:
    kept = structure_digest(_gathered(tmp_path / "a.onnx", [0, 3, 5]))
    assert structure_digest(_gathered(tmp_path / "b.onnx", [1, 2, 7])) == kept  # other columns selected on a retrain
    assert structure_digest(_gathered(tmp_path / "c.onnx", [1, 2, 7, 6])) != kept  # one more column
    # converters list the opsets in a per-process order (skl2onnx builds them from a set)
    swapped = (("ai.onnx.ml", 3), ("", 17))
    assert structure_digest(_gathered(tmp_path / "d.onnx", [0, 3, 5], opsets=swapped)) == kept
    assert structure_digest(_gathered(tmp_path / "e.onnx", [0, 3, 5], opsets=(("", 18), ("ai.onnx.ml", 3)))) != kept


def _vocabulary(path: Path, words: list[str]) -> Path:
    node = helper.make_node("TfIdfVectorizer", ["X"], ["Y"], mode="TF", min_gram_length=1, max_gram_length=1,
                            max_skip_count=0, ngram_counts=[0], ngram_indexes=list(range(len(words))), pool_strings=words)
    graph = helper.make_graph([node], "tf", [helper.make_tensor_value_info("X", TensorProto.STRING, [None, None])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, len(words)])])
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return path


def test_a_text_vocabulary_counts_by_its_size(tmp_path) -> None:
    words = structure_digest(_vocabulary(tmp_path / "a.onnx", ["cat", "dog", "emu"]))
    assert structure_digest(_vocabulary(tmp_path / "b.onnx", ["ant", "bee", "yak"])) == words
    assert structure_digest(_vocabulary(tmp_path / "c.onnx", ["ant", "bee", "yak", "owl"])) != words


def test_a_missing_or_unreadable_onnx_file_is_an_assemble_error_naming_it(tmp_path) -> None:
    with pytest.raises(AssembleError, match=r"'.*nowhere\.onnx' does not exist; give a path to an \.onnx file"):
        structure_digest(tmp_path / "nowhere.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"not a protobuf \xff\xff")
    with pytest.raises(AssembleError, match=r"junk\.onnx' is not a readable ONNX model .*; export it again"):
        structure_digest(tmp_path / "junk.onnx")


# --- the tuning fingerprint --------------------------------------------------------------------------------


def _repository(root: Path, *, seed: int = 1, step: str = "def execute(): pass\n") -> Path:
    (root / "leaf" / "1").mkdir(parents=True)
    _linear(root / "leaf" / "1" / "model.onnx", seed=seed)
    (root / "leaf" / "config.pbtxt").write_text('name: "leaf"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 64\n')
    (root / "post" / "1").mkdir(parents=True)
    (root / "post" / "1" / "model.py").write_text(step)
    (root / "post" / "config.pbtxt").write_text('name: "post"\nbackend: "python"\n')
    (root / "another_release").mkdir()
    (root / "another_release" / "config.pbtxt").write_text(f'name: "another_release"  # {seed}\n')
    return root


def _print(root: Path, spec=None, server=LOCAL) -> dict:  # noqa: ANN001
    return fingerprint(spec or _spec(), root, ["leaf", "post"], ["leaf"], server)


def _with_warmup(root: Path, first_row: list[float]) -> Path:
    """A leaf as assemble writes it: warm-up samples from the golden set's first row, named by its hash."""
    from model_release.repository.config import read_config, write_config
    from model_release.repository.warmup_samples import add_warmup

    (root / "leaf" / "1").mkdir(parents=True)
    _linear(root / "leaf" / "1" / "model.onnx", seed=1)
    (root / "leaf" / "config.pbtxt").write_text(LEAF_CONFIG)
    config = read_config(root / "leaf" / "config.pbtxt")
    np.savez(root / "golden.npz", X=np.array([first_row, [9, 9, 9, 9]], dtype=np.float32))
    add_warmup(config, root / "leaf", str(root / "golden.npz"))
    write_config(root / "leaf" / "config.pbtxt", config)
    return root


def test_warm_up_samples_from_another_golden_row_keep_the_fingerprint(tmp_path) -> None:
    a, b = _with_warmup(tmp_path / "a", [5.1, 3.5, 1.4, 0.2]), _with_warmup(tmp_path / "b", [6.3, 2.9, 5.6, 1.8])
    names = [sorted(p.name for p in (r / "leaf" / "warmup").iterdir()) for r in (a, b)]
    assert names[0] != names[1]  # each sample is named by its row's hash, and config.pbtxt names it
    assert fingerprint(_spec(), a, ["leaf"], ["leaf"], LOCAL) == fingerprint(_spec(), b, ["leaf"], ["leaf"], LOCAL)
    (b / "leaf" / "config.pbtxt").write_text((b / "leaf" / "config.pbtxt").read_text().replace("max_batch_size: 8",
                                                                                               "max_batch_size: 16"))
    assert fingerprint(_spec(), a, ["leaf"], ["leaf"], LOCAL) != fingerprint(_spec(), b, ["leaf"], ["leaf"], LOCAL)


def test_the_fingerprint_follows_the_shape_not_the_weights_and_says_which_part_changed(tmp_path) -> None:
    base = _print(_repository(tmp_path / "a"))
    assert _print(_repository(tmp_path / "b", seed=2)) == base  # retrained, and another model of the folder changed
    changes = {
        "models": _print(_repository(tmp_path / "c", step="def execute(): return 1\n")),  # a python step's code
        "grid": _print(_repository(tmp_path / "d"), _spec(instances=[1, 2, 4])),
        "load": _print(_repository(tmp_path / "e"), parse_spec({"name": "iris", "model": {"name": "m", "alias": "candidate"},
                                                                 "canary": {"tune": {"enabled": True}, "load": {"concurrency": 8}}})),
        "server": _print(_repository(tmp_path / "f"), server={**LOCAL, "version": "2.60.0"}),
    }
    for part, other in changes.items():
        assert other["digest"] != base["digest"], part
        assert [p for p in base["parts"] if other["parts"][p] != base["parts"][p]] == [part]
    # the embedded Triton's port changes every start; a remote canary is told apart by its URL
    assert _print(tmp_path / "a", server={**LOCAL, "url": "127.0.0.1:40999"}) == base
    remote = {**LOCAL, "mode": "remote", "url": "https://canary-a:8000"}
    assert _print(tmp_path / "a", server=remote) != _print(tmp_path / "a", server={**remote, "url": "https://canary-b:8000"})
    # only the trial settings matter, not the budget or the reuse window
    assert _print(tmp_path / "a", _spec(budget_s=5, reuse_days=1)) == base


# --- carried or searched -------------------------------------------------------------------------------------


def _champion(fp: dict, *, measured: datetime | str = NOW - timedelta(days=1), chosen=SETTING, kind=SERVED,  # noqa: ANN001
              tuning: bool = True, complete: bool = True, record: object = None) -> Champion:
    if record is None:
        record = {"fingerprint": fp, "chosen": chosen, "kept_default": False, "measured_in": "iris-1", "complete": complete,
                  "chosen_label": "2 instance(s), dynamic batching, max queue delay 500 us",
                  "measured_at": measured.isoformat() if isinstance(measured, datetime) else measured}
    figures = {"tuning": record} if tuning else {"tuning": None}
    return Champion(kind, "production", release_id="iris-2", name="release iris-2 (iris-classifier v2)",
                    manifest={"canary": {"figures": figures}})


FP = {"digest": "d" * 64, "parts": {"models": "m" * 64, "grid": "g" * 64, "load": "l" * 64, "server": "s" * 64}}


def test_a_champion_of_the_same_fingerprint_measured_within_reuse_days_is_carried_with_where_it_was_measured() -> None:
    carry, why = carried(_spec(reuse_days=7), _champion(FP, measured=NOW - timedelta(days=6.99)), FP, NOW)
    assert carry is not None and carry.setting == SETTING and carry.carried_from == "iris-2" and carry.measured_in == "iris-1"
    assert carry.measured_at == (NOW - timedelta(days=6.99)).isoformat() and carry.kept_default is False
    assert why == ("carried from the champion release iris-2 (iris-classifier v2): the same fingerprint, measured 7.0 days "
                   "ago in iris-1 (within canary.tune.reuse_days 7)")


def test_a_setting_measured_just_over_reuse_days_ago_is_searched_again_saying_its_age() -> None:
    carry, why = carried(_spec(reuse_days=7), _champion(FP, measured=NOW - timedelta(days=7.01)), FP, NOW)
    assert carry is None
    assert why == ("searched: the champion release iris-2 (iris-classifier v2)'s setting was measured 7.0 days ago in "
                   "iris-1, over canary.tune.reuse_days 7")
    assert carried(_spec(reuse_days=7.02), _champion(FP, measured=NOW - timedelta(days=7.01)), FP, NOW)[0] is not None


def test_a_fingerprint_that_differs_is_searched_naming_the_parts() -> None:
    mine = {"digest": "e" * 64, "parts": {**FP["parts"], "grid": "h" * 64, "server": "t" * 64}}
    carry, why = carried(_spec(), _champion(FP), mine, NOW)
    assert carry is None and why.endswith("was tuned for another shape (its fingerprint differs in: grid, server)")


@pytest.mark.parametrize(("champion", "spec", "expected"), [
    (None, {}, "searched: no served champion whose setting could be carried"),
    (_champion(FP, kind=NATIVE), {}, "searched: no served champion whose setting could be carried"),
    (_champion(FP), {"reuse_days": 0}, "searched: canary.tune.reuse_days is 0 (a search on every release)"),
    (_champion(FP, tuning=False), {}, "searched: the champion release iris-2 (iris-classifier v2) kept no tuning "
                                      "fingerprint (it was released without tuning, or before fingerprints were kept)"),
    (_champion(FP, chosen={"instances": 0, "dynamic_batching": True}), {}, "has no setting that reads as one"),
    (_champion(FP, chosen={"instances": 2, "dynamic_batching": True, "threads": 4}), {}, "has no setting that reads as one"),
    (_champion(FP, chosen={**SETTING, "max_queue_delay_us": "500"}), {}, "has no setting that reads as one"),
    (_champion(FP, chosen={**SETTING, "max_queue_delay_us": -1}), {}, "has no setting that reads as one"),
    (_champion(FP, chosen={**SETTING, "preferred_batch_sizes": "8"}), {}, "has no setting that reads as one"),
    (_champion(FP, chosen={**SETTING, "instances": True}), {}, "has no setting that reads as one"),
    (_champion(FP, complete=False), {}, "came from a search cut short by canary.tune.budget_s"),
    (_champion(FP, complete=None), {}, "does not say whether its search tried the whole grid"),
    (_champion(FP, measured="last tuesday"), {}, "'s tuning time 'last tuesday' is not an ISO 8601 time"),
    (_champion(FP, measured="2026-12-03T12:00:00"), {}, "'s tuning time '2026-12-03T12:00:00' has no UTC offset"),
    (_champion(FP, measured=NOW + timedelta(days=1.5)), {}, "is 1.5 days in the future: the record or a clock is wrong"),
    (_champion(FP, record={**FP}), {}, "kept no tuning fingerprint"),  # a record without its own fingerprint
    (_champion(FP, record=["not", "a", "record"]), {}, "kept no tuning fingerprint"),
    (_champion(FP, record={"fingerprint": "abc", "chosen": SETTING}), {}, "kept no tuning fingerprint"),
    (_champion(FP, record={"fingerprint": {"digest": "x", "parts": "y"}}), {}, "differs in: models, grid, load, server"),
])
def test_without_a_usable_champion_record_tuning_searches_and_says_why(champion, spec, expected) -> None:  # noqa: ANN001
    carry, why = carried(_spec(**spec), champion, FP, NOW)
    assert carry is None and why.startswith("searched: ") and expected in why


def test_a_repository_whose_fingerprint_cannot_be_read_searches_saying_why(tmp_path) -> None:
    from model_release.canary.measure.carry import fingerprint_or_why

    root = _repository(tmp_path / "a")
    (root / "leaf" / "1" / "model.onnx").write_bytes(b"\x00 not onnx")
    mine = fingerprint_or_why(_spec(), root, ["leaf", "post"], ["leaf"], LOCAL)
    assert set(mine) == {"error"} and mine["error"].startswith("AssembleError: ")
    assert "model.onnx' is not a readable ONNX model" in mine["error"]
    carry, why = carried(_spec(), _champion(FP), mine, NOW)
    assert carry is None and why.startswith("searched: this release's tuning fingerprint could not be computed (AssembleError: ")


def test_a_clock_a_little_behind_is_not_a_future_record() -> None:
    carry, why = carried(_spec(), _champion(FP, measured=NOW + timedelta(hours=2)), FP, NOW)
    assert carry is not None and "measured 0.0 days ago" in why


def test_reuse_days_is_validated_by_the_spec() -> None:
    from model_release.errors import SpecError

    with pytest.raises(SpecError, match="reuse_days"):
        _spec(reuse_days=-1)


# --- tune() with a setting to carry: served and shipped, no window measured ---------------------------


class _Server:
    """The load API as tuning uses it: what it was asked to serve, as settings."""

    def __init__(self, repository: Path) -> None:
        self.repository, self.served = repository, []

    def config(self, name: str):  # noqa: ANN201
        from model_release.repository.config import read_config

        return read_config(self.repository / name / "config.pbtxt")

    def load_with_config(self, name: str, config) -> float:  # noqa: ANN001
        from dataclasses import asdict

        from model_release.canary.measure.tune import setting_of

        self.served.append(asdict(setting_of(config)))
        return 0.0


class _Runner:
    """Every window the same; records which were measured, for whom."""

    def __init__(self) -> None:
        self.windows: list[tuple[str, bool]] = []

    def window(self, target: str, seconds: float, *, measure: bool = True):  # noqa: ANN201
        from model_release.canary.measure.load import Histogram, Window

        histogram = Histogram()
        histogram.record(0.002)
        self.windows.append((target, measure))
        return Window(target, seconds, 1, 1000, 0, histogram)


def _tune(tmp_path: Path) -> tuple[dict, _Server, _Runner]:
    from model_release.canary.measure.tune import tune
    from model_release.types import AssembleResult

    repo = tmp_path / "models"
    (repo / "leaf" / "1").mkdir(parents=True)
    _linear(repo / "leaf" / "1" / "model.onnx", seed=3)
    (repo / "leaf" / "config.pbtxt").write_text(LEAF_CONFIG)
    spec = _spec(instances=[1, 2], dynamic_batching=[True], max_queue_delay_us=[500], trial_s=0.01)
    mine = fingerprint(spec, repo, ["leaf"], ["leaf"], LOCAL)
    assembled = AssembleResult(repository_dir=str(repo), manifest_path="", entry_model="leaf", load_order=["leaf"],
                               models={"leaf": 1})
    server, runner = _Server(repo), _Runner()
    tuning = tune(spec, server, runner, assembled, tmp_path / "canary", champion_target=True, champion=_champion(mine),
                  release_id="iris-3", canary=LOCAL, now=NOW)
    return tuning, server, runner


def test_a_carried_setting_is_served_and_shipped_without_a_window(tmp_path) -> None:
    from model_release.repository.config import read_config

    tuning, server, runner = _tune(tmp_path)
    assert runner.windows == [] and server.served == [{**SETTING, "preferred_batch_sizes": ()}]
    assert tuning["trials"] == [] and tuning["carried_from"] == "iris-2" and tuning["measured_in"] == "iris-1"
    config = read_config(Path(tuning["repository"]) / "leaf" / "config.pbtxt")
    assert config.instance_group[0].count == 2 and config.dynamic_batching.max_queue_delay_microseconds == 500
    # the shipped copy links the weights (no second copy of a model) and the source keeps its own config
    source, tuned = tmp_path / "models" / "leaf", Path(tuning["repository"]) / "leaf"
    assert (tuned / "1" / "model.onnx").stat().st_ino == (source / "1" / "model.onnx").stat().st_ino
    assert (source / "config.pbtxt").read_text() == LEAF_CONFIG
    assert (tuned / "config.pbtxt").stat().st_ino != (source / "config.pbtxt").stat().st_ino



def test_the_report_page_says_carried_or_why_searched_and_which_fingerprint_it_keeps() -> None:
    from model_release.canary.report.page import _reuse

    searched = {"reuse": "searched: no served champion whose setting could be carried", "measured_in": "iris-1",
                "measured_at": NOW.isoformat(), "fingerprint": FP}
    text = _reuse(searched)
    assert "searched: no served champion" in text and f"tuning fingerprint {'d' * 12} (models {'m' * 12}, grid" in text
    unread = _reuse({**searched, "fingerprint": None})
    assert "no tuning fingerprint kept, so no later release can carry this setting" in unread and "None" not in unread
    assert _reuse({"trials": []}) == ""
