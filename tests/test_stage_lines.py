"""A release at a terminal logs one line per stage (:func:`model_release.logs.stage_lines`), through the real stage runner."""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass

import pytest

from model_release.errors import SpecError
from model_release.logs import CHATTY_LOGGERS, cli_logging, stage_lines
from model_release.pipeline import run_stage
from model_release.workspace import Workspace


@dataclass
class _Result:
    models: int

    def headline(self) -> str:
        return f"{self.models} models"

    def to_dict(self) -> dict:
        return {"models": self.models}


def _chatter() -> None:
    logging.getLogger("model_release.canary.measure.phase").info("canary: load candidate: window 1")
    logging.getLogger("mlflow.models.evaluation.validation").info("Validating candidate model metrics")
    logging.getLogger("great_expectations.data_context.types.base").info("Created temporary directory")
    logging.getLogger("model_release.canary.champion").warning("canary: the champion's manifest is old")
    with warnings.catch_warnings():  # cli_logging routes it through logging; nothing here does
        warnings.simplefilter("always")
        warnings.warn("The specified dataset source can be interpreted in multiple ways", UserWarning, stacklevel=1)


def _stages(ws: Workspace) -> None:
    run_stage(ws, "assemble", lambda: _Result(3))
    _chatter()
    with pytest.raises(SpecError):
        run_stage(ws, "canary", lambda: (_ for _ in ()).throw(SpecError("golden.path 'x.npz' does not exist")))


def test_one_line_per_stage_with_its_time_and_model_release_warnings(tmp_path, capfd) -> None:
    ws = Workspace("r-1", str(tmp_path))
    from mlflow.utils.logging_utils import _configure_mlflow_loggers

    shown = warnings.showwarning
    with cli_logging("INFO"), stage_lines():
        _configure_mlflow_loggers("mlflow")  # what importing mlflow does mid-release: its own handler on stderr
        _stages(ws)
    lines = capfd.readouterr().err.splitlines()  # the file descriptor: MLflow's handler holds the real stderr
    assert len(lines) == 3, lines
    assert lines[0].startswith("assemble: 3 models (") and lines[0].endswith(" s)")
    assert lines[1] == "WARNING model_release.canary.champion: canary: the champion's manifest is old"
    assert lines[2].startswith("canary: failed after ") and lines[2].endswith(" s")  # the CLI's last line says why
    assert warnings.showwarning is shown  # given back as it was found


def test_verbose_and_outside_the_block_every_record_passes(tmp_path, capsys) -> None:
    ws = Workspace("r-2", str(tmp_path))
    before = {n: logging.getLogger(n).level for n in CHATTY_LOGGERS}
    with cli_logging("INFO"), stage_lines(verbose=True):
        _stages(ws)
    assert {n: logging.getLogger(n).level for n in CHATTY_LOGGERS} == before
    err = capsys.readouterr().err
    assert "INFO model_release.pipeline: assemble: 3 models (" in err
    assert "INFO model_release.canary.measure.phase: canary: load candidate: window 1" in err
    assert "INFO great_expectations.data_context.types.base: Created temporary directory" in err
    assert "WARNING py.warnings:" in err and "ERROR model_release.pipeline: canary: golden.path 'x.npz' does not exist" in err
    with cli_logging("INFO"):
        with stage_lines():
            pass
        logging.getLogger("model_release.canary.measure.phase").info("after the block")
    assert "INFO model_release.canary.measure.phase: after the block" in capsys.readouterr().err
