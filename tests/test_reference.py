"""The references in docs/reference/ are what the code gives, every field and flag says what it does, and a
spec error points at an anchor the reference has."""

from __future__ import annotations

import re

import pytest

from model_release.errors import SpecError
from model_release.reference.__main__ import generated, main
from model_release.reference.spec import rows, undocumented
from model_release.spec import ReleaseSpec, parse_spec
from model_release.spec.release import anchor

from .conftest import PROJECT

REFERENCE = PROJECT / "docs" / "reference"
BASE = {"name": "iris", "model": {"name": "iris-classifier", "alias": "candidate"}}


def test_every_spec_field_has_a_description() -> None:
    assert undocumented() == [], "give these fields a Field(description=...): " + ", ".join(undocumented())
    assert len(rows(ReleaseSpec)) > 150


@pytest.mark.parametrize("name", ["spec.md", "cli.md"])
def test_the_committed_reference_is_what_the_code_gives(name) -> None:
    committed = (REFERENCE / name).read_text()
    assert committed == generated()[name], f"docs/reference/{name} is stale: run python -m model_release.reference --write docs/reference"


def test_the_check_fails_on_a_stale_reference(tmp_path, capsys) -> None:
    assert main(["--write", str(tmp_path)]) == 0 and main(["--check", str(tmp_path)]) == 0
    (tmp_path / "cli.md").write_text((tmp_path / "cli.md").read_text().replace("--store", "--stor"))
    assert main(["--check", str(tmp_path)]) == 1
    assert "cli.md in" in capsys.readouterr().err


@pytest.mark.parametrize(("data", "field"), [
    ({**BASE, "canary": {"load": {"batch_rows": 0}}}, "canary.load.batch_rows"),
    ({**BASE, "canary": {"load": {"batch_rowz": 3}}}, "canary.load"),
    ({**BASE, "serve": {"watch": {"p99_us": {"ratio": 0.5}}}}, "serve.watch.p99_us.ratio"),
    ({**BASE, "golden": {"rows": -1}}, "golden.rows"),
])
def test_a_spec_error_points_at_the_fields_anchor_in_the_reference(data, field) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(data)
    link = f"docs/reference/spec.md#{anchor(field)}"
    assert link in str(caught.value)
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', (REFERENCE / "spec.md").read_text()))
    assert anchor(field) in anchors
