"""The release manifest's code digest covers the templates wherever they come from (a clone, a wheel, a setting)."""

from __future__ import annotations

import shutil

from model_release.airflow.tasks import code_digest
from model_release.repository.render import template_root


def test_a_changed_template_changes_the_digest_and_a_copy_elsewhere_does_not(tmp_path, monkeypatch) -> None:
    copy = tmp_path / "templates"
    shutil.copytree(template_root(), copy)
    before = code_digest()
    monkeypatch.setenv("MODEL_RELEASE_TEMPLATES", str(copy))
    assert template_root() == copy and code_digest() == before  # named by place in the templates, not on disk
    template = next(copy.rglob("*.j2"))
    template.write_text(template.read_text() + "\n{# changed #}\n")
    assert code_digest() != before
