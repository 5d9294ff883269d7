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
    (passed / "report.json").write_text(json.dumps(_report(passed=True, verdict="passed")))
    blocked = tmp_path / "blocked.json"
    blocked.write_text(json.dumps(_report(passed=False, verdict="blocked")))
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
    path.write_text(json.dumps(_report(**report)))
    assert main(["report", str(path)]) == code


def _report(**fields) -> dict:
    """The smallest document the canary writes: its release, its gates (one passed), and ``fields``."""
    gate = {"name": "parity.label", "passed": True, "outcome": "passed", "skipped": None, "message": "100 of 100 agree"}
    return {"release_id": "iris-1", "gates": [gate], **fields}


@pytest.mark.parametrize(("report", "says"), [
    ({"passed": True}, "is not a canary report: it has no 'release_id' and no 'gates'"),
    ({"passed": True, "verdict": "passed", "release_id": "iris-1"}, "it has no 'gates'"),
    ({"passed": False, "release_id": "iris-1", "gates": "x"}, "it has no 'gates'"),
    (_report(passed=True, verdict="passed", gates=[{"name": "quality.accuracy", "passed": False, "skipped": None}]),
     "says it passed, but its gates quality.accuracy failed"),
])
def test_report_refuses_what_the_canary_never_writes(tmp_path, capsys, report, says) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert says in err and "PASSED" not in err


@pytest.mark.integration
def test_store_history_of_an_empty_local_store(tmp_path, capsys) -> None:
    code = main(["store", "history", "--store", f"file://{tmp_path}", "--channel", "production"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert json.loads(out.out) == []


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_prints_the_installed_version(capsys, flag) -> None:
    from importlib.metadata import version

    assert main([flag]) == 0
    assert capsys.readouterr().out.strip() == f"model-release {version('model-release')}"
