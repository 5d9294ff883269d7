"""The agreement corpus without a server: the linter's verdicts match the corpus's labels, and every
rule Triton refuses on is exercised by a case Triton refuses (the labels themselves are checked
against the real Triton in test_lint_vs_triton)."""

from __future__ import annotations

import pytest

from model_release.repository.lint.rulebook import REFUSES, RULES

from .agreement import lint_verdict
from .agreement_cases import CASES, LOADS, REFUSED, UNDECIDED
from .lint_repos import write_valid_repository


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory) -> dict[str, tuple[str, tuple[str, ...]]]:
    out = {}
    for index, case in enumerate(CASES):
        repo = write_valid_repository(tmp_path_factory.mktemp(f"case{index}") / "models")
        case.mutate(repo)
        out[case.id] = lint_verdict(repo, case.model)
    return out


def test_case_ids_are_unique():
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("group, expected", [(LOADS, "loads"), (REFUSED, "refuses"), (UNDECIDED, "undecided")],
                         ids=["loads", "refuses", "undecided"])
def test_lint_verdicts_match_the_labels(verdicts, group, expected):
    wrong = {c.id: verdicts[c.id] for c in group if verdicts[c.id][0] != expected}
    assert not wrong


def test_every_rule_triton_refuses_on_has_a_refused_case(verdicts):
    seen = {rule for case in REFUSED for rule in verdicts[case.id][1]}
    missing = sorted(r for r, rule in RULES.items() if rule.triton == REFUSES and r not in seen)
    assert not missing
