"""Paired statistics: how much worse the candidate is than the champion, read from the same rows.

Two models answer the same golden rows, so their per-row outcomes are paired, and only the rows
where they differ say anything about which is better.

Right or wrong (a classifier's accuracy, a class's recall): of ``n`` rows, ``worse`` are rows the
champion got right and the candidate gets wrong, ``better`` the reverse (the discordant pairs).

- :func:`mcnemar_p`: McNemar's exact test of "no difference" (a binomial test of ``worse`` out of
  ``worse + better`` at one half, scipy's ``binomtest``).
- :func:`drop_interval`: bounds on the accuracy drop ``(worse - better) / n`` from Tango's score
  test for a paired difference of proportions (Tango 1998, Statistics in Medicine 17: 891-908),
  inverted for each bound. It keeps its level with few discordant rows where Wald's does not, and at
  a drop of zero it is McNemar's test.
- :func:`drop_shown`: the block rule: the lower score bound above the allowed drop *and* McNemar's
  exact one-sided test significant (a drop beyond the limit implies a drop, so the exact test only
  makes the rule safer where the score test is approximate: a handful of discordant rows).
- :func:`rows_to_show` / :func:`smallest_drop_shown`: the size of golden set that shows a given drop
  (normal approximation of the same score test, Nam 1997), and the least drop these rows can show.

Any per-row figure (log loss, squared or absolute error, a class's hits): :func:`bootstrap`, a
seeded paired bootstrap of a statistic of column means, vectorised in chunks of bounded memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .outcome import Interval

#: the power :func:`rows_to_show` plans for: a drop of the planned size is shown 4 times in 5
DEFAULT_POWER = 0.8
#: bootstrap resamples: the 5% quantile of 2000 resamples moves by about 0.1 standard errors from seed to seed
DEFAULT_RESAMPLES = 2000
#: the seed of every bootstrap: the same rows always give the same decision (and a cached pass stays valid)
DEFAULT_SEED = 0
#: the memory one chunk of bootstrap resamples may take (index, counts and flat arrays together)
BOOTSTRAP_MEMORY_BYTES = 32 << 20


@dataclass(frozen=True)
class Discordance:
    """Paired right/wrong outcomes: ``n`` rows, ``worse`` lost by the candidate, ``better`` won by it."""

    n: int
    worse: int
    better: int

    @classmethod
    def of(cls, candidate_right: np.ndarray, champion_right: np.ndarray) -> "Discordance":
        """From two boolean arrays of the same rows (True: that model answered the row right)."""
        a, b = np.asarray(candidate_right, dtype=bool), np.asarray(champion_right, dtype=bool)
        if a.shape != b.shape:
            raise ValueError(f"paired outcomes need the same rows: candidate {a.shape}, champion {b.shape}")
        return cls(int(a.size), int((b & ~a).sum()), int((a & ~b).sum()))

    @property
    def drop(self) -> float:
        """(worse - better) / n: the champion's accuracy minus the candidate's on these rows."""
        return (self.worse - self.better) / self.n if self.n else 0.0


def mcnemar_p(worse: int, better: int, *, alternative: str = "two-sided") -> float:
    """McNemar's exact p-value (``alternative="greater"``: of the candidate being worse)."""
    from scipy.stats import binomtest

    m = worse + better
    return 1.0 if m == 0 else float(binomtest(worse, m, 0.5, alternative=alternative).pvalue)


def tango_z(d: Discordance, delta: float) -> float:
    """Tango's score statistic of H0 "drop = ``delta``" (large: the drop is above ``delta``)."""
    n, b, c = d.n, d.worse, d.better
    if n == 0:
        return 0.0
    big_a, big_b, big_c = 2.0 * n, -(b + c) + (2.0 * n - b + c) * delta, -c * delta * (1.0 - delta)
    p21 = (-big_b + math.sqrt(max(big_b * big_b - 4.0 * big_a * big_c, 0.0))) / (2.0 * big_a)  # restricted MLE
    variance = n * (2.0 * p21 + delta * (1.0 - delta))
    numerator = b - c - n * delta
    if variance <= 0.0:
        return 0.0 if numerator == 0 else math.copysign(math.inf, numerator)
    return numerator / math.sqrt(variance)


def drop_interval(d: Discordance, confidence: float) -> Interval:
    """Bounds on the accuracy drop, each one-sided at ``confidence`` (Tango's score test inverted)."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    z = float(norm.ppf(confidence))
    lo, hi = -1.0 + 1e-12, 1.0 - 1e-12

    def root(target: float) -> float:
        f = lambda delta: tango_z(d, delta) - target  # noqa: E731 (decreasing in delta)
        if f(lo) <= 0:
            return lo
        if f(hi) >= 0:
            return hi
        return float(brentq(f, lo, hi, xtol=1e-10))

    return Interval(d.drop, max(-1.0, root(z)), min(1.0, root(-z)), confidence)


def drop_shown(d: Discordance, allowed: float, confidence: float) -> bool:
    """Whether the rows show a drop beyond ``allowed`` with ``confidence`` (see the module docstring)."""
    if d.worse <= d.better:
        return False
    return drop_interval(d, confidence).lower > allowed and mcnemar_p(d.worse, d.better, alternative="greater") < 1 - confidence


def smallest_drop_shown(n: int, allowed: float, confidence: float) -> int | None:
    """The fewest rows worse (and none better) out of ``n`` that show a drop beyond ``allowed``; None: none can."""
    if n == 0 or not drop_shown(Discordance(n, n, 0), allowed, confidence):
        return None
    lo, hi = 0, n  # drop_shown is monotone in the rows worse
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if drop_shown(Discordance(n, mid, 0), allowed, confidence) else (mid, hi)
    return hi


def rows_to_show(allowed: float, drop: float, discordance: float, confidence: float, power: float = DEFAULT_POWER) -> int:
    """Rows a golden set needs to show, with ``power``, a true accuracy ``drop`` beyond ``allowed``.

    Args:
        allowed: the allowed drop (the gate's limit).
        drop: the true drop to plan for (more than ``allowed``).
        discordance: the share of rows the two models answer differently right/wrong (at least ``drop``).
        confidence: the gate's confidence.
        power: how often such a drop should be shown.
    """
    from scipy.stats import norm

    if drop <= allowed:
        raise ValueError(f"the drop to plan for ({drop:g}) must exceed the allowed drop ({allowed:g})")
    psi = min(max(discordance, drop), 1.0)
    v0, v1 = max(psi - allowed * allowed, 1e-12), max(psi - drop * drop, 1e-12)
    za, zb = float(norm.ppf(confidence)), float(norm.ppf(power))
    return int(math.ceil(((za * math.sqrt(v0) + zb * math.sqrt(v1)) / (drop - allowed)) ** 2))


def bootstrap(columns: np.ndarray, statistic: Callable[[np.ndarray], np.ndarray], *, resamples: int = DEFAULT_RESAMPLES,
              seed: int = DEFAULT_SEED, memory_bytes: int = BOOTSTRAP_MEMORY_BYTES) -> np.ndarray:
    """The paired bootstrap distribution of ``statistic`` over resampled rows.

    Rows are drawn with replacement, the same draw for every column, so the candidate's and the
    champion's figures of a row stay together. Each resample is a row of counts; its column means
    are one matrix product, so a chunk of resamples costs ``n`` x chunk numbers at most
    (``memory_bytes``), whatever the number of resamples. Several statistics of the same rows
    share one draw (``statistic`` may return [r, m]).

    Args:
        columns: [n, k] per-row figures (e.g. the candidate's loss and the champion's).
        statistic: maps [r, k] column means to [r] (or [r, m]) statistics, vectorised.
        resamples: how many resamples.
        seed: the random generator's seed.
        memory_bytes: the memory one chunk may take.

    Returns:
        [resamples] (or [resamples, m]) statistics.
    """
    x = np.asarray(columns, dtype=np.float64)
    n = x.shape[0]
    if n == 0:
        raise ValueError("a bootstrap needs at least one row")
    rng = np.random.default_rng(seed)
    chunk = max(1, memory_bytes // (32 * n))  # the draws, their counts and the counts as floats, with room
    parts = []
    for start in range(0, resamples, chunk):
        m = min(chunk, resamples - start)
        draws = rng.integers(0, n, size=(m, n))
        draws += (np.arange(m) * n)[:, None]
        counts = np.bincount(draws.ravel(), minlength=m * n).reshape(m, n).astype(np.float64)
        parts.append(statistic(counts @ x / n))
    return np.concatenate(parts)


def bootstrap_intervals(columns: np.ndarray, statistic: Callable[[np.ndarray], np.ndarray], confidence: float, *,
                        resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> list[Interval]:
    """The estimate and percentile bounds (each one-sided at ``confidence``) of each of ``statistic``'s [r, m] outputs."""
    x = np.asarray(columns, dtype=np.float64)
    estimates = np.asarray(statistic(x.mean(axis=0, keepdims=True)), dtype=np.float64).reshape(1, -1)[0]
    draws = np.asarray(bootstrap(x, statistic, resamples=resamples, seed=seed), dtype=np.float64).reshape(resamples, -1)
    out = []
    for estimate, column in zip(estimates.tolist(), draws.T):
        column = column[~np.isnan(column)]
        if not column.size:
            out.append(Interval(estimate, math.nan, math.nan, confidence))
            continue
        lower, upper = np.quantile(column, [1.0 - confidence, confidence])
        out.append(Interval(estimate, float(min(lower, estimate)), float(max(upper, estimate)), confidence))
    return out


def bootstrap_interval(columns: np.ndarray, statistic: Callable[[np.ndarray], np.ndarray], confidence: float, *,
                       resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> Interval:
    """The estimate and percentile bounds (each one-sided at ``confidence``) of a one-figure ``statistic``."""
    return bootstrap_intervals(columns, statistic, confidence, resamples=resamples, seed=seed)[0]
