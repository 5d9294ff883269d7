"""The headline: ``pip install model-release`` into a venv outside the clone, and a DAG file of a few lines
that uses the public factory releases the wine example through ``dag.test()``: promoted (the channel
pointer, MLflow's alias) and served (a serving Triton answers the golden rows)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from model_release.local.fleet import LocalFleet
from model_release.local.stack import EmbeddedStack

from .conftest import Venv
from .release import USER_DAG, failure, release_wine, serving

pytestmark = [pytest.mark.package, pytest.mark.integration, pytest.mark.dags, pytest.mark.slow]

#: the store prefix the user's spec promotes to, and the serving Triton's agent follows
PREFIX = "wine-installed"


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedStack, LocalFleet]]:
    root = tmp_path_factory.mktemp("services")
    with EmbeddedStack(root / "stack") as stack, serving(stack, root / "serving", PREFIX) as fleet:
        yield stack, fleet


def test_the_users_dag_file_is_at_most_ten_lines_of_the_public_api() -> None:
    lines = USER_DAG.strip().splitlines()
    assert len(lines) <= 10, len(lines)
    assert "from model_release.airflow import release_task_group" in lines
    assert not [line for line in lines if "model_release" in line and "import release_task_group" not in line]


def test_a_ten_line_dag_in_the_installed_package_releases_the_wine_model_promoted_and_served(
        core_venv: Venv, running: tuple[EmbeddedStack, LocalFleet]) -> None:
    stack, fleet = running
    done = release_wine(core_venv, stack, fleet, prefix=PREFIX)
    run = done["run"]
    assert run.returncode == 0 and run.stdout.strip().splitlines()[-1] == "run state: success", failure(run)
    assert done["pointer"] is not None and done["pointer"]["release_id"].startswith("wine-"), done["pointer"]
    assert done["alias"] == "1"
    assert done["served"] is not None and done["served"] >= 0.9, done["served"]
    # the tasks ran the installed package: the workspace is under the user's folder (its project home), the
    # templates came from the venv
    workspace = core_venv.home / ".work" / "workspace"
    assert any(workspace.glob("wine-*/repository")), sorted(p.name for p in workspace.iterdir()) if workspace.exists() else None
