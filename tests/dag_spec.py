"""The release spec the DAG tests use: releases/iris.yaml without the canary's load phase, tuning and
great_expectations suite.

The Airflow tests (tests/e2e/test_release_dag.py, tests/distributed/) test scheduling, retries,
workers and the ledger, not latency: the load phase (candidate and champion under load until
three windows agree) and the serving-configuration search cost about 40 s of canary time per
release on two cores, and their ratio gates on a busy machine would only add noise; importing and
running great_expectations costs another 10-20 s per canary. All three are tested on their own in
tests/canary/. Everything else (export, parity, the replay of every golden row, quality and champion
gates) is as in the shipped spec.

The spec is written to a folder of its own, which the tests give Airflow as ``MODEL_RELEASE_SPECS``
(the folder the scheduled DAGs are generated from), so ``model_release__iris`` uses it too.
"""

from __future__ import annotations

from pathlib import Path

import yaml

PROJECT = Path(__file__).resolve().parents[1]
SHIPPED = PROJECT / "releases" / "iris.yaml"


def write_dag_spec(folder: Path) -> Path:
    """Write the DAG tests' iris spec to ``folder/iris.yaml`` (validated); returns its path."""
    from model_release.spec import load_spec

    data = yaml.safe_load(SHIPPED.read_text())
    data["golden"]["path"] = str(SHIPPED.parent / data["golden"]["path"])  # the spec no longer sits beside it
    data["canary"]["load"] = {"enabled": False}
    data["canary"]["tune"] = {"enabled": False}
    data["canary"]["expectations"] = False
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "iris.yaml"
    path.write_text("# tests/dag_spec.py: releases/iris.yaml without the canary's load phase, tuning and expectations\n"
                    + yaml.safe_dump(data, sort_keys=False))
    spec = load_spec(path)
    assert spec.name == "iris" and not (spec.canary.load.enabled or spec.canary.tune.enabled or spec.canary.expectations)
    return path
