"""What the DAG files in ``dags/`` take from the core: their ``Param`` patterns and the scheduled specs.

``dags/`` reaches model-release only through :mod:`model_release.airflow` (pinned by
``tests/dags/test_dag_integrity.py``); this module hands them the rest. It imports nothing heavy
at module level: every DAG file imports it at parse time.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from ..names import ALIAS, NAME, RELEASE_ID, anchored

if TYPE_CHECKING:
    from ..spec import ReleaseSpec

log = logging.getLogger(__name__)

#: the JSON-schema patterns of the DAGs' ``alias``, ``channel`` and ``release_id`` params
ALIAS_PATTERN = anchored(ALIAS)
CHANNEL_PATTERN = anchored(NAME)
RELEASE_ID_PATTERN = anchored(RELEASE_ID)


def scheduled_specs(folder: Path) -> list[tuple[Path, ReleaseSpec]]:
    """Every ``*.yaml`` spec in ``folder`` that validates, with its path, in name order.

    A spec that does not validate becomes no DAG: its error is logged (the manual DAG refuses it
    with the full message). Only the files are read: no model, MLflow or store is touched.
    """
    from ..errors import SpecError
    from ..spec import load_spec

    found = []
    for path in sorted(folder.glob("*.yaml")):
        try:
            found.append((path, load_spec(path)))
        except SpecError as exc:
            log.error("no scheduled DAG for %s: %s", path, exc)
    return found


def airflow_schedule(spec: ReleaseSpec) -> str | timedelta | None:
    """What Airflow's ``schedule=`` takes for the spec's ``schedule``: its cron or preset, or a timedelta."""
    from ..spec import schedule_value

    return schedule_value(spec.schedule)
