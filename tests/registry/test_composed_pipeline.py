"""A cascade's or fan-out's labels and parity reference, without services: what the canary judges a composed pipeline by.

The release of a cascade whose members were trained on different data, on the real stack, is
tests/registry/test_claimed_release.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from model_release.canary.judge import quality as q
from model_release.canary.judge.compare import Interface, compare_with_reference
from model_release.errors import AssembleError
from model_release.model.composed import ANSWERED_BY, compose_reference
from model_release.model.golden import NpzWriter
from model_release.model.roles import PROBABILITIES
from model_release.repository.assemble import assemble
from model_release.spec import Tolerances
from model_release.workspace import Workspace

from ..repository.support import INPUT, export_result, intake_result, iris, make_spec, sklearn_onnx

NAMES = ["setosa", "versicolor", "virginica"]


@pytest.fixture(scope="module")
def members(tmp_path_factory):
    """A weak release model (unsure on most rows) and a good one as an unregistered .onnx member, with the
    release's golden rows and native reference as its export stage writes them."""
    root = tmp_path_factory.mktemp("composed")
    weak = sklearn_onnx(root / "weak.onnx", "weak")
    good = sklearn_onnx(root / "lr.onnx", "lr")
    x, _ = iris()
    with NpzWriter(root / "golden.npz") as g, NpzWriter(root / "reference.npz") as r:
        g.append({INPUT: x})
        r.append({"label": weak.predict(x), PROBABILITIES: weak.predict_proba(x)})
    export = export_result(root / "weak.onnx")
    export.golden_path, export.reference_path = str(root / "golden.npz"), str(root / "reference.npz")
    return root, weak, good, export


def _cascade(root, threshold=0.7, **repository):
    return make_spec(base_dir=root, shape="cascade", cascade={"large": "lr.onnx", "threshold": threshold}, **repository)


def test_the_cascades_reference_routes_rows_as_the_router_does(members, tmp_path) -> None:
    root, weak, good, export = members
    x, _ = iris()
    made = compose_reference(_cascade(root), intake_result(), export, tmp_path)
    assert made["rows"] == 150 and made["path"].endswith("composed_reference.npz")
    assert "the small member's 'probabilities' where its highest value is at least 0.7" in made["description"]
    with np.load(made["path"]) as ref:
        routed = weak.predict_proba(x).astype(np.float32).max(axis=1) < np.float32(0.7)
        assert 0 < routed.sum() < 150  # both members answer some rows
        expected = np.where(routed[:, None], good.predict_proba(x), weak.predict_proba(x))
        np.testing.assert_allclose(ref[PROBABILITIES], expected, atol=1e-5)  # large: onnxruntime float32
        assert (ref[ANSWERED_BY][:, 0] == np.where(routed, "iris_large", "iris_small")).all()


def test_a_router_that_routes_other_rows_fails_parity_naming_those_rows(members, tmp_path) -> None:
    root, weak, good, export = members
    x, _ = iris()
    made = compose_reference(_cascade(root), intake_result(), export, tmp_path)
    with np.load(made["path"]) as data:
        reference = {k: data[k] for k in data.files}
    interface = Interface({PROBABILITIES: PROBABILITIES, ANSWERED_BY: ANSWERED_BY}, NAMES, [0, 1, 2])
    tolerances = Tolerances.model_validate({"default": {"atol": 1e-5, "rtol": 1e-4}})
    # served as the spec says: passes; served by a router whose threshold is 0.5: the rows it routes otherwise fail
    assert compare_with_reference(interface, tolerances, 1.0, reference, dict(reference))[0].passed
    top = weak.predict_proba(x).max(axis=1)
    broken_rows = np.flatnonzero((top >= 0.5) & (top < 0.7))
    served = {PROBABILITIES: np.where(((top < 0.5))[:, None], good.predict_proba(x), weak.predict_proba(x)).astype(np.float32),
              ANSWERED_BY: np.where(top < 0.5, b"iris_large", b"iris_small").astype(object).reshape(-1, 1)}
    parity, _ = compare_with_reference(interface, tolerances, 1.0, reference, served)
    failed = {o.name: o for o in parity.failures}
    assert set(failed) == {PROBABILITIES, ANSWERED_BY}
    assert failed[ANSWERED_BY].failing_rows == len(broken_rows) > 0
    assert failed[ANSWERED_BY].describe().endswith("; rows " + ", ".join(map(str, broken_rows[:10])) + ", ...")
    assert set(failed[PROBABILITIES].worst_rows) <= set(broken_rows.tolist())


def test_a_fanouts_reference_combines_its_members_as_the_combiner_does(members, tmp_path) -> None:
    root, weak, good, export = members
    x, _ = iris()
    spec = make_spec(base_dir=root, shape="fanout", fanout={"members": {"a": "release", "b": "lr.onnx"}, "combine": "max"})
    made = compose_reference(spec, intake_result(), export, tmp_path)
    assert "the elementwise max of their 'probabilities'" in made["description"]
    with np.load(made["path"]) as ref:
        np.testing.assert_allclose(ref[PROBABILITIES], np.maximum(weak.predict_proba(x), good.predict_proba(x)), atol=1e-5)
        assert ANSWERED_BY not in ref.files
    assert compose_reference(make_spec(shape="classifier"), intake_result(), export, tmp_path) is None


def test_repository_labels_name_a_cascades_classes_so_truth_in_names_is_judged(members, tmp_path) -> None:
    root, _, _, export = members
    result = assemble(_cascade(root, labels=NAMES), intake_result(), export, Workspace("iris-c", tmp_path))
    assert result.labels == NAMES and result.classes == [0, 1, 2] and "label" not in result.roles
    interface = Interface(result.roles, result.labels, result.classes)
    x, y = iris()
    served = {PROBABILITIES: np.eye(3)[y].astype(np.float32)}
    served[PROBABILITIES][:15] = np.roll(served[PROBABILITIES][:15], 1, axis=1)  # 15 of 150 answered wrong
    figures = q.served_metrics(interface, served, np.array(NAMES)[y], "the candidate")
    assert figures["accuracy"] == pytest.approx(135 / 150)
    # without them a cascade has no names: the truth in names is refused, naming the fix
    plain = assemble(_cascade(root), intake_result(), export, Workspace("iris-d", tmp_path))
    assert plain.labels is None
    with pytest.raises(Exception, match="no value of the ground truth names a class of the model"):
        q.served_metrics(Interface(plain.roles, plain.labels, plain.classes), served, np.array(NAMES)[y], "the candidate")
    with pytest.raises(AssembleError, match=r"repository.labels has 2 names but the model has 3 classes"):
        assemble(_cascade(root, labels=NAMES[:2]), intake_result(), export, Workspace("iris-e", tmp_path))
