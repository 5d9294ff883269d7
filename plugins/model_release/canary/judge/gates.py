"""The gates that judge the served model, each one line of the verdict.

A :class:`Gate` names what it checked, the candidate's figure, the champion's figure, the limit
and the spec setting that sets it; a failed gate's sentence is a reason the release is blocked.
A gate that could not be checked (no ground truth, no champion) is *skipped* and says why. A gate
that was checked but whose evidence cannot decide (an interval that straddles its limit) is
*inconclusive* (``passed`` None, not skipped) and says what would decide it; with no gate failed,
one inconclusive gate makes the canary inconclusive (:class:`~model_release.errors.CanaryInconclusive`).

- ``contract``: the candidate's entry model against the champion's (:mod:`.contract`); a break
  passes only when ``promote.breaking_change`` acknowledges it.
- ``nonfinite``: no served output holds NaN or an infinity, whatever the native model does.
- ``quality.<metric>``: value and change thresholds on ground truth. ``threshold``,
  ``min_absolute_change`` and ``min_relative_change`` are checked by MLflow's own
  ``validate_evaluation_results`` (its ``MetricThreshold`` semantics); ``max_absolute_drop`` and
  ``max_relative_drop`` bound a regression against the champion.
- ``champion.agreement`` / ``champion.psi`` (classifiers), ``champion.ks`` (numeric predictions):
  how alike candidate and champion answer the same rows, no ground truth needed.
- ``parity.<output>``: each served output against the native model's answers (tolerances, or
  label agreement).
- ``load.*``: errors, the absolute SLO and the ratios to the champion under load, each ratio decided
  from its interval over the alternating window pairs (:mod:`.latency_ratio`: beyond the limit
  blocks, within passes, straddling it is inconclusive); without a load phase the SLO is judged on
  the correctness replay (``replay.slo_p99``).
- ``expectations``: the great-expectations suite over the served outputs.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import asdict, dataclass
from typing import Any

from ...model.metrics import METRICS
from ...model.parity import OutputParity, ParityReport
from ...spec import MetricGate, ReleaseSpec
from .latency_ratio import load_ratio_findings
from .outcome import INCONCLUSIVE, Finding, finite, gate_status


@dataclass
class Gate:
    """One check of the verdict: ``passed`` True, False, or None (skipped when ``skipped`` says why,
    else inconclusive). ``data``: the figures a statistical gate was decided on (its interval, the
    window pairs, how many more would decide it), kept in report.json."""

    name: str
    passed: bool | None
    setting: str
    candidate: Any = None
    champion: Any = None
    limit: str | None = None
    message: str = ""
    skipped: str | None = None
    data: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        return self.passed is False

    @property
    def inconclusive(self) -> bool:
        """Checked, and the evidence could not decide (not skipped)."""
        return self.passed is None and self.skipped is None

    @property
    def outcome(self) -> str:
        """``passed``, ``failed``, ``skipped`` or ``inconclusive`` (:func:`~.outcome.gate_status`)."""
        return gate_status({"passed": self.passed, "skipped": self.skipped})

    @property
    def reason(self) -> str:
        return f"{self.message} [{self.setting}]"

    def to_dict(self) -> dict[str, Any]:
        out = {**asdict(self), "outcome": self.outcome}
        if self.data is None:
            del out["data"]
        else:
            out["data"] = finite(self.data)
        return out


def skipped(name: str, setting: str, why: str) -> Gate:
    return Gate(name, None, setting, skipped=why, message=f"{name}: skipped: {why}")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


# --- contract and non-finite outputs -----------------------------------------------------------------


def contract_gate(spec: ReleaseSpec, differences: list[str] | None, champion_name: str) -> Gate:
    """``differences``: the breaks found (None: no champion to compare with)."""
    setting = "promote.breaking_change"
    if differences is None:
        return skipped("contract", setting, "no champion: nothing to break")
    if not differences:
        return Gate("contract", True, setting, candidate="compatible", champion=champion_name,
                    message=f"the candidate's interface is compatible with {champion_name}'s")
    listed = "; ".join(differences)
    ack = spec.promote.breaking_change
    if ack:
        return Gate("contract", True, setting, candidate=f"{len(differences)} break(s), acknowledged", champion=champion_name,
                    limit="acknowledged", message=f"the candidate breaks {champion_name}'s interface ({listed}); "
                    f"acknowledged by promote.breaking_change: {ack!r}")
    return Gate(
        "contract", False, setting, candidate=f"{len(differences)} break(s)", champion=champion_name, limit="no breaks",
        message=f"the candidate breaks the interface clients of {champion_name} rely on: {listed}. Keep the interface, "
                f"or acknowledge the break with promote.breaking_change: \"<why>\" in {spec.where} (it is recorded in the manifest)",
    )


def nonfinite_gate(rows_by_output: dict[str, int], total_rows: int) -> Gate:
    if not rows_by_output:
        return Gate("nonfinite", True, "canary.nonfinite (always on)", candidate=0, limit="0 rows",
                    message="every served output is finite")
    listed = ", ".join(f'"{n}" on {k} of {total_rows} rows' for n, k in sorted(rows_by_output.items()))
    return Gate("nonfinite", False, "canary.nonfinite (always on)", candidate=sum(rows_by_output.values()), limit="0 rows",
                message=f"served outputs hold NaN or infinite values: {listed}; a model that answers NaN cannot ship, "
                        "even where the native model answers the same")


# --- quality on ground truth --------------------------------------------------------------------------


def quality_gates(
    spec: ReleaseSpec, task: str, candidate: dict[str, float], champion: dict[str, float] | None, champion_name: str,
    *, paired: Collection[str] = (),
) -> list[Gate]:
    """One gate per quality gate in force for ``task`` (defaults merged with ``canary.quality``).

    ``paired``: metrics whose change limits (max_absolute_drop, max_relative_drop) are decided on
    paired rows (:mod:`.paired_gates`, gate ``quality.<metric>``); here they keep only their other
    limits, if any, as gate ``quality.<metric>.threshold``.
    """
    gates = []
    for metric, gate in spec.canary.quality_gates(task).items():
        setting = f"canary.quality.{metric}"
        if metric in paired:
            if gate.threshold is None and gate.min_absolute_change is None and gate.min_relative_change is None:
                continue
            gate = gate.model_copy(update={"max_absolute_drop": None, "max_relative_drop": None})
            gates.append(_quality_gate(spec, metric, gate, candidate[metric], (champion or {}).get(metric), champion_name,
                                       setting, name=f"quality.{metric}.threshold") if metric in candidate
                         else skipped(f"quality.{metric}.threshold", setting, f"{metric} is not computable for this model"))
            continue
        if metric not in candidate:
            gates.append(skipped(f"quality.{metric}", setting, f"{metric} is not computable for this model "
                                 "(log_loss and roc_auc need class scores; roc_auc a binary classifier)"))
            continue
        gates.append(_quality_gate(spec, metric, gate, candidate[metric], (champion or {}).get(metric), champion_name, setting))
    return gates


def _quality_gate(spec: ReleaseSpec, metric: str, gate: MetricGate, value: float, base: float | None,
                  champion_name: str, setting: str, *, name: str | None = None) -> Gate:
    better = METRICS[metric].greater_is_better
    failures, limits = _mlflow_thresholds(metric, gate, value, base, better)
    if gate.change_gated and base is None:
        if gate.threshold is None:
            return skipped(name or f"quality.{metric}", setting, f"no champion figure to compare {metric} with ({champion_name})")
        limits.append("change gates skipped: no champion")
    elif base is not None:
        drop = (base - value) if better else (value - base)  # > 0: the candidate is worse
        if gate.max_absolute_drop is not None:
            limits.append(f"at most {gate.max_absolute_drop:g} worse than the champion")
            if drop > gate.max_absolute_drop + 1e-12:
                failures.append(f"{_fmt(drop)} worse than the champion's {_fmt(base)}, more than max_absolute_drop {gate.max_absolute_drop:g}")
        if gate.max_relative_drop is not None:
            limits.append(f"at most {gate.max_relative_drop:.2%} worse than the champion")
            relative = drop / abs(base) if base else (math.inf if drop > 0 else 0.0)
            if relative > gate.max_relative_drop + 1e-12:
                failures.append(f"{relative:.2%} worse than the champion's {_fmt(base)}, more than max_relative_drop {gate.max_relative_drop:.2%}")
    limit = "; ".join(limits)
    if failures:
        return Gate(
            name or f"quality.{metric}", False, setting, candidate=value, champion=base, limit=limit,
            message=f"{metric} of the served candidate is {_fmt(value)} on the golden set's ground truth "
                    f"(champion {champion_name}: {_fmt(base) if base is not None else 'none'}): " + "; ".join(failures)
                    + f". Change {setting} in {spec.where} only if that is acceptable",
        )
    return Gate(name or f"quality.{metric}", True, setting, candidate=value, champion=base, limit=limit,
                message=f"{metric} {_fmt(value)} (champion {_fmt(base) if base is not None else 'none'})")


def _mlflow_thresholds(metric: str, gate: MetricGate, value: float, base: float | None, better: bool) -> tuple[list[str], list[str]]:
    """MLflow's MetricThreshold checks (value threshold, minimum improvement): (failures, limits)."""
    from mlflow.models import MetricThreshold
    from mlflow.models.evaluation import EvaluationResult
    from mlflow.models.evaluation.validation import ModelValidationFailedException, validate_evaluation_results

    failures: list[str] = []
    limits: list[str] = []
    checks = {"threshold": gate.threshold}
    if base is not None:
        checks.update(min_absolute_change=gate.min_absolute_change, min_relative_change=gate.min_relative_change)
    for field, limit in checks.items():
        if limit is None:
            continue
        limits.append({"threshold": f"{'>=' if better else '<='} {limit:g}",
                       "min_absolute_change": f"at least {limit:g} better than the champion",
                       "min_relative_change": f"at least {limit:.2%} better than the champion"}[field])
        threshold = MetricThreshold(**{field: float(limit) if field == "min_relative_change" else limit}, greater_is_better=better)
        try:
            validate_evaluation_results({metric: threshold}, EvaluationResult({metric: value}, {}),
                                        EvaluationResult({metric: base}, {}) if base is not None else None)
        except ModelValidationFailedException:
            failures.append(f"MLflow's {field} check failed ({limits[-1]})")
    return failures, limits


# --- agreement with the champion -------------------------------------------------------------------


def agreement_gates(spec: ReleaseSpec, shift: dict[str, Any] | None, champion_name: str, why_not: str) -> list[Gate]:
    """Agreement and PSI of predicted labels against the champion (classifiers)."""
    gates = spec.canary.champion
    if shift is None:
        return [skipped("champion.agreement", "canary.champion.min_agreement", why_not),
                skipped("champion.psi", "canary.champion.max_psi", why_not)]
    agree, psi = shift["agreement"], shift["psi"]
    out = [Gate("champion.agreement", agree >= gates.min_agreement, "canary.champion.min_agreement",
                candidate=agree, champion=1.0, limit=f">= {gates.min_agreement:g}",
                message=f"the candidate's labels agree with {champion_name}'s on {agree:.2%} of the golden rows, "
                        f"below canary.champion.min_agreement {gates.min_agreement:.2%}: it answers like a different model"
                if agree < gates.min_agreement else f"labels agree with the champion on {agree:.2%} of rows"),
           Gate("champion.psi", psi <= gates.max_psi, "canary.champion.max_psi", candidate=psi, champion=0.0,
                limit=f"<= {gates.max_psi:g}",
                message=f"the predicted class distribution shifted from {champion_name}'s: PSI {psi:.4g} > canary.champion.max_psi "
                        f"{gates.max_psi:g} (candidate {shift['candidate_frequencies']}, champion {shift['champion_frequencies']})"
                if psi > gates.max_psi else f"predicted class distribution PSI {psi:.4g}")]
    return out


def ks_gate(spec: ReleaseSpec, shift: dict[str, Any] | None, champion_name: str, why_not: str) -> Gate:
    """The two-sample KS statistic of numeric predictions against the champion (regressors)."""
    if shift is None:
        return skipped("champion.ks", "canary.champion.max_ks", why_not)
    ks, limit = shift["ks"], spec.canary.champion.max_ks
    return Gate("champion.ks", ks <= limit, "canary.champion.max_ks", candidate=ks, champion=0.0, limit=f"<= {limit:g}",
                message=f"the candidate's predictions are distributed unlike {champion_name}'s: KS statistic {ks:.4g} > "
                        f"canary.champion.max_ks {limit:g} (Wasserstein distance {shift['wasserstein']:.4g})"
                if ks > limit else f"prediction distribution KS {ks:.4g}")


# --- latency under load --------------------------------------------------------------------------


def load_gates(spec: ReleaseSpec, candidate: dict[str, Any], champion: dict[str, Any] | None, champion_name: str,
               why_not: str, paired: dict[str, Any] | None = None) -> list[Gate]:
    """Errors, the absolute SLO and the ratios to the champion, from the load phase's figures.

    Each ratio is decided from its interval over the alternating window pairs (``paired``'s
    ``p99_ratios`` and ``throughput_ratios``, see :func:`~..measure.load.paired_ratios`, and
    :func:`.latency_ratio.ratio_gate`): beyond its limit blocks, within it passes, straddling it is
    inconclusive and says what would decide it. The figures named beside them are each side's over
    its settled windows.
    """
    load = spec.canary.load
    gates = [_errors_gate(candidate)]
    p99 = candidate["p99_ms"]
    settled = "" if candidate["stable"] else (f" (not settled: the last {load.stable_windows} windows did not agree "
                                               f"within {load.stability:.0%} before canary.load.budget_s {load.budget_s:g} s ran out)")
    slo = spec.canary.p99_ms
    if slo is None:
        gates.append(skipped("load.slo_p99", "canary.p99_ms", "no absolute SLO set"))
    else:
        gates.append(Gate("load.slo_p99", p99 <= slo, "canary.p99_ms", candidate=p99, limit=f"<= {slo:g} ms",
                          message=f"p99 latency under load {p99:.3f} ms exceeds canary.p99_ms {slo:g} ms at concurrency "
                                  f"{load.concurrency} x {load.batch_rows} rows{settled}" if p99 > slo
                          else f"p99 {p99:.3f} ms within the SLO {slo:g} ms"))
    if champion is None:
        gates.append(skipped("load.p99_ratio", "canary.load.max_p99_ratio", why_not))
        gates.append(skipped("load.throughput_ratio", "canary.load.min_throughput_ratio", why_not))
        return gates
    paired = paired or {}
    how = f"same server, concurrency {load.concurrency} x {load.batch_rows} rows{settled}"
    confidence = spec.canary.confidence
    p99s, tputs = load_ratio_findings(paired, load, confidence)
    gates.append(_ratio_gate(p99s, candidate["p99_ms"], champion["p99_ms"], "ms", ".3f", champion_name, how))
    gates.append(_ratio_gate(tputs, candidate["throughput_rows_per_s"], champion["throughput_rows_per_s"], "rows/s", ".0f",
                             champion_name, how))
    return gates


def _ratio_gate(finding: Finding, mine: float, theirs: float, unit: str, form: str, champion_name: str, how: str) -> Gate:
    """A ratio's finding as the Gate, its figures each side's own (``mine``, ``theirs`` in ``unit``)."""
    figures = f"{mine:{form}} {unit} against {champion_name}'s {theirs:{form}} {unit}"
    if finding.passed:
        message = f"{finding.message}; {figures}"
    else:
        message = f"{'inconclusive: ' if finding.outcome == INCONCLUSIVE else ''}{finding.message}; {figures} ({how})"
    return Gate(finding.name, finding.passed, finding.setting, candidate=mine, champion=theirs, limit=finding.limit,
                message=message, data=finding.data)


def _errors_gate(candidate: dict[str, Any]) -> Gate:
    errors = candidate["errors"]
    if not errors:
        return Gate("load.errors", True, "canary.load", candidate=0, limit="0 errors",
                    message=f"{candidate['requests']} requests under load, no error")
    return Gate("load.errors", False, "canary.load", candidate=errors, limit="0 errors",
                message=f"{errors} request(s) failed under load (the first: {candidate.get('first_error')}); a release that "
                        "fails requests under load cannot ship")


# --- parity, the replay's SLO, the expectation suite --------------------------------------------------

REFERENCE = "the native model"


def parity_gates(parity: ParityReport) -> list[Gate]:
    """One gate per compared output: served against the native model's answers on the golden rows."""
    return [_parity_gate(out) for out in parity.outputs.values()]


def _parity_gate(out: OutputParity) -> Gate:
    name = f"parity.{out.name}"
    if out.kind == "label":
        setting, candidate = "canary.min_label_agreement", out.agreement
        limit = f">= {out.min_agreement:.2%} agree with {REFERENCE}" if out.min_agreement is not None else None
        fine = f"{out.failing_rows} of {out.total_rows} rows differ from {REFERENCE}"
    else:
        setting, candidate = f"canary.tolerances.{out.name}", out.max_abs
        limit = f"atol {_fmt(out.atol)} or rtol {_fmt(out.rtol)}"
        fine = f"{out.failing_elements} of {out.total_elements} elements outside both tolerances"
    return Gate(name, out.passed, setting, candidate=candidate, limit=limit,
                message=fine if out.passed else out.describe(REFERENCE))


def replay_slo_gate(timing: dict[str, Any], limit_ms: float) -> Gate:
    """The absolute p99 SLO judged on the correctness replay (when there is no load phase)."""
    p99 = float(timing.get("p99_ms") if timing.get("p99_ms") is not None else math.nan)
    ok = math.isfinite(p99) and p99 <= limit_ms
    return Gate("replay.slo_p99", ok, "canary.p99_ms", candidate=p99, limit=f"<= {limit_ms:g} ms",
                message="p99 of the correctness replay (no load phase)" if ok else
                f"p99 latency {p99:.3f} ms over {timing.get('requests')} requests of {timing.get('batch_rows')} rows "
                f"at concurrency {timing.get('concurrency')} exceeds canary.p99_ms {limit_ms:g} ms")


def expectations_gate(expectations: dict[str, Any]) -> Gate:
    """The expectation suite over the served outputs (``expectations`` as :func:`~.expect.run_expectations` returns it)."""
    from .expect import failures

    if expectations.get("skipped") or "results" not in expectations:
        return skipped("expectations", "canary.expectations", str(expectations.get("skipped", "not run")))
    results = expectations["results"]
    met = sum(1 for r in results if r["success"])
    failed = failures(expectations)
    return Gate("expectations", not failed, "canary.expectations", candidate=f"{met} of {len(results)} met",
                limit="all met", message="; ".join(failed) or "every expectation on the served outputs is met")
