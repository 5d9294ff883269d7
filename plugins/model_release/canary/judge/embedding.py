"""An embedding model judged as vectors: the candidate's against the champion's, row by row.

Both models embed the same golden rows, so each row has two vectors. What a team's index needs
from a retrain (``canary.embedding``, :class:`~model_release.spec.canary.EmbeddingGates`):

- ``embedding.cosine``: the cosine of each row's two vectors (mean gated; the 5th percentile and the
  lowest reported): an index built from the champion's vectors and queried with the candidate's
  finds the right rows only where they point the same way;
- ``embedding.retrieval``: the share of rows whose candidate vector finds its own row's champion
  vector among its :data:`RETRIEVAL_K` nearest of all the champion's (recall at 10 of the old index,
  queried anew; at 1 a fine-tune's query often finds a near-duplicate row of the same kind first);
- ``embedding.norm``: the relative change of the median norm (dot-product scores and the thresholds
  tuned on them move with it);
- ``embedding.neighbours``: the share of rows whose nearest other golden row is the same under both
  models. It does not depend on the space's orientation (a rotation keeps every neighbour), so it
  is gated even when ``reindex: true`` acknowledges a new space: it is what a rebuilt index keeps.

With ``reindex: true`` the first three are reported, not gated. Nothing here has a residual or a
calibration: vectors have neither. Nearest neighbours are found by cosine, a block of rows at a
time, so memory stays at :data:`BLOCK_ROWS` x rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...spec import ReleaseSpec
from .gates import Gate, skipped

#: rows compared against all the others at once (memory: this many x the golden rows, float64)
BLOCK_ROWS = 512
#: the results of the old index a query's own row must be among (recall at k)
RETRIEVAL_K = 10
SETTING = "canary.embedding"
#: the gates, each with the setting of its limit and whether a re-index turns it into a report
GATES = (("embedding.cosine", "min_cosine", True), ("embedding.retrieval", "min_retrieval", True),
         ("embedding.norm", "max_norm_change", True), ("embedding.neighbours", "min_neighbour_agreement", False))


def _unit(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v = np.asarray(vectors, dtype=np.float64).reshape(len(vectors), -1)
    norms = np.linalg.norm(v, axis=1)
    return v / np.where(norms > 0, norms, 1.0)[:, None], norms


def _nearest_other(vectors: np.ndarray) -> np.ndarray:
    """For each row, the other row of highest cosine (unit vectors in)."""
    out = np.empty(len(vectors), dtype=np.int64)
    for start in range(0, len(vectors), BLOCK_ROWS):
        sims = vectors[start:start + BLOCK_ROWS] @ vectors.T
        rows = np.arange(sims.shape[0])
        sims[rows, rows + start] = -np.inf
        out[start:start + BLOCK_ROWS] = sims.argmax(axis=1)
    return out


def _recall_at_k(queries: np.ndarray, index: np.ndarray, k: int) -> float:
    """The share of query rows whose own index row is among the ``k`` index rows of highest cosine."""
    found = 0
    for start in range(0, len(queries), BLOCK_ROWS):
        sims = queries[start:start + BLOCK_ROWS] @ index.T
        own = sims[np.arange(sims.shape[0]), np.arange(sims.shape[0]) + start]
        found += int(((sims > own[:, None]).sum(axis=1) < k).sum())
    return found / len(queries)


def vector_figures(candidate: np.ndarray, champion: np.ndarray) -> dict[str, Any]:
    """The figures of two models' vectors for the same rows (``cosine`` holds each row's, for the plot).

    Returns:
        ``rows``, ``dims``, ``cosine`` (per row), ``cosine_mean``, ``cosine_p05``, ``cosine_min``, ``retrieval``,
        ``neighbours``, ``norm_candidate`` and ``norm_champion`` (medians), ``norm_change`` (relative), and each
        model's norms per row (``norms``).
    """
    a, na = _unit(candidate)
    b, nb = _unit(champion)
    cosine = (a * b).sum(axis=1)
    rows = len(a)
    retrieval = _recall_at_k(a, b, min(RETRIEVAL_K, rows)) if rows else float("nan")
    neighbours = float((_nearest_other(a) == _nearest_other(b)).mean()) if rows > 1 else float("nan")
    median_a, median_b = float(np.median(na)), float(np.median(nb))
    return {
        "rows": rows, "dims": int(a.shape[1]), "cosine": cosine,
        "cosine_mean": float(cosine.mean()), "cosine_p05": float(np.quantile(cosine, 0.05)), "cosine_min": float(cosine.min()),
        "retrieval": retrieval, "neighbours": neighbours,
        "norm_candidate": median_a, "norm_champion": median_b,
        "norm_change": abs(median_a / median_b - 1.0) if median_b > 0 else float("inf"),
        "norms": (na, nb),
    }


def shift_section(figures: dict[str, Any]) -> dict[str, Any]:
    """The report's ``shift`` section: the figures without the per-row arrays."""
    return {k: v for k, v in figures.items() if k not in ("cosine", "norms")}


def embedding_gates(spec: ReleaseSpec, figures: dict[str, Any] | None, champion_name: str, why_not: str) -> list[Gate]:
    """The four gates (see the module docstring); skipped, saying why, without a champion's vectors."""
    limits = spec.canary.embedding
    if figures is None:
        return [skipped(name, f"{SETTING}.{field}", why_not) for name, field, _ in GATES]
    if figures["dims"] is None:
        return [skipped(name, f"{SETTING}.{field}", figures["why"]) for name, field, _ in GATES]
    return [_gate(name, field, figures, getattr(limits, field), limits.reindex and by_space, champion_name)
            for name, field, by_space in GATES]


def _gate(name: str, field: str, figures: dict[str, Any], limit: float | None, reported: bool, champion_name: str) -> Gate:
    setting = f"{SETTING}.{field}"
    value, words, worse = _figure(field, figures, limit)
    if limit is None:
        return Gate(name, None, setting, candidate=value, skipped=f"{setting} is null", message=f"{name}: {words} (not gated)")
    bound = f"<= {limit:g}" if field == "max_norm_change" else f">= {limit:g}"
    if reported:
        return Gate(name, True, setting, candidate=value, limit=f"{bound} (reported: canary.embedding.reindex)",
                    message=f"{words}; not gated: canary.embedding.reindex acknowledges that the index is rebuilt from the "
                            "candidate's vectors")
    if worse:
        return Gate(name, False, setting, candidate=value, limit=bound, message=(
            f"{words} against {champion_name}, beyond {setting} {limit:g}: {_consequence(field)}. If the index will be "
            "rebuilt from the candidate's vectors, acknowledge it with canary.embedding.reindex: true"
            if field != "min_neighbour_agreement" else
            f"{words} against {champion_name}, below {setting} {limit:g}: the candidate's space has lost the champion's "
            "neighbourhoods (a collapse or a scramble), which a re-index does not repair"))
    return Gate(name, True, setting, candidate=value, limit=bound, message=words)


def _figure(field: str, f: dict[str, Any], limit: float | None) -> tuple[float, str, bool]:
    """(the gated figure, the sentence that states it, whether it is beyond ``limit``)."""
    rows = f["rows"]
    if field == "min_cosine":
        words = (f"mean cosine between each row's candidate and champion vectors {f['cosine_mean']:.4f} on {rows} rows "
                 f"(5th percentile {f['cosine_p05']:.4f}, lowest {f['cosine_min']:.4f})")
        return f["cosine_mean"], words, limit is not None and f["cosine_mean"] < limit
    if field == "min_retrieval":
        words = (f"{f['retrieval']:.2%} of {rows} rows find their own champion vector among the {RETRIEVAL_K} nearest when "
                 "the champion's vectors are queried with the candidate's")
        return f["retrieval"], words, limit is not None and f["retrieval"] < limit
    if field == "max_norm_change":
        words = (f"median vector norm {f['norm_candidate']:.4g} against {f['norm_champion']:.4g} "
                 f"({f['norm_change']:.2%} change)")
        return f["norm_change"], words, limit is not None and f["norm_change"] > limit
    words = f"{f['neighbours']:.2%} of {rows} rows keep their nearest golden neighbour"
    return f["neighbours"], words, limit is not None and f["neighbours"] < limit


def _consequence(field: str) -> str:
    return {"min_cosine": "the candidate's vectors no longer live in the champion's space, so an index built from "
                          "the champion's vectors answers the candidate's queries wrongly",
            "min_retrieval": "queries against the index built from the champion's vectors no longer find their rows",
            "max_norm_change": "dot-product scores, and every threshold tuned on them, move with the norm"}[field]


def figures_of(candidate: np.ndarray, champion: np.ndarray) -> dict[str, Any]:
    """:func:`vector_figures`, or why two sets of vectors cannot be compared (``dims`` None, ``why``)."""
    a, b = np.asarray(candidate), np.asarray(champion)
    if a.shape[0] != b.shape[0]:
        return {"dims": None, "why": f"the candidate answered {a.shape[0]} rows, the champion {b.shape[0]}"}
    if a.reshape(len(a), -1).shape[1] != b.reshape(len(b), -1).shape[1]:
        return {"dims": None, "why": f"the candidate's vectors have {a.reshape(len(a), -1).shape[1]} dimensions, the "
                                     f"champion's {b.reshape(len(b), -1).shape[1]}: the contract gate judges that change"}
    return vector_figures(a, b)
