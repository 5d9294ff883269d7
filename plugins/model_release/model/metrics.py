"""Quality metrics on ground truth: which exist, which way is better, and how each is computed.

The canary computes them from what Triton answered (never from the native model), for the
candidate and for the production champion on the same golden rows. The spec's quality gates
(``canary.quality``) name them; this module is the one list of valid names.

Classification (``label`` and ``probabilities`` roles): ``accuracy``, ``balanced_accuracy``,
``f1_macro``, ``log_loss`` (needs class scores), ``roc_auc`` (binary, needs class scores).
Regression (``variable`` role): ``rmse``, ``mae``, ``r2``, ``max_error``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CLASSIFICATION = "classification"
REGRESSION = "regression"


@dataclass(frozen=True)
class Metric:
    name: str
    task: str
    greater_is_better: bool
    description: str


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("accuracy", CLASSIFICATION, True, "share of rows whose top-1 label is the target"),
    Metric("balanced_accuracy", CLASSIFICATION, True, "mean recall over the classes"),
    Metric("f1_macro", CLASSIFICATION, True, "unweighted mean F1 over the classes"),
    Metric("log_loss", CLASSIFICATION, False, "cross-entropy of the class scores against the target"),
    Metric("roc_auc", CLASSIFICATION, True, "ROC AUC of the positive class's score (binary classifiers)"),
    Metric("rmse", REGRESSION, False, "root mean squared error"),
    Metric("mae", REGRESSION, False, "mean absolute error"),
    Metric("r2", REGRESSION, True, "coefficient of determination"),
    Metric("max_error", REGRESSION, False, "largest absolute error of any row"),
)}


def classification_metrics(target: Any, predicted: Any, scores: Any | None, n_classes: int) -> dict[str, float]:
    """The classification metrics of one model.

    Args:
        target: the true class index of each row ([N] ints in ``range(n_classes)``, or -1 for a class
            the model does not have: a miss in every label metric, left out of the score-based ones).
        predicted: the predicted class index of each row ([N]).
        scores: class scores ([N, n_classes]) or None when the model answers none; rows holding NaN or
            an infinity are left out of the score-based metrics and counted in ``rows_with_nonfinite_scores``
            (the canary's non-finite gate decides them, and no metric raises on them).
        n_classes: how many classes the model has.
    """
    import numpy as np
    from sklearn import metrics as skm

    labels = list(range(n_classes))
    present = sorted(set(labels) | set(np.asarray(target).tolist()))  # a class the model lacks still counts
    out = {
        "accuracy": float(skm.accuracy_score(target, predicted)),
        "balanced_accuracy": float(_quiet(skm.balanced_accuracy_score, target, predicted)),
        "f1_macro": float(skm.f1_score(target, predicted, labels=present, average="macro", zero_division=0)),
    }
    known = np.asarray(target) >= 0
    if scores is not None:
        s = np.asarray(scores, dtype=np.float64)
        finite = np.isfinite(s.reshape(len(s), -1)).all(axis=1)
        if (~finite).any():  # the non-finite gate decides these rows; the score-based metrics cover the others
            out["rows_with_nonfinite_scores"] = float((~finite).sum())
        known = known & finite
        if known.any():
            p = np.clip(s[known], 1e-15, 1.0)
            p = p / p.sum(axis=1, keepdims=True)
            t = np.asarray(target)[known]
            out["log_loss"] = float(skm.log_loss(t, p, labels=labels))
            if n_classes == 2 and len(set(t.tolist())) == 2:
                out["roc_auc"] = float(skm.roc_auc_score(t, s[known][:, 1]))
    return out


def regression_metrics(target: Any, predicted: Any) -> dict[str, float]:
    """The regression metrics of one model (``target`` and ``predicted`` of the same shape).

    Rows holding NaN or an infinity (in either) are left out and counted in ``rows_with_nonfinite_values``:
    the canary's non-finite gate decides them, and no metric raises on them.
    """
    import numpy as np
    from sklearn import metrics as skm

    t = np.asarray(target, dtype=np.float64).reshape(len(target), -1)
    p = np.asarray(predicted, dtype=np.float64).reshape(len(predicted), -1)
    finite = np.isfinite(p).all(axis=1) & np.isfinite(t).all(axis=1)
    if not finite.all():  # the non-finite gate decides these rows; the metrics cover the others
        left_out = {"rows_with_nonfinite_values": float((~finite).sum())}
        return {**(regression_metrics(t[finite], p[finite]) if finite.any() else {}), **left_out}
    return {
        "rmse": float(np.sqrt(skm.mean_squared_error(t, p))),
        "mae": float(skm.mean_absolute_error(t, p)),
        "r2": float(skm.r2_score(t, p)) if len(t) > 1 else float("nan"),
        "max_error": float(np.abs(t - p).max()) if t.size else 0.0,
    }


def _quiet(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a sklearn metric without its warnings (a class absent from the golden set, say)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)
