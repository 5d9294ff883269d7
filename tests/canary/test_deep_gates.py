"""The canary's gates for deep-learning retrains: negative flips against the champion's errors, and vectors.

Logic only (no server): the flip gate's limit that grows with the champion's error rate, at its
boundary and on the issue's transformer retrain; the embedding gates on vectors built here (the
same, rotated, re-drawn), each at its boundary, with and without an acknowledged re-index; and the
report page of an embedding model, which shows vectors, not residuals or calibration.
"""

from __future__ import annotations

import numpy as np
import pytest

from model_release.canary.judge.change import negative_flips
from model_release.canary.judge.embedding import embedding_gates, figures_of, vector_figures
from model_release.canary.judge.outcome import BLOCK, PASS
from model_release.canary.report.page import render_html
from model_release.canary.report.plotdata import vectors_section
from model_release.spec import parse_spec


def _pairs(rows: int, champion_right: int, worse: int, better: int) -> tuple[np.ndarray, np.ndarray]:
    """(candidate right, champion right): the champion right on ``champion_right`` rows, the candidate
    wrong on ``worse`` of those and right on ``better`` of the others."""
    champion = np.zeros(rows, dtype=bool)
    champion[:champion_right] = True
    candidate = champion.copy()
    candidate[:worse] = False
    candidate[champion_right:champion_right + better] = True
    return candidate, champion


# --- negative flips against the champion's error rate --------------------------------------------------


def test_the_issues_transformer_retrain_passes_where_five_percent_blocked_it():
    # 600 golden rows, accuracy 0.747 -> 0.813: 75 rows broken (12.5%), 115 fixed
    candidate, champion = _pairs(600, 448, 75, 115)
    assert (candidate.mean(), champion.mean()) == (pytest.approx(0.8133, abs=1e-4), pytest.approx(0.7467, abs=1e-4))
    old = negative_flips(candidate, champion)
    assert old.outcome == BLOCK and "beyond canary.champion.max_negative_flips 5.00%" in old.message
    new = negative_flips(candidate, champion, per_error=1.0)
    assert new.outcome == PASS and new.limit == "<= 25.33%"
    assert ("(allowed 25.33%: canary.champion.max_negative_flips_per_error 1 x the champion's error rate 25.33% on these "
            "rows (above canary.champion.max_negative_flips 5.00%))") in new.message
    assert new.data["champion_error"] == pytest.approx(152 / 600) and new.data["allowed_share"] == pytest.approx(152 / 600)


@pytest.mark.parametrize("nudge", [-1e-6, 1e-6])
def test_the_per_error_limit_just_inside_and_just_outside_the_lower_bound(nudge):
    candidate, champion = _pairs(1000, 700, 120, 40)  # champion error 30%, 12% of rows broken
    lower = negative_flips(candidate, champion).data["negative_share"]["lower"]
    finding = negative_flips(candidate, champion, per_error=(lower + nudge) / 0.3)
    assert finding.outcome == (BLOCK if nudge < 0 else PASS)
    if nudge < 0:
        assert f"at least {lower:.2%} with 95% confidence, beyond {lower + nudge:.2%}: " in finding.message
        assert "canary.champion.max_negative_flips_per_error" in finding.message


def test_a_champion_more_accurate_than_the_floor_keeps_the_five_percent_and_a_collapse_still_blocks():
    # champion 97% right: 1.0 x 3% is below 5%, so 5% stands; a class collapse breaks 10% of rows
    candidate, champion = _pairs(600, 582, 60, 1)
    finding = negative_flips(candidate, champion, per_error=1.0)
    assert finding.outcome == BLOCK and finding.limit == "<= 5.00%"
    assert "beyond canary.champion.max_negative_flips 5.00%" in finding.message
    # a weak champion (70%) and a collapse breaking half of its right rows: 35% of rows, far beyond its 30% errors
    candidate, champion = _pairs(600, 420, 210, 10)
    assert negative_flips(candidate, champion, per_error=1.0).outcome == BLOCK


def test_the_spec_reaches_the_gate_and_null_keeps_five_percent_alone():
    from model_release.canary.judge.paired_quality import limits_from_spec

    spec = parse_spec({"name": "t", "model": {"name": "m", "alias": "candidate"}})
    assert limits_from_spec(spec.canary, "classification").max_negative_flips_per_error == 1.0
    off = parse_spec({"name": "t", "model": {"name": "m", "alias": "candidate"},
                      "canary": {"champion": {"max_negative_flips_per_error": None}}})
    assert limits_from_spec(off.canary, "classification").max_negative_flips_per_error is None


# --- vectors ---------------------------------------------------------------------------------------------


def _vectors(rows: int = 300, dims: int = 32, seed: int = 0) -> np.ndarray:
    """Clustered vectors (ten centres), so that neighbours mean something."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(10, dims)) * 3
    return (centres[rng.integers(0, 10, rows)] + rng.normal(size=(rows, dims))).astype(np.float32)


def _rotation(dims: int, seed: int = 1) -> np.ndarray:
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(dims, dims)))
    return q.astype(np.float32)


def _spec(**embedding: object):  # noqa: ANN202
    return parse_spec({"name": "t", "model": {"name": "m", "alias": "candidate"}, "repository": {"shape": "embedding"},
                       "canary": {"embedding": embedding}})


def _by_name(gates: list) -> dict:  # noqa: ANN001
    return {g.name: g for g in gates}


def test_the_same_vectors_a_rotation_and_a_new_space_read_as_they_should():
    old = _vectors()
    same = vector_figures(old, old)
    assert (same["cosine_mean"], same["retrieval"], same["neighbours"], same["norm_change"]) == (
        pytest.approx(1.0), 1.0, 1.0, pytest.approx(0.0))
    turned = vector_figures(old @ _rotation(32), old)
    assert abs(turned["cosine_mean"]) < 0.3 and turned["retrieval"] < 0.2
    assert turned["neighbours"] == pytest.approx(1.0) and turned["norm_change"] == pytest.approx(0.0, abs=1e-5)
    scaled = vector_figures(old * 1.5, old)
    assert scaled["cosine_mean"] == pytest.approx(1.0) and scaled["norm_change"] == pytest.approx(0.5, abs=1e-5)
    noise = vector_figures(np.random.default_rng(5).normal(size=old.shape), old)
    assert noise["neighbours"] < 0.2  # a scrambled space keeps no neighbourhood


def test_a_rotated_space_is_blocked_naming_the_figures_and_limits_unless_a_reindex_is_acknowledged():
    old = _vectors()
    figures = figures_of(old @ _rotation(32), old)
    gates = _by_name(embedding_gates(_spec(), figures, "release r-1", ""))
    cosine = gates["embedding.cosine"]
    assert cosine.passed is False and cosine.setting == "canary.embedding.min_cosine" and cosine.limit == ">= 0.8"
    assert cosine.message.startswith(f"mean cosine between each row's candidate and champion vectors {figures['cosine_mean']:.4f}")
    assert "against release r-1, beyond canary.embedding.min_cosine 0.8" in cosine.message
    assert "acknowledge it with canary.embedding.reindex: true" in cosine.message
    assert gates["embedding.retrieval"].passed is False and gates["embedding.neighbours"].passed is True
    acknowledged = _by_name(embedding_gates(_spec(reindex=True), figures, "release r-1", ""))
    assert all(g.passed for g in acknowledged.values())
    assert "not gated: canary.embedding.reindex" in acknowledged["embedding.cosine"].message


@pytest.mark.parametrize("nudge", [-1e-6, 1e-6])
def test_each_vector_gate_just_inside_and_just_outside_its_limit(nudge):
    old = _vectors()
    figures = figures_of(old @ _rotation(32) * 1.2, old)
    limits = {"min_cosine": figures["cosine_mean"] - nudge, "min_retrieval": figures["retrieval"] - nudge,
              "max_norm_change": figures["norm_change"] + nudge}
    gates = _by_name(embedding_gates(_spec(**limits), figures, "r-1", ""))
    for name in ("embedding.cosine", "embedding.retrieval", "embedding.norm"):
        assert gates[name].passed is (nudge > 0), name
    blurred = old + np.random.default_rng(5).normal(size=old.shape).astype(np.float32) * 2  # a space half lost
    scrambled = figures_of(blurred, old)
    assert 0.05 < scrambled["neighbours"] < 0.5
    limit = scrambled["neighbours"] - nudge
    neighbours = _by_name(embedding_gates(_spec(reindex=True, min_neighbour_agreement=limit), scrambled, "r-1", ""))
    assert neighbours["embedding.neighbours"].passed is (nudge > 0)  # a re-index does not excuse a lost space
    if nudge < 0:
        assert "lost the champion's neighbourhoods" in neighbours["embedding.neighbours"].message


def test_vectors_of_another_width_or_no_champion_are_skipped_saying_why():
    old = _vectors()
    gates = embedding_gates(_spec(), figures_of(old[:, :16], old), "r-1", "")
    assert all(g.passed is None and "the contract gate judges that change" in g.skipped for g in gates)
    assert all(g.skipped == "no champion" for g in embedding_gates(_spec(), None, "r-1", "no champion"))


def test_an_embedding_models_page_shows_vectors_not_residuals_or_calibration():
    old = _vectors()
    figures = vector_figures(old * 1.1, old)
    report = {"release_id": "r-2", "quality": {"skipped": "an embedding model is judged by its vectors", "task": "embedding"},
              "shift": {"task": "embedding", "cosine_mean": figures["cosine_mean"], "retrieval": figures["retrieval"],
                        "neighbours": figures["neighbours"], "norm_change": figures["norm_change"], "reindex": False},
              "plots": {"vectors": vectors_section(figures["cosine"], figures["norms"])}, "gates": [],
              "champion": {"kind": "served", "release_id": "r-1"}}
    page = render_html(report)
    assert "Vectors against the production champion" in page
    assert "<figure class='plot' data-plot='cosine'>" in page and "<figure class='plot' data-plot='norms'>" in page
    assert f"<td class='num'>{figures['retrieval']:.4g}" in page or "retrieval" in page.split("data-plot='norms'")[1]
    for absent in ("Residual", "Quality on ground truth", "calibration", "Row by row against the champion"):
        assert absent not in page, absent
