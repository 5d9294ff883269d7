"""What a statistical gate decides: ``pass``, ``block`` or ``inconclusive``, from a confidence interval.

Every change gate here looks at one figure, the *drop*: how much worse the candidate is than the
champion on the same rows (> 0: worse), in the metric's own unit (or as a share of the champion's
figure for a relative limit; a latency ratio is its own figure). The rows give an
:class:`Interval` whose two ends are each a one-sided bound at the configured confidence (default
95%). Against the allowed drop ``limit``:

- **block**: the lower bound is above the limit: the candidate is worse than allowed, shown with
  that confidence;
- **pass**: it is not shown (the default: a gate blocks on evidence, never on noise), or, where the
  spec asks for proof, the upper bound is within the limit: the candidate is shown to be no worse;
- **inconclusive**: the spec asks for proof and the interval straddles the limit: the rows cannot
  decide. The finding then says what would decide it (more golden rows, more window pairs).

A :class:`Finding` is one such decision with its sentence and figures; the canary's Gate carries it
into the report (``passed`` is True, False, or None with ``outcome`` inconclusive).

Every gate row of ``report.json`` reads as one of four statuses (:func:`gate_status`): ``passed``,
``failed``, ``skipped`` (it could not be checked: no champion, no ground truth) or ``inconclusive``
(it was checked and could not decide). The canary blocks on any failed gate; with none failed and
one inconclusive, the release ends inconclusive: neither promoted nor rejected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

#: the confidence of every bound when the spec names none (``canary.confidence``; the reason is given there)
from ...spec.paired import DEFAULT_CONFIDENCE  # noqa: F401 (re-exported: the judge's modules take it from here)

PASS, BLOCK, INCONCLUSIVE = "pass", "block", "inconclusive"
#: every outcome a statistical gate may end in
OUTCOMES = (PASS, BLOCK, INCONCLUSIVE)

#: a canary gate's status, as report.json's gate rows (``outcome``) and every reader of them say it
PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
#: every status a gate row may have (the fourth, ``inconclusive``, is :data:`INCONCLUSIVE`)
GATE_STATUSES = (FAILED, INCONCLUSIVE, PASSED, SKIPPED)


@dataclass(frozen=True)
class Interval:
    """An estimate with a lower and an upper one-sided bound, each at ``confidence``."""

    estimate: float
    lower: float
    upper: float
    confidence: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def decide(interval: Interval, limit: float, *, prove: bool = False) -> str:
    """The outcome of an interval of the drop against the allowed drop ``limit``.

    Args:
        interval: bounds on how much worse the candidate is (> 0: worse).
        limit: the largest drop allowed.
        prove: whether a pass needs proof (the upper bound within the limit); without proof an
            undecided interval passes.

    Returns:
        :data:`BLOCK`, :data:`PASS` or :data:`INCONCLUSIVE`.
    """
    if interval.lower > limit:
        return BLOCK
    if not prove or interval.upper <= limit:
        return PASS
    return INCONCLUSIVE


def check_confidence(confidence: float) -> float:
    """``confidence`` if it is in (0.5, 1).

    Raises:
        ValueError: it is not (a bound at 50% or less is no bound).
    """
    if not (isinstance(confidence, float | int) and 0.5 < confidence < 1):
        raise ValueError(f"confidence {confidence!r} is not between 0.5 and 1 (exclusive); give e.g. 0.95 for 95%")
    return float(confidence)


def family_confidence(confidence: float, tests: int) -> float:
    """The confidence each of ``tests`` gates needs so that all of them together hold ``confidence`` (Bonferroni)."""
    return 1.0 - (1.0 - confidence) / max(tests, 1)


@dataclass
class Finding:
    """One statistical gate's decision.

    Attributes:
        name: the gate (``quality.accuracy``, ``flips.negative``, ``class.recall[virginica]``...).
        outcome: :data:`PASS`, :data:`BLOCK` or :data:`INCONCLUSIVE`.
        setting: the spec setting that sets its limit.
        message: the sentence the report and the verdict show.
        candidate: the candidate's figure; ``champion``: the champion's; ``limit``: the limit in words.
        data: the figures behind the decision (bounds, p-values, counts, rows needed) for the report.
    """

    name: str
    outcome: str
    setting: str
    message: str
    candidate: Any = None
    champion: Any = None
    limit: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome {self.outcome!r} is not one of {', '.join(OUTCOMES)}")

    @property
    def passed(self) -> bool | None:
        """True (pass), False (block) or None (inconclusive), as a Gate's ``passed``."""
        return {PASS: True, BLOCK: False}.get(self.outcome)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed, "data": finite(self.data)}


def gate_status(row: Mapping[str, Any]) -> str:
    """A gate row's status: its ``outcome`` when it names one, else read from ``passed`` and ``skipped``.

    ``passed`` None is *skipped* when the row says why it was skipped, else *inconclusive* (a row of a
    report written before ``outcome`` was, or of a paired gate that could not decide).
    """
    outcome = row.get("outcome")
    if outcome in GATE_STATUSES:
        return str(outcome)
    passed = row.get("passed")
    if passed is None:
        return SKIPPED if row.get("skipped") else INCONCLUSIVE
    return PASSED if passed else FAILED


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None (strict JSON for the report)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def fmt(value: float) -> str:
    """A figure in four significant digits."""
    return f"{value:.4g}"


def percent(confidence: float) -> str:
    """0.95 -> ``95%``, 0.975 -> ``97.5%``."""
    return f"{confidence * 100:.4g}%"
