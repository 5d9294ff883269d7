"""Where the package looks for the project's folder, its templates and the local Triton's runtime: a setting
first, then the clone an editable install imports it from (tests/package checks the installed side)."""

from __future__ import annotations

from pathlib import Path

import pytest

import model_release
from model_release.errors import AssembleError
from model_release.repository.render import TEMPLATE_ENV, template_root
from model_release.triton.local import RUNTIME_ENV, runtime_venv

from .conftest import PROJECT


def test_in_the_clone_the_checkout_is_the_home_and_holds_the_templates_and_the_runtime(monkeypatch) -> None:
    for name in (model_release.HOME_ENV, TEMPLATE_ENV, RUNTIME_ENV):
        monkeypatch.delenv(name, raising=False)
    assert model_release.source_checkout() == PROJECT
    assert model_release.project_home() == PROJECT
    assert template_root() == PROJECT / "model_repository_template"  # the editable install maps the package there
    assert runtime_venv() == PROJECT / ".venv-triton"


def test_settings_win_over_the_clone(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(model_release.HOME_ENV, str(tmp_path / "home"))
    monkeypatch.setenv(TEMPLATE_ENV, str(tmp_path))
    monkeypatch.setenv(RUNTIME_ENV, str(tmp_path / "triton-venv"))
    assert model_release.project_home() == tmp_path / "home"
    assert template_root() == tmp_path
    assert runtime_venv() == tmp_path / "triton-venv"


def test_a_template_setting_that_names_no_folder_says_so(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(TEMPLATE_ENV, str(tmp_path / "missing"))
    with pytest.raises(AssembleError, match=r"\$MODEL_RELEASE_TEMPLATES='.*missing' is not a folder; point it at a copy"):
        template_root()
