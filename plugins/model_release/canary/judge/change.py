"""Change gates against the champion, decided on paired rows (see :mod:`.outcome` for the rule).

- :func:`accuracy_change`: accuracy (or any right/wrong share: a class's recall, a slice's
  accuracy) from the discordant pairs (:func:`.paired.drop_interval`, McNemar's exact test).
- :func:`loss_change`: any per-row loss (log loss, squared error, absolute error) from a paired
  bootstrap; ``root`` for a metric that is the root of the mean (RMSE).
- :func:`negative_flips`: the share of rows the champion got right and the candidate gets wrong
  (Yan et al., CVPR 2021, "Positive-Congruent Training"), with exact binomial bounds; the positive
  flips beside it. Its limit grows with the champion's error rate (``max_negative_flips_per_error``):
  a retrain from a new seed churns on the rows that are hard for both models. With ground truth it replaces raw agreement as the gate on "answers like the
  champion": a better model may disagree with a weak champion as much as it likes where it is right.

Each allowed drop is ``max_absolute_drop`` (the metric's unit) or ``max_relative_drop`` (a share
of the champion's figure); each given limit is one finding. A golden set too small to show a drop
of twice the allowed one 4 times in 5 is said so, with the rows that would (``golden.min_rows``).
"""

from __future__ import annotations

import math

import numpy as np

from ...spec.paired import DEFAULT_MAX_NEGATIVE_FLIPS, NEGATIVE_FLIPS_PER_ERROR_SETTING, NEGATIVE_FLIPS_SETTING
from .outcome import BLOCK, DEFAULT_CONFIDENCE, INCONCLUSIVE, PASS, Finding, Interval, decide, fmt, percent
from .paired import (DEFAULT_POWER, DEFAULT_RESAMPLES, DEFAULT_SEED, Discordance, bootstrap_interval, drop_interval,
                     drop_shown, mcnemar_p, rows_to_show, smallest_drop_shown)

#: the accuracy drop a golden set is sized for when the allowed drop is zero
PLANNED_DROP_AT_ZERO = 0.01


def _limits(max_absolute_drop: float | None, max_relative_drop: float | None, base: float) -> list[tuple[str, float, str]]:
    """(field, allowed drop in the metric's unit, the limit in words) for each limit given."""
    out = []
    if max_absolute_drop is not None:
        out.append(("max_absolute_drop", float(max_absolute_drop), f"at most {max_absolute_drop:g} worse than the champion"))
    if max_relative_drop is not None:
        out.append(("max_relative_drop", float(max_relative_drop) * abs(base),
                    f"at most {max_relative_drop:.2%} worse than the champion ({fmt(max_relative_drop * abs(base))})"))
    return out


def accuracy_change(candidate_right: np.ndarray, champion_right: np.ndarray, *, max_absolute_drop: float | None = None,
                    max_relative_drop: float | None = None, confidence: float = DEFAULT_CONFIDENCE, prove: bool = False,
                    metric: str = "accuracy", name: str = "quality.accuracy", setting: str = "canary.quality.accuracy",
                    champion_name: str = "the champion") -> list[Finding]:
    """One finding per limit on how much lower the candidate's share of right rows may be.

    Args:
        candidate_right: [n] booleans, the candidate answered the row right.
        champion_right: [n] booleans, the champion did (the same rows).
        max_absolute_drop: allowed drop in accuracy points (0.01: one point).
        max_relative_drop: allowed drop as a share of the champion's accuracy.
        confidence: of each bound.
        prove: whether a pass needs proof that the drop is within the limit (else: inconclusive).
        metric, name, setting, champion_name: how the finding names itself, its setting and the champion.
    """
    d = Discordance.of(candidate_right, champion_right)
    base = float(np.mean(champion_right)) if d.n else math.nan
    return [accuracy_finding(d, allowed, confidence=confidence, prove=prove, metric=metric, name=name,
                             setting=setting, limit_field=field, limit=words, champion_name=champion_name,
                             candidate=float(np.mean(candidate_right)) if d.n else math.nan, champion=base)
            for field, allowed, words in _limits(max_absolute_drop, max_relative_drop, base)]


def accuracy_finding(d: Discordance, allowed: float, *, confidence: float, prove: bool, metric: str, name: str, setting: str,
                     limit_field: str | None = None,
                     limit: str, candidate: float, champion: float, champion_name: str = "the champion") -> Finding:
    """The finding of one allowed accuracy drop on discordant pairs ``d``.

    ``setting`` is the gate's spec setting (the finding's); ``limit_field`` the field under it that set
    ``allowed`` (``max_absolute_drop``), named in the message.
    """
    field = f"{setting}.{limit_field}" if limit_field else setting
    interval, p = drop_interval(d, confidence), mcnemar_p(d.worse, d.better)
    # the block rule adds McNemar's exact test to the score bound; otherwise the bound decides pass or inconclusive
    outcome = BLOCK if drop_shown(d, allowed, confidence) else decide(Interval(
        interval.estimate, min(interval.lower, allowed), interval.upper, confidence), allowed, prove=prove)
    sizing = _sizing(d, allowed, confidence, prove)
    head = (f"{metric} {candidate:.4f} against {champion:.4f}{_of(champion_name)} on the same {d.n} rows: "
            f"{d.worse} rows worse, {d.better} better")
    tail = f"McNemar exact p = {p:.2g}"
    if outcome == BLOCK:
        message = (f"{head}; the drop is at least {fmt(interval.lower)} with {percent(confidence)} confidence, beyond "
                   f"{field} {fmt(allowed)} ({tail})")
    elif outcome == INCONCLUSIVE:
        message = (f"{head}; with {percent(confidence)} confidence the drop is between {fmt(interval.lower)} and "
                   f"{fmt(interval.upper)}: these rows can neither show it beyond {fmt(allowed)} nor rule that out "
                   f"({tail}). {sizing['advice']}")
    else:
        message = (f"{head}; a drop beyond {fmt(allowed)} cannot be shown (p = {p:.2g}; with {percent(confidence)} "
                   f"confidence the drop is at most {fmt(interval.upper)})" + (f". {sizing['advice']}" if sizing["underpowered"] else ""))
    return Finding(name, outcome, setting, message, candidate=candidate, champion=champion, limit=limit,
                   data={"rows": d.n, "worse": d.worse, "better": d.better, "drop": interval.to_dict(),
                         "allowed_drop": allowed, "mcnemar_p": p, "confidence": confidence, **sizing})


def _of(champion_name: str) -> str:
    return "" if champion_name == "the champion" else f" ({champion_name})"


def _sizing(d: Discordance, allowed: float, confidence: float, prove: bool) -> dict[str, object]:
    """How many rows this gate needs, and whether the golden set has them (``golden.min_rows`` guidance)."""
    planned = 2 * allowed if allowed > 0 else PLANNED_DROP_AT_ZERO
    share = (d.worse + d.better) / d.n if d.n else 0.0
    if prove:  # proof that an equal model is within the limit
        needed = rows_to_show(0.0, allowed, share, confidence) if allowed > 0 else None
        target = f"to show an equal model within {fmt(allowed)}"
    else:
        needed = rows_to_show(allowed, planned, share, confidence)
        target = f"to show a drop of {fmt(planned)} {_times(DEFAULT_POWER)}"
    least = smallest_drop_shown(d.n, allowed, confidence)
    can = (f"These {d.n} rows show a drop only from {least} rows worse ({fmt(least / d.n)}) up" if least
           else f"These {d.n} rows cannot show any drop beyond {fmt(allowed)}")
    advice = (f"{can}; {target} takes about {needed} rows at the discordance seen ({share:.2%} of rows): "
              "raise golden.rows and golden.min_rows" if needed else can)
    return {"rows_needed": needed, "underpowered": needed is not None and d.n < needed, "least_rows_worse_shown": least,
            "planned_drop": planned, "advice": advice}


def _times(power: float) -> str:
    return "4 times in 5" if power == 0.8 else f"with {power:.0%} power"


def loss_change(metric: str, candidate_loss: np.ndarray, champion_loss: np.ndarray, *, root: bool = False,
                max_absolute_drop: float | None = None, max_relative_drop: float | None = None,
                confidence: float = DEFAULT_CONFIDENCE, prove: bool = False, setting: str | None = None,
                champion_name: str = "the champion", resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> list[Finding]:
    """One finding per limit on how much larger the candidate's mean per-row loss may be (paired bootstrap).

    Args:
        metric: the metric's name (``log_loss``, ``rmse``, ``mae``).
        candidate_loss, champion_loss: [n] per-row losses on the same rows (squared errors for RMSE);
            a row where either is NaN or infinite is left out and counted.
        root: the metric is the square root of the mean (RMSE).
        max_absolute_drop, max_relative_drop, confidence, prove: as in :func:`accuracy_change`.
        setting: the spec setting (default ``canary.quality.<metric>``).
        champion_name: how the champion is named.
        resamples, seed: of the bootstrap.
    """
    setting = setting or f"canary.quality.{metric}"
    a, b = np.asarray(candidate_loss, np.float64).reshape(-1), np.asarray(champion_loss, np.float64).reshape(-1)
    keep = np.isfinite(a) & np.isfinite(b)
    a, b, left_out = a[keep], b[keep], int((~keep).sum())
    g = np.sqrt if root else (lambda v: v)
    mine, theirs = (float(g(a.mean())), float(g(b.mean()))) if a.size else (math.nan, math.nan)
    findings = []
    for field, allowed, words in _limits(max_absolute_drop, max_relative_drop, theirs):
        relative = field == "max_relative_drop"
        if not a.size:
            findings.append(Finding(f"quality.{metric}", INCONCLUSIVE, setting, f"{metric}: no row where both "
                                    f"models' losses are finite ({left_out} left out)", limit=words, data={"rows": 0}))
            continue
        interval = bootstrap_interval(np.column_stack([a, b]), _loss_statistic(g, relative), confidence,
                                      resamples=resamples, seed=seed)
        limit = max_relative_drop if relative else allowed
        outcome = decide(interval, limit, prove=prove)
        shown = (lambda v: f"{v:.2%}") if relative else fmt
        sizing = _loss_sizing(a, b, root, limit * abs(theirs) if relative else allowed, confidence)
        head = f"{metric} {fmt(mine)} against {fmt(theirs)}{_of(champion_name)} on the same {a.size} rows"
        if outcome == BLOCK:
            message = (f"{head}: worse by at least {shown(interval.lower)} with {percent(confidence)} confidence, "
                       f"beyond {setting}.{field} {shown(limit)}")
        elif outcome == INCONCLUSIVE:
            message = (f"{head}: worse by between {shown(interval.lower)} and {shown(interval.upper)} with "
                       f"{percent(confidence)} confidence, so neither beyond {shown(limit)} nor within it is shown; "
                       f"about {sizing['rows_needed']} rows would decide it")
        else:
            message = (f"{head}: a change beyond {shown(limit)} cannot be shown (with {percent(confidence)} confidence "
                       f"worse by at most {shown(interval.upper)})")
            if sizing["underpowered"]:
                message += (f". These {a.size} rows are too few to show a change of twice the limit {_times(DEFAULT_POWER)}: "
                            f"that takes about {sizing['rows_needed']} rows; raise golden.rows and golden.min_rows")
        findings.append(Finding(f"quality.{metric}", outcome, setting, message, candidate=mine, champion=theirs,
                                limit=words, data={"rows": int(a.size), "rows_left_out": left_out, "relative": relative,
                                                   "drop": interval.to_dict(), "allowed_drop": limit, **sizing}))
    return findings


def _loss_statistic(g, relative: bool):  # noqa: ANN001, ANN202 (vectorised over [r, 2] column means)
    def statistic(means: np.ndarray) -> np.ndarray:
        mine, theirs = g(means[:, 0]), g(means[:, 1])
        if not relative:
            return mine - theirs
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(theirs > 0, mine / np.where(theirs > 0, theirs, 1.0) - 1.0, np.where(mine > 0, np.inf, 0.0))
    return statistic


def _loss_sizing(a: np.ndarray, b: np.ndarray, root: bool, allowed: float, confidence: float) -> dict[str, object]:
    """Rows that show a mean loss drop of twice ``allowed`` 4 times in 5 (normal approximation, on the mean's scale)."""
    from scipy.stats import norm

    base = float(b.mean())
    if root:  # RMSE limits become limits on the mean squared error
        allowed = (math.sqrt(base) + allowed) ** 2 - base
    spread = float(np.std(a - b, ddof=1)) if a.size > 1 else 0.0
    if allowed <= 0 or spread == 0:
        return {"rows_needed": None, "underpowered": False}
    needed = int(math.ceil(((float(norm.ppf(confidence)) + float(norm.ppf(DEFAULT_POWER))) * spread / allowed) ** 2))
    return {"rows_needed": needed, "underpowered": a.size < needed}


def negative_flips(candidate_right: np.ndarray, champion_right: np.ndarray, *, max_share: float = DEFAULT_MAX_NEGATIVE_FLIPS,
                   per_error: float | None = None, confidence: float = DEFAULT_CONFIDENCE, prove: bool = False,
                   name: str = "flips.negative", setting: str = NEGATIVE_FLIPS_SETTING,
                   champion_name: str = "the champion") -> Finding:
    """The share of rows the champion got right and the candidate gets wrong, against the allowed share.

    The allowed share is ``max_share``, or ``per_error`` times the champion's error rate on these
    rows when that is larger: two trainings of one model from different seeds disagree on the rows
    that are hard for both, and a weaker champion has more of them (the evidence is in
    :data:`~model_release.spec.paired.DEFAULT_MAX_NEGATIVE_FLIPS_PER_ERROR`'s comment).
    """
    from scipy.stats import binomtest

    d = Discordance.of(candidate_right, champion_right)
    if d.n == 0:
        return Finding(name, INCONCLUSIVE, setting, "negative flips: no golden rows", limit=f"<= {max_share:.2%}")
    error = 1.0 - float(np.mean(champion_right))
    allowed, why = _allowed_flips(max_share, per_error, error, setting)
    ci = binomtest(d.worse, d.n).proportion_ci(confidence_level=2 * confidence - 1, method="exact")
    interval = Interval(d.worse / d.n, float(ci.low), float(ci.high), confidence)
    outcome = decide(interval, allowed, prove=prove)
    flips = (f"{d.worse} of {d.n} rows ({d.worse / d.n:.2%}) {champion_name} got right are now wrong, "
             f"{d.better} ({d.better / d.n:.2%}) now right")
    if outcome == BLOCK:
        message = (f"negative flips: {flips}; at least {interval.lower:.2%} with {percent(confidence)} confidence, "
                   f"beyond {why}")
    elif outcome == INCONCLUSIVE:
        message = (f"negative flips: {flips}; between {interval.lower:.2%} and {interval.upper:.2%} with "
                   f"{percent(confidence)} confidence, neither shown beyond {allowed:.2%} nor within it")
    else:
        message = (f"negative flips: {flips}; at most {interval.upper:.2%} with {percent(confidence)} confidence"
                   + (f" (allowed {why})" if allowed > max_share else ""))
    return Finding(name, outcome, setting, message, candidate=d.worse / d.n, champion=0.0, limit=f"<= {allowed:.2%}",
                   data={"rows": d.n, "negative": d.worse, "positive": d.better, "negative_share": interval.to_dict(),
                         "positive_share": d.better / d.n, "allowed_share": allowed, "max_share": max_share,
                         "per_error": per_error, "champion_error": error})


def _allowed_flips(max_share: float, per_error: float | None, error: float, setting: str) -> tuple[float, str]:
    """(the allowed share of negative flips, how the message names it)."""
    relative = per_error * error if per_error is not None else 0.0
    if relative <= max_share:
        return max_share, f"{setting} {max_share:.2%}"
    return relative, (f"{relative:.2%}: {NEGATIVE_FLIPS_PER_ERROR_SETTING} {per_error:g} x the champion's error rate "
                      f"{error:.2%} on these rows (above {setting} {max_share:.2%})")
