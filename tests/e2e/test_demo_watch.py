"""The demo's fourth release, for real: it passes the canary, fails on production values, and the watch rolls it back.

A champion (the C=10 retrain) is released through the DAG and rolled out to a local fleet of two
serving Tritons (``model_release.local.fleet``, as ``model-release up`` starts them); then the demo's
own step (:func:`model_release.local.demo.release_four`) registers release 3's model with a petal-length
table for 0-7 cm only, releases it through the DAG with the watch on under the demo's bounded traffic
loop, and reads back what the watch left. The spec is tests/dag_spec.py's (the shipped one without
the canary's load phase, tuning and expectations): this test is about the watch, not latency.
"""

from __future__ import annotations

import pytest

from model_release.local.demo import MODEL_NAME, release_four, train_iris
from model_release.local.fleet import LocalFleet, s3_env
from model_release.local.stack import EmbeddedStack
from model_release.spec import load_spec
from model_release.serve.guard import ROLLED_BACK
from model_release.store import ledger
from model_release.workspace import new_release_id

from ..dag_spec import write_dag_spec

pytestmark = [pytest.mark.integration, pytest.mark.dags, pytest.mark.slow]


@pytest.mark.timeout(1800)  # two DAG runs with a canary each: 5 min alone, 15+ on a 2-core machine shared by others
def test_a_release_that_fails_on_production_values_is_rolled_back_by_the_watch(tmp_path) -> None:
    spec = write_dag_spec(tmp_path / "specs")
    store = load_spec(spec).promote.store
    with EmbeddedStack(tmp_path / "stack") as stack, \
            LocalFleet(tmp_path / "serving", store=store, env=s3_env(stack.endpoint_url)) as fleet:
        stack.extra_env["PYTHONUNBUFFERED"] = "1"  # the traffic starts on the rollout task's first line, as it comes
        # as the demo runs them: both DAG runs in one Airflow process, warmed while the champion trains;
        # release_four's traffic starts only if the session streams the run's lines as they come
        with stack.dag_session(warm="model_release") as dags:
            version = train_iris(stack.tracking_uri, c=10.0)
            champion = new_release_id("iris")
            run = dags.run({"spec": str(spec), "release_id": champion})
            assert run.returncode == 0 and run.state == "success", run.output[-5000:]
            assert "[dag session] model_release parsed and its tasks' modules imported in" in run.output
            fourth = release_four(stack, fleet, tmp_path, spec, champion={"release_id": champion, "version": version},
                                  run=dags.run)

    assert fourth is not None, "the fourth release must pass the canary and be promoted (it is release 3 on golden rows)"
    assert fourth["promoted"]["previous_release"] == champion
    # everything is back: servers, pointer, MLflow alias, ledger, and the channel's Asset event says so
    assert fourth["problems"] == []
    assert set(fourth["serving"].values()) == {champion}
    record = fourth["rollout"]
    assert record["outcome"] == "rolled back" and record["reason"].startswith(ROLLED_BACK), record["reason"]
    assert record["watch"][0]["outcome"] == "fail" and "error rate" in record["watch"][0]["sentence"]
    assert [s["server"] for s in record["rolled_back"]] == ["serve-1"], "caught in the first wave, on one server"
    assert fourth["ledger"]["state"] == ledger.REJECTED and fourth["ledger"]["reason"].startswith(ledger.IN_PRODUCTION)
    event = fourth["event"]
    assert (event["action"], event["by"], event["release_id"], event["previous_release"]) == ("rollback", "watch", champion, fourth["release_id"])
    assert event["reason"].startswith(ROLLED_BACK) and event["channel"] == "production"
    # the rollout task succeeded (its event was emitted); finish failed the run on the rejection in production
    assert fourth["dag_state"] == "failed"
    # the traffic loop played production to both servers and stopped by itself
    assert all(t.answered > 0 for t in fourth["traffic"].values()), fourth["traffic"]
    assert fourth["version"] != version and MODEL_NAME == "iris-classifier"
    # the demo's timing of the run, from its own task lines: the canary and the roll-out apart
    spans = fourth["spans"]
    assert 0 < spans["canary"] < spans["intake..promote"] and spans["rollout"] > 0, spans
