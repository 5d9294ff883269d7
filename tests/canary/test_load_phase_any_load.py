"""Load-phase verdicts that no machine's load can change, so they run in ``make test``'s parallel part.

One window pair can never decide a ratio, and no server answers within 0.05 ms at p99: a busy
machine only makes both outcomes surer. The verdicts that do depend on a quiet machine (a ratio
against a served champion, tuning) stay in :mod:`.test_load_phase`, which runs alone.
"""

from __future__ import annotations

import pytest

from model_release.errors import CanaryInconclusive, CanaryRejected

from .support import make_release, served_champion
from .test_load_phase import LOAD, _gates, _report, _run

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_load_phase_too_short_to_decide_ends_inconclusive_with_its_report_exit_code_and_open_error(
        tmp_path, iris, iris_repository) -> None:
    """One window pair has no spread to trust: the ratio gates cannot decide, no gate fails, so the canary
    is inconclusive: report written (verdict inconclusive, what would decide it), exit code 5, the error
    recorded as inconclusive (not a user error: the ledger keeps the version open), nothing rejected."""
    from model_release.cli import main as cli
    from model_release.store import ledger
    from model_release.types import CanaryResult

    onnx_path, golden, reference = iris
    one_pair = {**LOAD, "budget_s": 0.1}  # the first round (a candidate window, a champion window) spends it
    release = make_release(tmp_path, iris_repository, onnx_path, golden, reference, canary={"load": one_pair})
    with pytest.raises(CanaryInconclusive) as caught:
        _run(release, served_champion(iris_repository, tmp_path))
    assert caught.value.exit_code == 5 and not isinstance(caught.value, CanaryRejected)
    message = str(caught.value)
    assert "is inconclusive: no gate failed, but inconclusive: p99 latency under load: 1 window pair(s) measured" in message
    assert "Nothing is promoted and nothing rejected" in message
    report = _report(release)
    assert report["verdict"] == "inconclusive" and report["passed"] is False
    gates = _gates(report)
    assert gates["load.p99_ratio"]["outcome"] == gates["load.throughput_ratio"]["outcome"] == "inconclusive"
    assert not [g for g in report["gates"] if g["outcome"] == "failed"]
    assert any("give canary.load.budget_s room for more windows" in r for r in report["reasons"])
    html = (release.workspace.stage_dir("canary") / "report.html").read_text()
    assert "INCONCLUSIVE" in html and "What would decide it" in html and "? inconclusive" in html
    assert cli(["report", str(release.workspace.stage_dir("canary") / "report.json")]) == 5
    error = release.workspace.load_error("canary")
    assert error["inconclusive"] is True and error["user"] is False and error["kind"] == "canary_inconclusive"
    assert ledger.verdict_of({"canary": error}, False)[0] == ledger.INCONCLUSIVE
    saved = release.workspace.load_result("canary", CanaryResult)
    assert saved.verdict == "inconclusive" and not saved.passed


def test_an_slo_breach_is_blocked(tmp_path, iris, iris_repository) -> None:
    onnx_path, golden, reference = iris
    release = make_release(tmp_path, iris_repository, onnx_path, golden, reference, canary={"load": LOAD, "p99_ms": 0.05})
    with pytest.raises(CanaryRejected) as caught:
        _run(release)
    p99 = _report(release)["load_phase"]["candidate"]["p99_ms"]
    assert f"p99 latency under load {p99:.3f} ms exceeds canary.p99_ms 0.05 ms at concurrency 4 x 16 rows" in str(caught.value)
    gates = _gates(_report(release))
    assert gates["load.p99_ratio"]["passed"] is None  # no champion: the ratios are skipped, saying why
