"""What the DAG files in ``dags/`` take from the core: their ``Param`` patterns and the scheduled specs.

``dags/`` reaches model-release only through :mod:`model_release.airflow` (pinned by
``tests/dags/test_dag_integrity.py``); this module hands them the rest. It imports nothing heavy
at module level: every DAG file imports it at parse time.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

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


def airflow_schedule(spec: ReleaseSpec) -> Any:
    """What Airflow's ``schedule=`` takes for a scheduled spec: its registry Asset's events *or* its time
    schedule (the spec's cron, preset or interval); the Asset alone when the spec has no schedule."""
    from ..spec import schedule_value
    from .dags import release_schedule

    return release_schedule(spec.name, schedule_value(spec.schedule))


def registry_asset_uri(spec_name: str) -> str:
    """The Asset the registry webhook receiver posts to when the spec's alias moves."""
    from ..registry_events.routes import asset_uri

    return asset_uri(spec_name)
