"""Every gate on one canary's served outputs: the gates, the figures they were decided on, and the evidence.

:func:`judge` fills a :class:`Judgement` as it goes (a rejection midway keeps what was judged
before it) and nothing else: the report copies its sections, and the plots are drawn from its
:class:`Evidence` afterwards (:mod:`..report.plotdata`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...model.metrics import CLASSIFICATION, REGRESSION
from ...model.roles import EMBEDDING, LABEL, VARIABLE
from ...spec import ReleaseSpec
from ...types import AssembleResult
from ..champion import NATIVE, SERVED, Champion
from ..served import Golden, Replays
from . import compare as cmp
from . import gates as gt
from . import quality as q
from .embedding import embedding_gates, figures_of, shift_section
from .contract import breaks, contract_of
from .paired_gates import paired_quality_gates, report_only_likeness, with_thresholds
from .paired_quality import PAIRED_METRICS


@dataclass
class Evidence:
    """The arrays the judged figures came from, which the report's plots draw (each None: not judged)."""

    #: per numeric output: (the native answers, the served ones, atol, rtol)
    parity: dict[str, tuple[np.ndarray, np.ndarray, float | None, float | None]] | None = None
    #: on ground truth, a classifier: (the candidate's reading, the champion's or None, the champion's class names or None)
    classes: tuple[Any, Any, list[str] | None] | None = None
    #: on ground truth, a regressor: (the target, the candidate's predictions, the champion's or None)
    residuals: tuple[np.ndarray, np.ndarray, np.ndarray | None] | None = None
    #: a classifier's labels: (the candidate's, the champion's or None, the class order)
    agreement: tuple[np.ndarray, np.ndarray | None, list[str]] | None = None
    #: a regressor's predictions: (the candidate's, the champion's or None)
    predicted: tuple[np.ndarray, np.ndarray | None] | None = None
    #: an embedding model against the champion: (each row's cosine, (the candidate's norms, the champion's))
    vectors: tuple[np.ndarray, tuple[np.ndarray, np.ndarray]] | None = None


@dataclass
class Judgement:
    """What judging found, section by section as report.json names them, and the gates."""

    parity: dict[str, Any] | None = None
    not_compared: list[str] | None = None
    timing: dict[str, Any] | None = None
    champion_timing: dict[str, Any] | None = None
    expectations: dict[str, Any] | None = None
    quality: dict[str, Any] | None = None
    shift: dict[str, Any] | None = None
    slo: dict[str, Any] | None = None
    gates: list[gt.Gate] = field(default_factory=list)
    evidence: Evidence = field(default_factory=Evidence)
    #: the gates decided on the replay alone and why the champion was not compared: judged once, by
    #: :func:`blocked_on_replay` before the load phase or else by :func:`judge`
    replayed: tuple[list[gt.Gate], str] | None = None

    @property
    def reasons(self) -> list[str]:
        """One sentence per failed gate, naming its spec setting."""
        return [g.reason for g in self.gates if g.failed]

    @property
    def undecided(self) -> list[str]:
        """One sentence per inconclusive gate (checked, not decided), each saying what would decide it."""
        return [g.reason for g in self.gates if g.inconclusive]

    def sections(self) -> dict[str, Any]:
        """The report's sections this judgement fills (the gates as report.json rows)."""
        out = {k: getattr(self, k) for k in ("parity", "not_compared", "timing", "champion_timing", "expectations",
                                              "quality", "shift", "slo")}
        return {**out, "gates": [g.to_dict() for g in self.gates] if self.slo is not None else None}


def judge(spec: ReleaseSpec, assembled: AssembleResult, golden: Golden, replays: Replays, champion: Champion,
          into: Judgement) -> Judgement:
    """Every gate on the served outputs, in report order; fills ``into`` and returns it."""
    interface = cmp.Interface.of(assembled)
    into.timing = timing = replays.candidate.timing()
    into.expectations = _expectations(spec, interface, replays.candidate.outputs)
    if replays.champion is not None:
        into.champion_timing = replays.champion.timing()
    if into.replayed is None:
        into.replayed = _replay_gates(spec, assembled, interface, golden, replays, champion, into)
    gates, why_not = list(into.replayed[0]), into.replayed[1]
    if replays.load is not None:  # the SLO is judged on the load phase; on the replay's burst only when there is none
        gates += gt.load_gates(spec, replays.load["candidate"], replays.load.get("champion"), champion.name,
                               why_not or "the champion was not served beside the candidate", replays.load.get("paired"))
        p99 = replays.load["candidate"]["p99_ms"]
    elif replays.load_skipped is not None:  # blocked on its replay already: nothing was measured under load
        gates += [gt.skipped(name, setting, replays.load_skipped) for name, setting in LOAD_GATES]
        p99 = timing["p99_ms"]
    else:
        p99 = timing["p99_ms"]
        if spec.canary.p99_ms is not None:
            gates.append(gt.replay_slo_gate(timing, spec.canary.p99_ms))
    gates.append(gt.expectations_gate(into.expectations))
    into.gates = gates
    into.slo = {"p99_ms_limit": spec.canary.p99_ms, "p99_ms": p99, "measured_by": "load phase" if replays.load else "replay",
                "passed": spec.canary.p99_ms is None or p99 <= spec.canary.p99_ms}
    return into


#: the load phase's gates (name, setting), as :func:`~.gates.load_gates` decides them
LOAD_GATES = (("load.errors", "canary.load"), ("load.slo_p99", "canary.p99_ms"),
              ("load.p99_ratio", "canary.load.max_p99_ratio"), ("load.throughput_ratio", "canary.load.min_throughput_ratio"))


def _replay_gates(spec: ReleaseSpec, assembled: AssembleResult, interface: cmp.Interface, golden: Golden, replays: Replays,
                  champion: Champion, into: Judgement) -> tuple[list[gt.Gate], str]:
    """The gates decided on the replayed outputs alone (parity, contract, non-finite rows, ground-truth
    quality, likeness to the champion), in report order, and why the champion was not compared if not."""
    served = replays.candidate.outputs
    parity, into.not_compared = cmp.compare_with_reference(
        interface, spec.canary.tolerances, spec.canary.min_label_agreement, golden.reference, served)
    into.parity = parity.to_dict()
    into.evidence.parity = _parity_evidence(spec, interface, golden, served)
    champion_outputs, why_not = _champion_outputs(champion, replays)
    gates = [
        *gt.parity_gates(parity),
        _contract(spec, assembled, champion),
        gt.nonfinite_gate(q.nonfinite_rows(served), golden.rows),
        *_quality(spec, interface, served, golden, champion, champion_outputs, into),
        *_likeness(spec, interface, served, champion, champion_outputs, why_not, into),
    ]
    # with ground truth the negative flips judge what agreement stood in for
    return report_only_likeness(gates), why_not


def blocked_on_replay(spec: ReleaseSpec, assembled: AssembleResult, golden: Golden, replays: Replays,
                      champion: Champion, into: Judgement | None = None) -> list[str]:
    """The gates that already block the release on its replay (failed, decided; an inconclusive one
    blocks nothing), by name: what ``canary.load.when_blocked: skip`` stops the canary for. Judged as
    :func:`judge` judges them, into ``into`` (which :func:`judge` then completes without judging them
    again; the replays do not change in between), or into a scratch judgement."""
    into = into if into is not None else Judgement()
    if into.replayed is None:
        into.replayed = _replay_gates(spec, assembled, cmp.Interface.of(assembled), golden, replays, champion, into)
    return [g.name for g in into.replayed[0] if g.failed]


def _expectations(spec: ReleaseSpec, interface: cmp.Interface, served: dict[str, np.ndarray]) -> dict[str, Any]:
    if not spec.canary.expectations:
        return {"skipped": "canary.expectations is false in the release spec"}
    from .expect import run_expectations

    return run_expectations(dict(served), classifier=interface.names_labels,
                            label_set=interface.label_set() if interface.names_labels else None,
                            engine=spec.canary.expectations_engine)


def _champion_outputs(champion: Champion, replays: Replays) -> tuple[dict[str, np.ndarray] | None, str]:
    """The champion's answers on the golden rows, or why there are none."""
    if champion.kind == SERVED:
        if replays.champion is None:
            return None, f"the champion {champion.name} was not replayed: {replays.champion_skipped}"
        return replays.champion.outputs, ""
    if champion.kind == NATIVE and champion.outputs is not None:
        return champion.outputs, ""
    return None, champion.reason or "no champion"


def _contract(spec: ReleaseSpec, assembled: AssembleResult, champion: Champion) -> gt.Gate:
    if champion.contract is None:
        return gt.contract_gate(spec, None, champion.name)
    mine = contract_of(assembled.repository_dir, assembled.entry_model, assembled.labels if LABEL in assembled.roles else None)
    if champion.kind == NATIVE:  # a native champion's contract is its signature: compare inputs and classes
        mine = type(mine)(entry=mine.entry, inputs=mine.inputs, outputs={}, max_batch_size=None,
                          labels=[str(c) for c in assembled.classes] if assembled.classes is not None else None)
    found = breaks(champion.contract, mine, outputs=champion.kind == SERVED)
    return gt.contract_gate(spec, found, champion.name)


def _quality(spec: ReleaseSpec, interface: cmp.Interface, served: dict[str, np.ndarray], golden: Golden,
             champion: Champion, champion_outputs: dict[str, np.ndarray] | None, into: Judgement) -> list[gt.Gate]:
    task = q.task_of(interface)
    if task == q.EMBEDDING_TASK:
        why = "an embedding model is judged by its vectors against the champion's (canary.embedding), not on ground truth"
        into.quality = {"skipped": why, "task": task}
        return [gt.skipped("quality", "repository.shape", why)]
    if golden.truth is None or task is None:
        why = ("no ground truth: golden.target is not set" if golden.truth is None
               else "no output plays the role of a label, class scores or a prediction")
        into.quality = {"skipped": why}
        return [gt.skipped("quality", "golden.target", why)]
    mine = q.served_metrics(interface, served, golden.truth, "the candidate")
    theirs = None
    native_names = champion.kind == NATIVE and champion.interface.classes == interface.classes
    if champion_outputs is not None and q.task_of(champion.interface) == task:
        names = interface.labels if native_names else None
        theirs = q.served_metrics(champion.interface, champion_outputs, golden.truth, f"the champion {champion.name}", target_names=names)
    _truth_evidence(interface, served, golden, champion, champion_outputs if theirs is not None else None, native_names, into.evidence)
    into.quality = {"task": task, "target": spec.golden.target, "rows": golden.rows, "candidate": mine, "champion": theirs,
                    "champion_name": champion.name if theirs is not None else None}
    paired, into.quality["paired"] = paired_quality_gates(
        spec.canary, task, interface, served, golden.truth, champion.interface if theirs is not None else None,
        champion_outputs if theirs is not None else None, champion_name=champion.name or "none", native_names=native_names,
        slices=golden.slices)
    return with_thresholds(gt.quality_gates(spec, task, mine, theirs, champion.name or "none",
                                            paired=PAIRED_METRICS if theirs else ()), paired)


def _truth_evidence(interface: cmp.Interface, served: dict[str, np.ndarray], golden: Golden, champion: Champion,
                    champion_outputs: dict[str, np.ndarray] | None, native_names: bool, evidence: Evidence) -> None:
    """What the plots on ground truth draw: both models' reading of each class, or a regressor's predictions."""
    if q.task_of(interface) == REGRESSION:
        theirs = champion_outputs[champion.interface.roles[VARIABLE]] if champion_outputs is not None else None
        evidence.residuals = (golden.truth, served[interface.roles[VARIABLE]], theirs)
        return
    names = interface.class_names() if native_names and champion.kind == NATIVE else None
    theirs = (q.classify(champion.interface, champion_outputs, golden.truth, "the champion", target_names=interface.labels if names else None)
              if champion_outputs is not None else None)
    evidence.classes = (q.classify(interface, served, golden.truth, "the candidate"), theirs, names)


def _parity_evidence(spec: ReleaseSpec, interface: cmp.Interface, golden: Golden, served: dict[str, np.ndarray]) -> dict[str, Any]:
    """Per numeric output, the native and the served answers (labels are compared by agreement: none)."""
    expected, answered, labels, _ = cmp.comparable(interface, spec.canary.min_label_agreement, golden.reference, served)
    return {name: (expected[name], answered[name], spec.canary.tolerances.for_output(name).atol,
                   spec.canary.tolerances.for_output(name).rtol) for name in expected if name not in labels}


def _likeness(spec: ReleaseSpec, interface: cmp.Interface, served: dict[str, np.ndarray], champion: Champion,
              champion_outputs: dict[str, np.ndarray] | None, why_not: str, into: Judgement) -> list[gt.Gate]:
    """Agreement and distribution shift against the champion (no ground truth needed)."""
    task = q.task_of(interface)
    shift = None
    if task == CLASSIFICATION:
        if champion_outputs is not None and LABEL in champion.interface.roles and LABEL in interface.roles:
            mine, theirs = served[interface.roles[LABEL]], champion_outputs[champion.interface.roles[LABEL]]
            if champion.kind == NATIVE:  # compare class values: a native champion has no label names
                mine = q.class_values(interface, mine)
            shift = q.label_shift(mine, theirs)
            into.evidence.agreement = (mine, theirs, _class_order(interface, native=champion.kind == NATIVE))
        elif LABEL in interface.roles:
            into.evidence.agreement = (served[interface.roles[LABEL]], None, _class_order(interface))
        into.shift = shift or {"skipped": why_not}
        return gt.agreement_gates(spec, shift, champion.name, why_not)
    if task == REGRESSION:
        if champion_outputs is not None and VARIABLE in champion.interface.roles:
            shift = q.numeric_shift(served[interface.roles[VARIABLE]], champion_outputs[champion.interface.roles[VARIABLE]])
        into.evidence.predicted = (served[interface.roles[VARIABLE]],
                                   champion_outputs[champion.interface.roles[VARIABLE]] if shift else None)
        into.shift = shift or {"skipped": why_not}
        return [gt.ks_gate(spec, shift, champion.name, why_not)]
    if task == q.EMBEDDING_TASK:
        return _vectors(spec, interface, served, champion, champion_outputs, why_not, into)
    into.shift = {"skipped": "no output plays the role of a label or a prediction"}
    return []


def _vectors(spec: ReleaseSpec, interface: cmp.Interface, served: dict[str, np.ndarray], champion: Champion,
             champion_outputs: dict[str, np.ndarray] | None, why_not: str, into: Judgement) -> list[gt.Gate]:
    """An embedding model's vectors against the champion's (:mod:`.embedding`)."""
    figures = None
    if champion_outputs is not None and EMBEDDING in champion.interface.roles:
        figures = figures_of(served[interface.roles[EMBEDDING]], champion_outputs[champion.interface.roles[EMBEDDING]])
    elif champion_outputs is not None:
        why_not = f"the champion {champion.name} serves no vectors (its outputs play {sorted(champion.interface.roles)})"
    if figures is not None and figures["dims"] is not None:
        into.evidence.vectors = (figures["cosine"], figures["norms"])
        into.shift = {"task": q.EMBEDDING_TASK, **shift_section(figures), "reindex": spec.canary.embedding.reindex}
    else:
        into.shift = {"skipped": figures["why"] if figures else why_not, "task": q.EMBEDDING_TASK}
    return embedding_gates(spec, figures, champion.name or "the champion", why_not)


def _class_order(interface: cmp.Interface, *, native: bool = False) -> list[str]:
    """The candidate's classes as its label output answers them (class values when compared with a native champion)."""
    if native or not interface.names_labels:
        return [str(c) for c in interface.classes] if interface.classes is not None else []
    return list(interface.labels or [])
