"""Hostile input to ``model-release lint``: each gives a finding or one line, never a traceback, never file content."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from model_release.repository.lint.findings import MAX_MESSAGE
from model_release.repository.lint import lint_repository
from model_release.repository.lint.cli import main

from .lint_repos import write_valid_repository


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return write_valid_repository(tmp_path / "models")


def _cli(repo: Path, capsys, *extra: str) -> tuple[int, str]:
    code = main([str(repo), *extra])
    out = capsys.readouterr()
    return code, out.out + out.err


def _only(report, model: str) -> set[tuple[str, str]]:
    return {(f.rule, f.severity) for f in report.findings if f.model == model}


@pytest.mark.parametrize("target", ["secret", "/etc/passwd"])
def test_a_symlinked_config_is_refused_and_never_read(repo, tmp_path, capsys, target):
    if target == "secret":
        secret = tmp_path / "secret.txt"
        secret.write_text("SECRET_TOKEN_4711: x\n")
        token = "SECRET_TOKEN_4711"
    else:
        secret = Path(target)
        if not secret.is_file():
            pytest.skip("no /etc/passwd here")
        token = secret.read_text().split(":", 1)[0]
    config = repo / "add_sub" / "config.pbtxt"
    config.unlink()
    config.symlink_to(secret)
    report = lint_repository(repo)
    assert _only(report, "add_sub") == {("file-symlink", "error")}
    assert not report.ok
    code, output = _cli(repo, capsys)
    assert code == 1 and "[file-symlink]" in output
    assert f'"{token}"' not in output and f"{token}:" not in output and "Traceback" not in output


def test_symlinked_model_py_and_model_folder_are_refused(repo, tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text((repo / "preprocess" / "1" / "model.py").read_text())
    (repo / "preprocess" / "1" / "model.py").unlink()
    (repo / "preprocess" / "1" / "model.py").symlink_to(outside)
    (repo / "linked").symlink_to(repo / "add_sub")
    report = lint_repository(repo)
    assert ("file-symlink", "error") in _only(report, "preprocess")
    assert _only(report, "linked") == {("file-symlink", "error")}


def test_a_config_that_is_a_folder_is_an_error(repo, capsys):
    config = repo / "add_sub" / "config.pbtxt"
    config.unlink()
    config.mkdir()
    report = lint_repository(repo)
    assert _only(report, "add_sub") == {("config-not-a-file", "error")}
    assert _cli(repo, capsys)[0] == 1


def test_a_fifo_config_does_not_block(repo):
    config = repo / "add_sub" / "config.pbtxt"
    config.unlink()
    os.mkfifo(config)
    assert _only(lint_repository(repo), "add_sub") == {("config-not-a-file", "error")}


@pytest.mark.parametrize("source", [
    "x = " + "-" * 100000 + "1\n",  # MemoryError in the parser
    "x = a" + ".b" * 200000 + "\n",  # RecursionError in the compiler
    "x = " + "[" * 5000 + "]" * 5000 + "\n",  # the parser's own nesting limit
], ids=["unary", "attributes", "brackets"])
def test_a_model_py_too_deep_for_the_compiler_is_a_finding(repo, capsys, source):
    (repo / "add_sub" / "1" / "model.py").write_text(source)
    report = lint_repository(repo)
    syntax = [f for f in report.findings if f.model == "add_sub" and f.rule == "python-syntax"]
    assert len(syntax) == 1 and syntax[0].severity == "error"
    code, output = _cli(repo, capsys)
    assert code == 1 and "Traceback" not in output


def test_a_huge_sparse_config_is_refused_quickly_with_a_short_finding(repo, capsys):
    config = repo / "add_sub" / "config.pbtxt"
    with open(config, "wb") as handle:
        handle.truncate(1 << 30)
    start = time.perf_counter()
    report = lint_repository(repo)
    assert time.perf_counter() - start < 5
    assert _only(report, "add_sub") == {("file-too-large", "error")}
    code, output = _cli(repo, capsys)
    assert code == 1 and len(output) < 5000


def test_every_message_is_capped(repo):
    (repo / "add_sub" / "config.pbtxt").write_text("x" * 200_000 + ": 1\n")
    report = lint_repository(repo)
    assert report.findings
    for finding in report.findings:
        assert len(finding.message) <= MAX_MESSAGE + 40 and len(finding.file) <= 340, finding


def test_ten_thousand_version_folders_are_summarised(repo, capsys):
    for version in range(2, 10_002):
        (repo / "preprocess" / str(version)).mkdir()
    report = lint_repository(repo)
    stray = [f for f in report.findings if f.rule == "version-stray"]
    assert len(stray) == 1 and "and 9996 more" in stray[0].message and len(stray[0].message) < 400
    code, output = _cli(repo, capsys)
    assert max(len(line) for line in output.splitlines()) < 2000


def test_control_characters_in_names_are_escaped_everywhere(repo, capsys):
    evil = "m\n\x1b[31mEVIL"
    (repo / evil / "1").mkdir(parents=True)
    (repo / evil / "config.pbtxt").write_text('name: "m"\nbackend: "python"\n')
    report = lint_repository(repo)
    hostile = [f for f in report.findings if "EVIL" in f.model]
    assert hostile, [str(f) for f in report.findings]
    for finding in report.findings:
        assert str(finding).isprintable(), finding
    assert any(f.model == "m\\n\\x1b[31mEVIL" for f in hostile)
    code, output = _cli(repo, capsys)
    assert "\x1b" not in output and "m\\n\\x1b[31mEVIL" in output
    assert all(line.isprintable() for line in output.splitlines())
    json_code, json_output = _cli(repo, capsys, "--json")
    assert "\x1b" not in json_output and json.loads(json_output)["ok"] is False


def test_an_unreadable_config_is_a_finding(repo):
    import socket

    config = repo / "add_sub" / "config.pbtxt"
    config.unlink()
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(config))
    assert _only(lint_repository(repo), "add_sub") == {("file-unreadable", "error")}


def test_a_repository_path_that_is_a_file_or_hostile_is_one_line_of_bad_input(tmp_path, capsys):
    target = tmp_path / "x\x1b[2Jy"
    target.write_text("not a folder")
    code, output = _cli(target, capsys)
    assert code == 2 and "\x1b" not in output and "x\\x1b[2Jy' is not a folder" in output


def test_explain_names_what_triton_does(capsys):
    assert main(["--explain", "ensemble-version-missing"]) == 0
    out = capsys.readouterr().out
    assert "refuses" in out and "whose required version" in out and "model_repository_manager.cc" in out
    assert main(["--explain", "ensemble-cycl"]) == 2
    assert "ensemble-cycle" in capsys.readouterr().err
