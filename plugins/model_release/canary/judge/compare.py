"""What the canary's outputs are compared with, and how.

The assembler's result says how to read the entry model's outputs (:class:`Interface`): which
output plays which role (:mod:`model_release.model.roles`), the label names it answers and the native
class values they stand for. When the served label holds names (the ``classifier`` shape: BYTES
[N, top_k], best first), the reference's class values are mapped to names (``labels[i]`` for
``classes[i]``) and the top-1 label is compared by agreement; the class scores numerically.
Otherwise every output present on both sides is compared by name: label outputs (the one rule in
:func:`model_release.model.roles.is_label_array`) by agreement, the rest with atol/rtol.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import CanaryRejected
from ...model.parity import ParityAccumulator, ParityReport
from ...model.roles import LABEL, PROBABILITIES, is_label_array
from ...spec import Tolerances
from ...types import AssembleResult


@dataclass(frozen=True)
class Interface:
    """How to read an entry model's outputs (from :class:`~model_release.types.AssembleResult`).

    Attributes:
        roles: role -> output name.
        labels: the label names a classifier answers, in class order; None when it answers class values.
        classes: the native class values, in the order of ``labels``.
    """

    roles: Mapping[str, str] = field(default_factory=dict)
    labels: list[str] | None = None
    classes: list[Any] | None = None

    @classmethod
    def of(cls, assembled: AssembleResult) -> "Interface":
        return cls(dict(assembled.roles), assembled.labels, assembled.classes)

    @property
    def names_labels(self) -> bool:
        """Whether the served label output holds label names (rather than the class values themselves)."""
        return LABEL in self.roles and self.labels is not None

    def class_names(self) -> dict[str, str] | None:
        """Class value (as text) -> label name, or None when the model answers class values."""
        if self.labels is None:
            return None
        classes = self.classes if self.classes is not None else list(range(len(self.labels)))
        if len(classes) != len(self.labels):
            raise CanaryRejected(
                f"the repository answers {len(self.labels)} label names but the model has {len(classes)} classes "
                f"{classes!r}; give one label per class in repository.labels and assemble again"
            )
        return {str(c): name for c, name in zip(classes, self.labels)}

    def label_set(self) -> list[str] | None:
        """Every label the model may answer, as served text, or None when unknown."""
        if self.labels is not None:
            return list(self.labels)
        return [str(c) for c in self.classes] if self.classes is not None else None


def _to_text(values: np.ndarray) -> np.ndarray:
    return np.array([v.decode() if isinstance(v, bytes) else str(v) for v in values.reshape(-1)], dtype=object)


def _classes_to_names(values: np.ndarray, names: dict[str, str] | None) -> np.ndarray:
    flat = np.asarray(values).reshape(len(values), -1)[:, 0]  # the reference's top-1 class
    text = _to_text(flat)
    if names is None:
        return text
    unknown = sorted({t for t in text if t not in names})
    if unknown:
        raise CanaryRejected(
            f"the reference holds class values {unknown[:5]} that are not among the model's classes {sorted(names)}; "
            "re-run the export stage"
        )
    return np.array([names[t] for t in text], dtype=object)


def top1(values: np.ndarray) -> np.ndarray:
    """The best label of each row as text ([N, top_k] or [N] in)."""
    a = np.asarray(values)
    return _to_text(a.reshape(a.shape[0], -1)[:, 0] if a.ndim > 1 else a)


def comparable(
    interface: Interface, agreement: float, reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, float], list[str]]:
    """Align reference and candidate outputs for :class:`ParityAccumulator`.

    Returns:
        (expected, served, label outputs with their required agreement, outputs compared on one side only).

    Raises:
        CanaryRejected: the two sides share no output, or a classifier lacks its class scores or label.
    """
    if interface.names_labels:
        return _comparable_classifier(interface, agreement, reference, candidate)
    shared = [n for n in reference if n in candidate]
    if not shared:
        raise CanaryRejected(
            f"the served model's outputs {sorted(candidate)} share no name with the reference's {sorted(reference)}; "
            "the entry model must answer the native model's output names"
        )
    expected = {n: np.asarray(reference[n]) for n in shared}
    served = {n: np.asarray(candidate[n]) for n in shared}
    labels = {n: agreement for n in shared if is_label_array(expected[n])}
    for n in labels:
        expected[n], served[n] = top1(expected[n]), top1(served[n])
    return expected, served, labels, sorted(set(reference) ^ set(candidate))


def _comparable_classifier(
    interface: Interface, agreement: float, reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, float], list[str]]:
    scores, label = interface.roles.get(PROBABILITIES, PROBABILITIES), interface.roles[LABEL]
    missing = [n for n in (scores, label) if n not in candidate]
    if missing:
        raise CanaryRejected(
            f"the served classifier has no output {missing} (it has {sorted(candidate)}); a classifier "
            f"answers its class scores ({scores!r}) and label ({label!r}). Check the repository template."
        )
    expected: dict[str, np.ndarray] = {}
    served: dict[str, np.ndarray] = {}
    if PROBABILITIES in reference:
        expected[scores] = np.asarray(reference[PROBABILITIES])
        served[scores] = np.asarray(candidate[scores])
    if LABEL in reference:
        expected[label] = _classes_to_names(np.asarray(reference[LABEL]), interface.class_names())
        served[label] = top1(candidate[label])
    if not expected:
        raise CanaryRejected(
            f"the reference has neither {PROBABILITIES} nor {LABEL} (it has {sorted(reference)}); re-run the export stage"
        )
    unmatched = sorted((set(reference) - {PROBABILITIES, LABEL}) | (set(candidate) - {scores, label}))
    return expected, served, {label: agreement}, unmatched


def compare_with_reference(
    interface: Interface, tolerances: Tolerances, agreement: float,
    reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray],
) -> tuple[ParityReport, list[str]]:
    """Parity of the served outputs against the native reference.

    Args:
        interface: how to read the served outputs.
        tolerances: per-output atol/rtol (``canary.tolerances``).
        agreement: the share of rows whose labels must agree (``canary.min_label_agreement``).
        reference: the native model's outputs on the golden set.
        candidate: the served outputs, in golden-set order.
    """
    expected, served, labels, unmatched = comparable(interface, agreement, reference, candidate)
    acc = ParityAccumulator(tolerances, labels)
    acc.update(expected, served)
    return acc.result(), unmatched
