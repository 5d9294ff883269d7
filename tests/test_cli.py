"""The command line: one entry point, clear exit codes, errors on one line."""

from __future__ import annotations

import json

import pytest

from model_release.cli import main


def test_help_lists_every_command(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("release", "lint", "report", "store", "rollback", "demo"):
        assert f"model-release {command}" in out


def test_unknown_command_is_refused(capsys) -> None:
    assert main(["relase"]) == 2
    assert "unknown command 'relase'" in capsys.readouterr().err


def test_release_with_a_bad_spec_exits_2_with_one_line(tmp_path, capsys) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("name: x\nmodel: {name: m}\n")
    assert main(["release", str(spec)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model.alias" in err[0] and str(spec) in err[0]


def test_report_exit_code_follows_the_verdict(tmp_path, capsys) -> None:
    passed = tmp_path / "ok"
    passed.mkdir()
    (passed / "report.json").write_text(json.dumps({"passed": True, "verdict": "passed"}))
    blocked = tmp_path / "blocked.json"
    blocked.write_text(json.dumps({"passed": False, "verdict": "blocked"}))
    assert main(["report", str(passed)]) == 0
    assert main(["report", str(blocked)]) == 3
    assert main(["report", str(tmp_path / "missing.json")]) == 2


@pytest.mark.parametrize(("report", "code"), [
    ({"verdict": "passed"}, 0),        # the canary writes "passed"; the CLI once compared with "pass"
    ({"verdict": "rejected"}, 3),
    ({"verdict": "pass"}, 3),          # not a verdict the canary writes
    ({"passed": False, "verdict": "passed"}, 3),  # the flag wins over the word
    ({"passed": False, "verdict": "inconclusive"}, 5),  # not decided: neither shipped nor rejected
    ({"verdict": "inconclusive"}, 5),
    ({"passed": True, "verdict": "inconclusive"}, 0),   # the flag wins here too
])
def test_report_reads_the_verdict_the_canary_writes(tmp_path, capsys, report, code) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    assert main(["report", str(path)]) == code


@pytest.mark.integration
def test_store_history_of_an_empty_local_store(tmp_path, capsys) -> None:
    code = main(["store", "history", "--store", f"file://{tmp_path}", "--channel", "production"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert json.loads(out.out) == []
