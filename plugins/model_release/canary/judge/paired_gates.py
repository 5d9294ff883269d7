"""The paired gates as the canary's Gates: what the judge calls when the golden set has ground truth.

:func:`paired_quality_gates` reads both models' served answers against the ground truth (each by
its own interface), runs :mod:`.paired_quality` with the spec's limits and returns the Gates and
the report's ``quality.paired`` section (flips, the per-class table, the reliability diagrams). The
per-class findings are one gate, ``classes``, whose message names each class that blocks.
The paired metrics' change limits (``max_absolute_drop``, ``max_relative_drop`` of
:data:`~.paired_quality.PAIRED_METRICS`) are then decided here, not by the point-estimate quality
gate (:func:`~.gates.quality_gates` is told which). With ground truth, the negative-flip gate
replaces raw agreement and PSI, which :func:`report_only_likeness` keeps in the report ungated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...model.metrics import CLASSIFICATION, REGRESSION
from ...model.roles import VARIABLE
from ...spec import CanarySpec
from ...spec.paired import CLASSES_SETTING, SLICES_SETTING
from . import quality as q
from .compare import Interface
from .gates import Gate, skipped
from .outcome import BLOCK, INCONCLUSIVE, Finding, finite
from .paired_quality import classifier_findings, limits_from_spec, regressor_findings

#: the likeness gates that ground truth replaces with the negative-flip gate
LIKENESS_GATES = ("champion.agreement", "champion.psi")
FLIPS_GATE = "flips.negative"
#: the per-class findings' name prefix (the one gate that carries them is set by ``canary.classes``)
CLASS_PREFIX = "class."


def finding_gate(finding: Finding) -> Gate:
    """A paired finding as a Gate (inconclusive: ``passed`` None, and its message says so)."""
    message = f"inconclusive: {finding.message}" if finding.outcome == INCONCLUSIVE else finding.message
    return Gate(finding.name, finding.passed, finding.setting, candidate=finding.candidate, champion=finding.champion,
                limit=finding.limit, message=message)


def paired_quality_gates(canary: CanarySpec, task: str, interface: Interface, served: Mapping[str, np.ndarray],
                         truth: np.ndarray, champion_interface: Interface | None,
                         champion_outputs: Mapping[str, np.ndarray] | None, *, champion_name: str,
                         native_names: bool = False,
                         slices: Mapping[str, np.ndarray] | None = None) -> tuple[list[Gate], dict[str, Any]]:
    """The paired gates of the candidate against the champion on the golden rows' ground truth.

    Args:
        canary: the spec's canary section (its quality gates give the limits).
        task: ``classification`` or ``regression``.
        interface, served: how to read the candidate's outputs, and the outputs.
        truth: the ground truth of each golden row.
        champion_interface, champion_outputs: the champion's (None: no champion, only its own calibration).
        champion_name: how the champion is named.
        native_names: the champion is the native model, answering class values where the candidate answers names.
        slices: ``golden.slices`` column -> its value on each golden row (a classifier's accuracy and flips
            gates run again on each slice; one gate, ``slices``, carries them).

    Returns:
        (the gates, the report's ``quality.paired`` section).
    """
    limits = limits_from_spec(canary, task)
    unsliced = _unsliced(slices, task, champion_outputs is not None and champion_interface is not None)
    if task == CLASSIFICATION:
        rename = interface.class_names() if native_names else None
        mine = q.classify(interface, served, truth, "the candidate")
        theirs = (q.classify(champion_interface, champion_outputs, truth, f"the champion {champion_name}",
                             target_names=interface.labels if rename else None)
                  if champion_outputs is not None and champion_interface is not None else None)
        # the champion is named once, in the report's header: the sentences name its figures
        findings, sections = classifier_findings(mine, theirs, limits, rename=rename, slices=slices)
    elif task == REGRESSION and champion_outputs is not None and champion_interface is not None:
        findings = regressor_findings(truth, served[interface.roles[VARIABLE]],
                                      champion_outputs[champion_interface.roles[VARIABLE]], limits)
        sections = {}
    else:
        return unsliced, {}
    sections["findings"] = [f.to_dict() for f in findings]
    per_class = [f for f in findings if f.name.startswith(CLASS_PREFIX)]
    per_slice = [f for f in findings if _sliced(f, slices or {})]
    gates = [finding_gate(f) for f in findings if not f.name.startswith(CLASS_PREFIX) and not _sliced(f, slices or {})]
    return (gates + ([classes_gate(per_class)] if per_class else []) + ([slices_gate(per_slice)] if per_slice else [])
            + unsliced, finite(sections))


def _unsliced(slices: Mapping[str, np.ndarray] | None, task: str, champion: bool) -> list[Gate]:
    """The ``slices`` gate skipped, saying why, where the spec names slices these gates cannot judge."""
    if not slices:
        return []
    if task != CLASSIFICATION:
        return [skipped("slices", SLICES_SETTING, f"golden.slices gate a classifier's accuracy and negative flips per "
                                                  f"slice; this model's task is {task}")]
    if not champion:
        return [skipped("slices", SLICES_SETTING, "no champion to compare each slice with")]
    return []


def _sliced(finding: Finding, slices: Mapping[str, np.ndarray]) -> bool:
    """Whether ``finding`` is one slice's (named ``<gate>[column=value]``)."""
    return any(f"[{column}=" in finding.name for column in slices)


def classes_gate(findings: list[Finding]) -> Gate:
    """The per-class findings as one gate (the report's per-class table holds each): blocked by any class that is."""
    return _group_gate("classes", CLASSES_SETTING, "class", findings,
                       "every class within its limits ({n} gates, recall and precision against the champion)")


def slices_gate(findings: list[Finding]) -> Gate:
    """The per-slice findings as one gate (the report's slice tables hold each): blocked by any slice that is."""
    return _group_gate("slices", SLICES_SETTING, "slice", findings,
                       "every slice within its limits ({n} gates, accuracy and negative flips against the champion)")


def _group_gate(name: str, setting: str, what: str, findings: list[Finding], all_passed: str) -> Gate:
    """Findings of one table as one gate: blocked by any that blocks, else inconclusive by any that is."""
    blocked = [f for f in findings if f.outcome == BLOCK]
    open_ = [f for f in findings if f.outcome == INCONCLUSIVE]
    figure = f"{len(blocked)} of {len(findings)} {what} gates blocked"
    limits = "; ".join(sorted({f"{f.name.split('[')[0].removeprefix(CLASS_PREFIX)} {f.limit}" for f in findings}))
    if blocked:
        return Gate(name, False, setting, candidate=figure, limit=limits, message="; ".join(f.message for f in blocked))
    if open_:
        return Gate(name, None, setting, candidate=f"{len(open_)} inconclusive", limit=limits,
                    message="inconclusive: " + "; ".join(f.message for f in open_))
    return Gate(name, True, setting, candidate=figure, limit=limits, message=all_passed.format(n=len(findings)))


def report_only_likeness(gates: list[Gate]) -> list[Gate]:
    """``gates`` without agreement and PSI where the negative-flip gate judged the same rows.

    Their figures stay in the report (``shift``, the agreement card and plot); with ground truth
    they no longer decide, so they take no line of the verdict.
    """
    if not any(g.name == FLIPS_GATE for g in gates):
        return gates
    return [g for g in gates if g.name not in LIKENESS_GATES]


def with_thresholds(point: list[Gate], paired: list[Gate]) -> list[Gate]:
    """The point gates and the paired ones, a metric's value threshold (``quality.<m>.threshold``) folded into its paired gate.

    One line per metric: it fails when either check fails, and says which.
    """
    by_name = {g.name: g for g in paired}
    out = []
    for g in point:
        mine = by_name.get(g.name.removesuffix(".threshold")) if g.name.endswith(".threshold") else None
        if mine is None or g.skipped is not None:
            out.append(g)
            continue
        failed = [x for x in (g, mine) if x.failed]
        mine.passed = False if failed else (None if mine.passed is None else True)
        mine.limit = f"{g.limit}; {mine.limit}"
        mine.message = "; ".join(x.message for x in failed) if failed else f"{mine.message}; {g.message}"
    return out + paired
