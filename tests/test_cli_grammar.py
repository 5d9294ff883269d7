"""One CLI grammar: every command's flags checked against model_release.flags' table, and every --help run.

The concepts (store, channel, release, tracking URI, registry alias, JSON output) are spelled one way and
defaulted one way on every command; an old spelling survives only as a hidden alias that warns; every
visible flag says what it does; every read command takes --json; `--help` of every command exits 0.
"""

from __future__ import annotations

import argparse

import pytest

from model_release import flags
from model_release.cli import COMMANDS, main, parsers

#: the commands that only read, which must all take --json
READS = {"report", "lint", "store history", "store releases", "store verify", "fleet status", "status"}
#: spellings no command may show for a concept of the table (the old ones live on as hidden, warned aliases)
SYNONYMS = {"--release-id": "release", "--to": "release", "--mlflow-tracking-uri": "tracking_uri",
            "--mlflow-uri": "tracking_uri", "--store-uri": "store", "--output-json": "json"}

PARSERS = parsers()


def _visible(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and a.help is not argparse.SUPPRESS]  # noqa: SLF001


def test_the_table_covers_every_command() -> None:
    words = {w.split()[0] for w in PARSERS}
    assert words == set(COMMANDS), sorted(set(COMMANDS) ^ words)


@pytest.mark.parametrize("words", sorted(PARSERS))
def test_each_concept_is_spelled_and_defaulted_as_the_table_says(words, monkeypatch) -> None:
    for variable in ("MODEL_RELEASE_STORE", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(variable, raising=False)
    parser = PARSERS[words]
    for action in parser._actions:  # noqa: SLF001
        concept = flags.CONCEPTS.get(action.dest)
        if concept is None or not action.option_strings:
            continue
        if isinstance(action, flags.Deprecated):
            assert action.help is argparse.SUPPRESS and action.option_strings[0] in flags.DEPRECATED, (words, action)
            continue
        assert action.option_strings == [concept.flag], (words, action.option_strings)
        if not action.required and concept.extra.get("action") is None and concept.default_value() is not None:
            assert action.default == concept.default_value(), (words, concept.flag, action.default)
    for action in _visible(parser):
        assert action.option_strings[0] not in SYNONYMS, f"{words}: {action.option_strings[0]} is not the grammar's spelling"
        if action.dest in ("help",):
            continue
        assert action.help and len(action.help) > 8, f"{words}: {action.option_strings[0]} says nothing in --help"


@pytest.mark.parametrize("words", sorted(READS))
def test_every_read_command_takes_json(words) -> None:
    assert "--json" in {s for a in _visible(PARSERS[words]) for s in a.option_strings}, words


def test_the_channel_defaults_to_production_wherever_a_command_takes_one(monkeypatch) -> None:
    taking = {w: a for w, p in PARSERS.items() for a in p._actions if a.dest == "channel"}  # noqa: SLF001
    assert {"store history", "store rollback", "store repair-pointer", "rollout", "fleet status", "serve-agent"} <= set(taking)
    assert {w: a.default for w, a in taking.items()} == {w: "production" for w in taking}


@pytest.mark.parametrize("words", sorted(PARSERS) + ["fleet", "store", ""])
def test_help_of_every_command_exits_0(words, capsys) -> None:
    assert main([*words.split(), "--help"]) == 0
    assert "usage" in capsys.readouterr().out.lower() or words == ""


def test_an_old_spelling_works_and_warns_and_a_new_one_does_not(capsys) -> None:
    parser = PARSERS["store rollback"]
    old = parser.parse_args(["--to", "r1", "--mlflow-tracking-uri", "sqlite:///x.db", "--alias", "prod"])
    warned = capsys.readouterr().err
    assert (old.release, old.tracking_uri, old.mlflow_alias) == ("r1", "sqlite:///x.db", "prod")
    for spelling, new in (("--to", "--release"), ("--mlflow-tracking-uri", "--tracking-uri"), ("--alias", "--mlflow-alias")):
        assert f"{spelling} is deprecated and goes in the next release; use {new}" in warned
    new = parser.parse_args(["--release", "r1"])
    assert new.release == "r1" and capsys.readouterr().err == ""


def test_a_required_flag_given_by_its_old_spelling_counts(capsys) -> None:
    parser = PARSERS["store repair-pointer"]
    assert parser.parse_args(["--to", "r2"]).release == "r2"
    with pytest.raises(flags.UserError, match="the following arguments are required: --release"):
        parser.parse_args([])
