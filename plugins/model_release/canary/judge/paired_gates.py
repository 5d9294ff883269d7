"""The paired gates as the canary's Gates: what the judge calls when the golden set has ground truth.

:func:`paired_quality_gates` reads both models' served answers against the ground truth (each by
its own interface), runs :mod:`.paired_quality` with the spec's limits and returns the Gates and
the report's ``quality.paired`` section (flips, the per-class table, the reliability diagrams).
The paired metrics' change limits (``max_absolute_drop``, ``max_relative_drop`` of
:data:`~.paired_quality.PAIRED_METRICS`) are then decided here, not by the point-estimate quality
gate (:func:`~.gates.quality_gates` is told which). With ground truth, the negative-flip gate
replaces raw agreement and PSI, which :func:`report_only_likeness` keeps in the report ungated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...metrics import CLASSIFICATION, REGRESSION
from ...roles import VARIABLE
from ...spec import CanarySpec
from . import quality as q
from .compare import Interface
from .gates import Gate, skipped
from .outcome import INCONCLUSIVE, Finding, finite
from .paired_quality import classifier_findings, limits_from_spec, regressor_findings

#: the likeness gates that ground truth replaces with the negative-flip gate
LIKENESS_GATES = ("champion.agreement", "champion.psi")
FLIPS_GATE = "flips.negative"


def finding_gate(finding: Finding) -> Gate:
    """A paired finding as a Gate (inconclusive: ``passed`` None, and its message says so)."""
    message = f"inconclusive: {finding.message}" if finding.outcome == INCONCLUSIVE else finding.message
    return Gate(finding.name, finding.passed, finding.setting, candidate=finding.candidate, champion=finding.champion,
                limit=finding.limit, message=message)


def paired_quality_gates(canary: CanarySpec, task: str, interface: Interface, served: Mapping[str, np.ndarray],
                         truth: np.ndarray, champion_interface: Interface | None,
                         champion_outputs: Mapping[str, np.ndarray] | None, *, champion_name: str,
                         native_names: bool = False) -> tuple[list[Gate], dict[str, Any]]:
    """The paired gates of the candidate against the champion on the golden rows' ground truth.

    Args:
        canary: the spec's canary section (its quality gates give the limits).
        task: ``classification`` or ``regression``.
        interface, served: how to read the candidate's outputs, and the outputs.
        truth: the ground truth of each golden row.
        champion_interface, champion_outputs: the champion's (None: no champion, only its own calibration).
        champion_name: how the champion is named.
        native_names: the champion is the native model, answering class values where the candidate answers names.

    Returns:
        (the gates, the report's ``quality.paired`` section).
    """
    limits = limits_from_spec(canary, task)
    if task == CLASSIFICATION:
        rename = interface.class_names() if native_names else None
        mine = q.classify(interface, served, truth, "the candidate")
        theirs = (q.classify(champion_interface, champion_outputs, truth, f"the champion {champion_name}",
                             target_names=interface.labels if rename else None)
                  if champion_outputs is not None and champion_interface is not None else None)
        findings, sections = classifier_findings(mine, theirs, limits, champion_name=champion_name, rename=rename)
    elif task == REGRESSION and champion_outputs is not None and champion_interface is not None:
        findings = regressor_findings(truth, served[interface.roles[VARIABLE]],
                                      champion_outputs[champion_interface.roles[VARIABLE]], limits, champion_name=champion_name)
        sections = {}
    else:
        return [], {}
    sections["findings"] = [f.to_dict() for f in findings]
    return [finding_gate(f) for f in findings], finite(sections)


def report_only_likeness(gates: list[Gate]) -> list[Gate]:
    """``gates`` with agreement and PSI reported, not gated, where the negative-flip gate judged the same rows."""
    if not any(g.name == FLIPS_GATE for g in gates):
        return gates
    out = []
    for g in gates:
        if g.name in LIKENESS_GATES and g.skipped is None:
            figure = f"{g.candidate:.2%}" if g.name == "champion.agreement" else f"{g.candidate:.4g}"
            reported = skipped(g.name, g.setting, f"reported, not gated ({figure}): with ground truth, {FLIPS_GATE} and "
                                                  "the per-class gates judge the rows where the two models differ")
            reported.candidate, reported.champion = g.candidate, g.champion
            g = reported
        out.append(g)
    return out
