"""An inconclusive canary as every reader of its report shows it: the decision, the terminal, the page,
the figures the manifest and a rejection record keep. Inconclusive is its own status, not a skip."""

from __future__ import annotations

from model_release.canary.judge.gates import Gate, skipped
from model_release.canary.judge.outcome import gate_status
from model_release.canary.report.decision import FAILED, INCONCLUSIVE, PASSED, SKIPPED, decision, terminal
from model_release.canary.report.document import CanaryReport
from model_release.canary.report.page import render_html
from model_release.store.rejected import figures_of

WHY = ("inconclusive: p99 latency under load is 1.24 x the champion's (1.18 to 1.3 with 95% confidence each way, "
       "6 window pairs): the interval straddles canary.load.max_p99_ratio 1.25, so the canary cannot tell; about 40 "
       "window pairs at this spread would decide it (canary.load.budget_s), or measure on a quieter canary")
P99 = Gate("load.p99_ratio", None, "canary.load.max_p99_ratio", candidate=12.4, champion=10.0,
           limit="at most 1.25 x the champion's", message=WHY, data={"pairs": 6, "pairs_needed": 40})
GATES = [Gate("parity.label", True, "canary.min_label_agreement", candidate=1.0, limit=">= 100.00%", message="0 of 150 rows differ"),
         skipped("load.slo_p99", "canary.p99_ms", "no absolute SLO set"), P99]
REPORT = {
    "release_id": "iris-3", "release": "iris", "model": {"name": "iris-classifier", "version": "3"},
    "champion": {"kind": "served", "name": "release iris-2", "release_id": "iris-2"},
    "gates": [g.to_dict() for g in GATES], "passed": False, "verdict": "inconclusive",
    "reasons": [P99.reason],
}


def test_a_gate_that_could_not_decide_is_inconclusive_not_skipped() -> None:
    assert [g.outcome for g in GATES] == [PASSED, SKIPPED, INCONCLUSIVE]
    row = P99.to_dict()
    assert row["outcome"] == "inconclusive" and row["passed"] is None and row["data"] == {"pairs": 6, "pairs_needed": 40}
    assert "data" not in GATES[0].to_dict()  # only a statistical gate carries its figures
    # a report written before rows said their outcome reads the same
    assert gate_status({"passed": None, "skipped": None}) == INCONCLUSIVE
    assert gate_status({"passed": None, "skipped": "no champion"}) == SKIPPED
    assert gate_status({"passed": False}) == FAILED


def test_the_decision_and_the_terminal_say_inconclusive_and_what_would_decide_it() -> None:
    d = decision(REPORT)
    assert not d.passed and d.verdict == "inconclusive" and d.inconclusive
    assert [line.status for line in d.lines] == [INCONCLUSIVE, PASSED, SKIPPED]
    assert d.counts[INCONCLUSIVE] == 1 and d.counts[FAILED] == 0
    plain = terminal(REPORT)
    lines = plain.splitlines()
    assert lines[0].startswith("INCONCLUSIVE  iris (iris-3): not decided: 1 gate(s) inconclusive, none failed")
    assert any(line.startswith("? load.p99_ratio") and "12.4 ms" in line for line in lines)
    assert "what would decide it:" in plain and "about 40 window pairs" in plain and "why it was rejected" not in plain
    assert "\033[33mINCONCLUSIVE" in terminal(REPORT, colour=True)


def test_a_failed_gate_beside_an_inconclusive_one_reads_rejected() -> None:
    failed = Gate("load.errors", False, "canary.load", candidate=3, limit="0 errors", message="3 request(s) failed")
    report = {**REPORT, "gates": [*REPORT["gates"], failed.to_dict()], "verdict": "rejected", "reasons": [failed.reason]}
    d = decision(report)
    assert d.verdict == "rejected" and [line.status for line in d.lines][:2] == [FAILED, INCONCLUSIVE]


def test_the_page_opens_on_the_inconclusive_decision() -> None:
    page = render_html(REPORT)
    head = page[: page.index("<h2>")]
    assert "INCONCLUSIVE" in head and "Not decided: 1 gate(s) could not decide and none failed" in head
    assert "What would decide it" in head and "about 40 window pairs" in head and "Why it was rejected" not in head
    assert "<span class='mark inconclusive'>? inconclusive</span>" in head and "REJECTED" not in head


def test_the_figures_kept_of_a_report_name_the_inconclusive_gate() -> None:
    report = CanaryReport(release_id="iris-3", release="iris", model={}, entry_model="iris", source_repository="",
                          started_at="t", gates=REPORT["gates"])
    report.close(False, [P99.reason], "t", 1.0, inconclusive=True)
    assert report.verdict == "inconclusive" and report.passed is False
    assert report.summary().startswith("canary inconclusive: inconclusive: p99 latency under load is 1.24")
    assert report.figures()["gates"] == {"parity.label": "passed", "load.slo_p99": "skipped", "load.p99_ratio": "inconclusive"}
    assert figures_of(REPORT)["gates"]["load.p99_ratio"] == "inconclusive"
    report.close(False, ["x"], "t", 1.0)
    assert report.verdict == "rejected"
