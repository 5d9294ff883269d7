"""One scheduled release DAG per spec in ``releases/``: ``model_release__<spec name>``.

Generated cheaply at parse time: each spec is read as YAML and validated (no model, MLflow or
store is touched), and a spec that does not parse becomes no DAG (its error is logged; the manual
DAG refuses it with the full message). The schedule is the spec's ``schedule`` *or* an event on
the spec's registry Asset, which the webhook receiver (:mod:`model_release.registry_events`) posts
when the spec's alias moves in MLflow.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from airflow.sdk import DAG, Param

from model_release.airflow import release_task_group
from model_release.airflow.dagfiles import airflow_schedule, registry_asset_uri, scheduled_specs

HOME = Path(os.environ.get("MODEL_RELEASE_HOME", Path(__file__).resolve().parents[1]))
RELEASES = Path(os.environ.get("MODEL_RELEASE_SPECS", HOME / "releases"))

DOC = """
### Scheduled release of `{spec}`

Every `{schedule}`, and within seconds of `{model}` moving (an event on Asset `{asset}`, posted by
the registry webhook receiver), looks at what `{model}` names now and releases it when it is **new to channel
`{channel}`**: the first task resolves the alias (one MLflow call) and reads the channel's ledger and
pointer (two reads from `{store}`). When the version was released, rejected, or is being released
by another run, the run ends with every task **skipped**, and nothing else is touched.

* A version rejected once (a gate refused it) is not tried again by the schedule; trigger this DAG
  with `force_retry: true` to try it again.
* Two runs never release the same version: the first task claims it in the ledger with a
  conditional write, and `finish` records released / rejected / failed.
* Otherwise the same tasks as the manual `model_release` DAG, whose description says more.
"""


def _dag_for(path: Path, spec) -> DAG:  # noqa: ANN001 - a model_release.spec.ReleaseSpec
    shown = str(path.relative_to(HOME)) if path.is_relative_to(HOME) else str(path)
    with DAG(
        dag_id=f"model_release__{spec.name}",
        description=f"Scheduled release of {spec.model.uri} to channel {spec.promote.channel}",
        doc_md=DOC.format(spec=path.name, schedule=spec.schedule or "trigger (no schedule in the spec)",
                          model=spec.model.uri, channel=spec.promote.channel, store=spec.promote.store,
                          asset=registry_asset_uri(spec.name)),
        schedule=airflow_schedule(spec),
        start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
        catchup=False,
        max_active_runs=1,
        tags=["model-release", "scheduled", spec.name],
        params={
            "spec": Param(shown, type="string", const=shown, description="this DAG's spec (fixed)"),
            "force_retry": Param(False, type="boolean",
                                 description="try again a version this channel rejected before"),
            "workspace": Param(None, type=["null", "string"], minLength=1,
                               description="s3://BUCKET/PREFIX (workers share no disk) or a folder every worker mounts"),
        },
    ) as dag:
        release_task_group(str(path.resolve()), channel=spec.promote.channel, scheduled=True, prefix_group_id=False)
    return dag


def _generate() -> None:
    """One module-level DAG per valid spec (none, and no error, when releases/ holds none)."""
    for path, spec in scheduled_specs(RELEASES):
        dag = _dag_for(path, spec)
        globals()[dag.dag_id] = dag


_generate()
