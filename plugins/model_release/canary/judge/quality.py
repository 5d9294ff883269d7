"""Figures of the *model as served*: quality on ground truth, and how alike two models answer.

Everything here reads served outputs through an :class:`~.compare.Interface` (which output is
the label, which the class scores, which the prediction), so the candidate and the production
champion are each read by their own interface: a champion that names its classes differently
is compared by what it answers, not by the candidate's names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import SpecError
from ...model.metrics import CLASSIFICATION, REGRESSION, classification_metrics, regression_metrics
from ...model.roles import EMBEDDING, LABEL, PROBABILITIES, VARIABLE
from .compare import Interface, top1


#: the task of a model whose output plays the embedding role (judged as vectors: :mod:`.embedding`)
EMBEDDING_TASK = "embedding"


def task_of(interface: Interface) -> str | None:
    """``classification``, ``regression`` or ``embedding`` from the roles the entry model's outputs play; None if none."""
    if EMBEDDING in interface.roles:
        return EMBEDDING_TASK
    if LABEL in interface.roles or PROBABILITIES in interface.roles:
        return CLASSIFICATION
    if VARIABLE in interface.roles:
        return REGRESSION
    return None


def class_vocabulary(interface: Interface, target_names: list[str] | None = None) -> tuple[list[str], dict[str, int]]:
    """(served text of each class in class order, target text -> class index).

    A target may give class values (``0``, ``"setosa"``...) or label names; both map to the index.
    ``target_names`` are more names to accept in the target, by class index (a native champion,
    which has no names of its own, reads a target written in the candidate's label names).
    """
    classes = interface.classes if interface.classes is not None else (
        list(range(len(interface.labels))) if interface.labels is not None else None)
    if classes is None:
        raise SpecError("the served model records neither its classes nor its labels, so its answers cannot be "
                        "matched with the ground truth; give repository.labels in the spec")
    served = list(interface.labels) if interface.names_labels else [str(c) for c in classes]
    index = {str(c): i for i, c in enumerate(classes)}
    for i, name in enumerate([*(interface.labels or []), *(target_names or [])]):
        index.setdefault(name, i % len(classes))
    return served, index


#: the index of a target class the model does not have (it can never predict it: always a miss)
UNKNOWN_CLASS = -1


def target_indices(target: np.ndarray, index: Mapping[str, int], where: str) -> np.ndarray:
    """The class index of each target value; :data:`UNKNOWN_CLASS` for a class the model does not have.

    Raises:
        SpecError: no target value names a class of the model (the column is not this model's ground truth).
    """
    text = [v.decode() if isinstance(v, bytes) else (str(int(v)) if isinstance(v, float | np.floating) and float(v).is_integer() else str(v))
            for v in np.asarray(target).reshape(-1)]
    if text and not any(t in index for t in text):
        raise SpecError(
            f"{where}: no value of the ground truth names a class of the model (values e.g. {sorted(set(text))[:5]}; "
            f"its classes: {sorted(index)[:20]}). Give class values or label names in golden.target's column"
        )
    return np.array([index.get(t, UNKNOWN_CLASS) for t in text], dtype=np.int64)


@dataclass
class Classified:
    """A classifier's answers on the golden rows, read against the ground truth.

    Attributes:
        served: the text of each class as the model answers it, in class order.
        truth: each row's true class index (:data:`UNKNOWN_CLASS` for a class the model lacks).
        predicted: each row's answered class index (-2 for a label the model should not answer, or no finite scores).
        scores: the class scores ([N, classes]) or None.
    """

    served: list[str]
    truth: np.ndarray
    predicted: np.ndarray
    scores: np.ndarray | None


def classify(interface: Interface, outputs: Mapping[str, np.ndarray], target: np.ndarray, where: str,
             *, target_names: list[str] | None = None) -> Classified:
    """A classifier's answers and the ground truth as class indices of its own classes."""
    served, index = class_vocabulary(interface, target_names)
    truth = target_indices(target, index, where)
    position = {text: i for i, text in enumerate(served)}
    scores = outputs.get(interface.roles.get(PROBABILITIES, ""))
    if LABEL in interface.roles:  # a label the model should not answer is a miss, never a match with an unknown class
        predicted = np.array([position.get(t, -2) for t in top1(outputs[interface.roles[LABEL]])], dtype=np.int64)
    else:  # class scores only: the label is the best score; a row of non-finite scores answers nothing (a miss)
        s = np.asarray(scores, dtype=np.float64)
        predicted = np.where(np.isfinite(s.reshape(len(s), -1)).all(axis=1), np.nan_to_num(s).argmax(axis=1), -2)
    if scores is not None and np.asarray(scores).shape[1:] != (len(served),):
        scores = None  # not one score per class: no log loss or AUC
    return Classified(served, truth, predicted, None if scores is None else np.asarray(scores))


def served_metrics(interface: Interface, outputs: Mapping[str, np.ndarray], target: np.ndarray, where: str,
                   *, target_names: list[str] | None = None) -> dict[str, float]:
    """The quality metrics of one served model on the golden set's ground truth."""
    task = task_of(interface)
    if task == REGRESSION:
        predicted = np.asarray(outputs[interface.roles[VARIABLE]], dtype=np.float64)
        t = np.asarray(target, dtype=np.float64)
        if t.size != predicted.size:
            raise SpecError(
                f"{where}: the ground truth has {t.size // max(len(t), 1)} value(s) per row but the model predicts "
                f"{predicted.size // max(len(predicted), 1)}; golden.target must hold one value per predicted value"
            )
        return regression_metrics(t.reshape(predicted.shape), predicted)
    read = classify(interface, outputs, target, where, target_names=target_names)
    figures = classification_metrics(read.truth, read.predicted, read.scores, len(read.served))
    unknown = int((read.truth == UNKNOWN_CLASS).sum())
    if unknown:  # counted as misses above; the score-based metrics cover the known classes only
        figures["rows_of_classes_the_model_lacks"] = float(unknown)
    return figures


def class_values(interface: Interface, labels: np.ndarray) -> np.ndarray:
    """Served labels as the text of the native class values they stand for (unknown ones stay as they are)."""
    served, _ = class_vocabulary(interface)
    classes = interface.classes if interface.classes is not None else list(range(len(served)))
    to_value = {text: str(c) for text, c in zip(served, classes)}
    return np.array([to_value.get(t, t) for t in top1(labels)], dtype=object)


def agreement(candidate: np.ndarray, champion: np.ndarray) -> float:
    """The share of rows whose top-1 answers are equal."""
    a, b = top1(candidate), top1(champion)
    return float((a == b).mean()) if len(a) else 1.0


def class_frequencies(labels: np.ndarray, classes: list[str]) -> np.ndarray:
    text = top1(labels)
    return np.array([(text == c).sum() for c in classes], dtype=np.float64) / max(len(text), 1)


def psi(expected: np.ndarray, actual: np.ndarray, *, floor: float = 1e-4) -> float:
    """Population stability index between two frequency vectors (bins floored at ``floor``)."""
    e = np.clip(expected, floor, None)
    a = np.clip(actual, floor, None)
    e, a = e / e.sum(), a / a.sum()
    return float(((a - e) * np.log(a / e)).sum())


def js_distance(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen-Shannon distance (base 2, in [0, 1]) between two frequency vectors."""
    from scipy.spatial.distance import jensenshannon

    value = float(jensenshannon(p, q, base=2))
    return 0.0 if math.isnan(value) else value


def label_shift(candidate: np.ndarray, champion: np.ndarray) -> dict[str, Any]:
    """Agreement, PSI and JS distance of two models' predicted labels (as served text)."""
    classes = sorted(set(top1(candidate)) | set(top1(champion)))
    c, p = class_frequencies(candidate, classes), class_frequencies(champion, classes)
    return {
        "agreement": agreement(candidate, champion),
        "psi": psi(p, c), "js_distance": js_distance(p, c),
        "candidate_frequencies": dict(zip(classes, c.round(6).tolist())),
        "champion_frequencies": dict(zip(classes, p.round(6).tolist())),
    }


def numeric_shift(candidate: np.ndarray, champion: np.ndarray) -> dict[str, Any]:
    """Two-sample Kolmogorov-Smirnov statistic and Wasserstein distance of two models' numeric predictions."""
    from scipy.stats import ks_2samp, wasserstein_distance

    a = np.asarray(candidate, dtype=np.float64).reshape(-1)
    b = np.asarray(champion, dtype=np.float64).reshape(-1)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if not a.size or not b.size:
        return {"ks": 1.0, "wasserstein": math.inf, "mean_abs_diff": math.inf}
    same_rows = len(candidate) == len(champion) and np.shape(candidate) == np.shape(champion)
    diff = np.abs(np.asarray(candidate, np.float64) - np.asarray(champion, np.float64)) if same_rows else None
    return {
        "ks": float(ks_2samp(a, b).statistic),
        "wasserstein": float(wasserstein_distance(a, b)),
        "mean_abs_diff": float(np.nanmean(diff)) if diff is not None and diff.size else None,
        "max_abs_diff": float(np.nanmax(diff)) if diff is not None and diff.size else None,
    }


def nonfinite_rows(outputs: Mapping[str, np.ndarray]) -> dict[str, int]:
    """Output name -> how many rows hold NaN or an infinity (floating outputs only; absent when none)."""
    found = {}
    for name, array in outputs.items():
        a = np.asarray(array)
        if a.dtype.kind in "fc" and a.size:
            bad = int((~np.isfinite(a.reshape(len(a), -1))).any(axis=1).sum())
            if bad:
                found[name] = bad
    return found
