"""Run DAGs the way ``airflow dags test`` does, many times in one process.

``python -m model_release.airflow.dag_runner MARK`` reads one JSON request a line on stdin,
``{"dag_id": ..., "conf": {...}}``, and for each finds the DAG in the DAG bundles and runs it with
``dag.test()`` (what the ``airflow dags test`` command calls: the same DagRun in the metadata DB, the
tasks run one by one in this process). Airflow's output goes to stdout as the command's would; after
each run one line ``MARK{"state": ..., "run_id": ..., "error": ...}`` says how it ended (the
caller, :class:`model_release.local.stack.DagSession`, chooses ``MARK``).

``airflow dags test`` pays Airflow's start-up again for every run (about 25 s on two cores, as much
as a whole run of the release DAG takes once its modules are imported); a session of several runs
(:meth:`model_release.local.stack.EmbeddedStack.dag_session`) pays it once. With ``--warm DAG_ID``
it also parses that DAG and imports the modules its tasks import on first use (MLflow, ONNX,
Triton's client: seconds each on two cores) before it reads the first request,
so that a caller who starts the session early (the demo, while it trains its first model) does not
wait for them in its first run.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
import traceback

#: what the release DAG's tasks import on first use, heaviest first; ``--warm`` imports them up front
WARM_MODULES = ("mlflow.pyfunc", "model_release.pipeline", "model_release.canary.stage",
                "model_release.serve.stage", "tritonclient.http", "onnx")


def run_one(dag_id: str, conf: dict | None) -> dict:
    """One DagRun of ``dag_id`` with ``conf``, as ``airflow dags test DAG_ID -c CONF`` makes it."""
    from airflow._shared.timezones import timezone
    from airflow.utils.cli import get_bagged_dag

    dag = get_bagged_dag(bundle_names=None, dag_id=dag_id)
    if dag is None:
        return {"state": None, "run_id": None, "error": f"Dag {dag_id!r} could not be found"}
    dr = dag.test(logical_date=timezone.utcnow(), run_conf=conf)
    state = getattr(dr, "state", None)
    return {"state": str(getattr(state, "value", state)) if state is not None else None,
            "run_id": getattr(dr, "run_id", None), "error": None}


def warm(dag_id: str) -> float:
    """Parse ``dag_id`` and import :data:`WARM_MODULES`; the seconds it took."""
    from airflow.utils.cli import get_bagged_dag

    started = time.perf_counter()
    get_bagged_dag(bundle_names=None, dag_id=dag_id)
    for module in WARM_MODULES:
        importlib.import_module(module)
    return time.perf_counter() - started


def main(argv: list[str]) -> int:
    end_mark, options = argv[0], argv[1:]
    if options and not (options[0] == "--warm" and len(options) == 2):
        print(f"dag_runner: unknown arguments {options!r}; valid: MARK [--warm DAG_ID]", file=sys.stderr)
        return 2
    from airflow.utils.providers_configuration_loader import providers_configuration_loaded

    from model_release import collect_less

    collect_less()
    if options:
        seconds = providers_configuration_loaded(warm)(options[1])
        print(f"[dag session] {options[1]} parsed and its tasks' modules imported in {seconds:.1f} s", flush=True)
    run = providers_configuration_loaded(run_one)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            ended = run(request["dag_id"], request.get("conf"))
        except Exception as exc:  # noqa: BLE001 - reported, as the command would exit with it
            traceback.print_exc()
            ended = {"state": None, "run_id": None, "error": f"{type(exc).__name__}: {exc}"}
        sys.stderr.flush()
        print(end_mark + json.dumps(ended), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
