"""The release a run claims is the release it ships, on the embedded stack: one whole pipeline run of a cascade.

MLflow on SQLite, the moto S3 server over HTTP and the real tritonserver for the canary. A cascade
of two registered models trained on different data (the small one on labels 30% noisy, the large
one on clean labels), judged on iris's ground truth given in species names:

1. the manual DAG's start task claims the member combination its aliases name (both version 1);
2. a ``model-release release`` of the same spec at the same moment, the real CLI in a process of
   its own, is refused with the one "held by" line naming the DAG run and when it started, exit 6;
3. both aliases move to version 2 before intake;
4. the DAG's tasks run on: the run releases what it claimed (both members version 1), the canary
   compares the served cascade with its members' native models composed as the router composes them
   (the composed reference; the release model alone differs on the rows the large one answers),
   passes, and promotes; the manifest and the ledger agree on the identity, and no ledger entry is
   left claimed;
5. the same cascade served with a router whose threshold is broken is blocked by parity, naming rows.

The race of the two entry points' claim steps, fifty times, is tests/store/test_claim_race.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
import yaml

from model_release.errors import CanaryRejected
from model_release.intake.candidate import Candidate
from model_release.local.demo import train_iris
from model_release.local.moto_process import _MOTO_KEY_ID, _MOTO_SECRET
from model_release.local.stack import EmbeddedStack, connection_env
from model_release.pipeline import Services, run_assemble, run_canary, run_export, run_intake, run_tensorrt
from model_release.spec import load_spec
from model_release.store import ledger, open_store
from model_release.store.keys import MANIFEST, release_prefix
from model_release.types import ExportResult
from model_release.workspace import Workspace

from ..dag_spec import write_dag_spec

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SMALL, LARGE, PREFIX, CHANNEL = "claimed-small", "claimed-large", "claimed", "production"
RUN_ID = "manual__claimed-cascade"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with EmbeddedStack(tmp_path_factory.mktemp("stack")) as s, pytest.MonkeyPatch.context() as env:
        for key, value in {**connection_env(str(s.tracking_uri), s.endpoint_url),
                           "MODEL_RELEASE_WORKSPACE": str(s.workspace)}.items():
            env.setenv(key, value)
        # version 1 of each under @candidate, trained on different data; version 2 of each, the alias left alone
        assert train_iris(s.tracking_uri, model_name=SMALL, c=0.5, noise=0.3, seed=1) == "1"
        assert train_iris(s.tracking_uri, model_name=LARGE, c=1.0) == "1"
        assert train_iris(s.tracking_uri, model_name=SMALL, c=0.5, noise=0.3, seed=2, alias=None) == "2"
        assert train_iris(s.tracking_uri, model_name=LARGE, c=2.0, alias=None) == "2"
        yield s


@pytest.fixture(scope="module")
def spec_path(stack, tmp_path_factory) -> Path:
    """releases/iris.yaml as the DAG tests run it (no load phase), as a cascade of the two, with label names."""
    path = write_dag_spec(tmp_path_factory.mktemp("specs"))
    data = yaml.safe_load(path.read_text())
    data["model"] = {"name": SMALL, "alias": "candidate"}
    data["promote"]["store"] = f"s3://{stack.bucket}/{PREFIX}"
    data["repository"].update(shape="cascade", cascade={"small": "release", "large": f"models:/{LARGE}@candidate",
                                                        "threshold": 0.9})
    path.write_text(yaml.safe_dump(data))
    assert load_spec(path).repository.labels == ["setosa", "versicolor", "virginica"] and data["golden"]["target"] == "species"
    return path


def _cli(stack: EmbeddedStack, spec: Path, tmp: Path) -> subprocess.CompletedProcess:
    env = {**stack.env(), "MODEL_RELEASE_S3_ENDPOINT_URL": stack.endpoint_url, "AWS_ACCESS_KEY_ID": _MOTO_KEY_ID,
           "AWS_SECRET_ACCESS_KEY": _MOTO_SECRET, "AWS_DEFAULT_REGION": "us-east-1"}
    return subprocess.run([str(Path(sys.executable).with_name("model-release")), "release", str(spec), "--json",
                           "--workspace", str(tmp / "cli-ws")], env=env, capture_output=True, text=True, timeout=300)


def _ledger_states(store) -> dict[str, str]:
    s3, bucket = store.backend.client, store.backend.bucket
    found = s3.list_objects_v2(Bucket=bucket, Prefix=f"{PREFIX}/ledger/").get("Contents", [])
    return {o["Key"]: json.loads(s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read())["state"] for o in found}


@pytest.fixture(scope="module")
def released(stack, spec_path, tmp_path_factory):
    """Steps 1 to 4: the DAG run claims, the CLI is held, the aliases move, the DAG run goes on and promotes."""
    from mlflow import MlflowClient

    from model_release.airflow import tasks

    ref = tasks.start({"spec": str(spec_path)}, RUN_ID, datetime.now(timezone.utc), run={"dag_id": "model_release"},
                      is_active=lambda run: True)
    cli = _cli(stack, spec_path, tmp_path_factory.mktemp("cli"))
    client = MlflowClient(stack.tracking_uri, registry_uri=stack.tracking_uri)
    for name in (SMALL, LARGE):  # the aliases move between start and intake
        client.set_registered_model_alias(name, "candidate", "2")
    for step in (tasks.intake, tasks.export, tasks.tensorrt, tasks.assemble, tasks.canary, tasks.promote):
        ref = step(ref)
    return ref, cli, tasks.finish(ref)


def test_the_terminal_is_refused_naming_the_dag_run_that_holds_the_version(stack, released) -> None:
    ref, cli, _ = released
    store = open_store(f"s3://{stack.bucket}/{PREFIX}", s3_client=stack.s3_client())
    entry = ledger.read_entry(store, CHANNEL, SMALL, ref["claim"]["version"])[0]
    assert entry["started_at"] == ref["claim"]["started_at"]  # settled since, it keeps when its run claimed it
    line = cli.stderr.strip().splitlines()[-1]
    assert cli.returncode == 6, cli.stderr
    assert line == (f"model-release release: {SMALL} v{ref['claim']['version']} for channel 'production' is held by run "
                    f"{RUN_ID!r} of DAG 'model_release', started {entry['started_at']} (release {ref['release_id']}); "
                    "two runs never release one version: wait for that run to end, then release again if it did not "
                    "release it"), line
    assert cli.stdout == ""  # nothing released, no outcome


def test_the_run_releases_what_it_claimed_though_the_aliases_moved(stack, released) -> None:
    ref, _, finished = released
    claimed = Candidate.from_dict(ref["claim"]["candidate"])
    assert (claimed.version, claimed.members["large"].version) == ("1", "1")
    store = open_store(f"s3://{stack.bucket}/{PREFIX}", s3_client=stack.s3_client())
    manifest = store.read_json(release_prefix(ref["release_id"]) + MANIFEST)[0]
    assert (manifest["model"]["name"], manifest["model"]["version"], manifest["model"]["alias"]) == (SMALL, "1", "candidate")
    members = {k: (v["name"], v["version"], v["alias"]) for k, v in manifest["members"].items()}
    assert members == {"small": (SMALL, "1", "candidate"), "large": (LARGE, "1", "candidate")}
    assert manifest["members"]["large"]["run_id"] == claimed.members["large"].run_id
    # the manifest and the ledger name one identity, released, by this run; exactly one release in the channel
    assert ledger.manifest_version(manifest) == ref["claim"]["version"]
    entry = ledger.read_entry(store, CHANNEL, SMALL, ref["claim"]["version"])[0]
    assert (entry["state"], entry["release_id"]) == (ledger.RELEASED, ref["release_id"]) and finished["state"] == "released"
    assert ledger.serving_version(store, CHANNEL) == (ref["release_id"], SMALL, ref["claim"]["version"])
    assert list(_ledger_states(store).values()) == [ledger.RELEASED]  # no entry left claimed


def test_the_cascade_is_judged_on_label_truth_against_its_members_composed(stack, released) -> None:
    ref, _, _ = released
    ws = Workspace(ref["release_id"], stack.workspace)
    report = json.loads((ws.path / "canary" / "report.json").read_text())
    assert report["passed"] and report["golden"]["reference_of"].startswith("the cascade composed from its members' native")
    assert report["quality"]["target"] == "species" and report["quality"]["candidate"]["accuracy"] >= 0.9
    assert all(g["passed"] for g in report["gates"] if g["name"].startswith("parity."))
    # against the release model alone, the rows the large member answers would have failed parity
    export = ws.load_result("export", ExportResult)
    with np.load(export.reference_path) as native, np.load(export.composed_reference["path"]) as composed:
        by_large = composed["answered_by"][:, 0] == "iris_large"
        apart = np.abs(native["probabilities"] - composed["probabilities"]).max(axis=1) > 1e-3
        assert by_large.sum() > 0 and (apart & by_large).sum() > 0 and not (apart & ~by_large).any()


def test_a_broken_router_threshold_is_blocked_by_parity_naming_the_rows(stack, spec_path, released, tmp_path) -> None:
    ref, _, _ = released
    spec = load_spec(spec_path)
    services = Services(tracking_uri=stack.tracking_uri, open_store=lambda uri: open_store(uri, s3_client=stack.s3_client()))
    ws = Workspace("claimed-broken", tmp_path)
    intake = run_intake(spec, ws, services, candidate=Candidate.from_dict(ref["claim"]["candidate"]))
    export = run_export(spec, ws, intake)
    assembled = run_assemble(spec, ws, intake, export, run_tensorrt(spec, ws, export))
    router = Path(assembled.repository_dir) / "iris" / "1" / "model.py"
    router.write_text(router.read_text().replace("THRESHOLD = 0.9\n", "THRESHOLD = 0.5\n"))
    with pytest.raises(CanaryRejected) as blocked:
        run_canary(spec, ws, services, intake, export, assembled, keep_rejected=False)
    message = str(blocked.value)
    assert 'output "answered_by" agrees with' in message and "; rows " in message, message
    report = json.loads((ws.path / "canary" / "report.json").read_text())
    rows = report["parity"]["answered_by"]["worst_rows"]
    with np.load(ws.path / export.composed_reference["path"]) as composed:
        assert rows and all(composed["answered_by"][r, 0] == "iris_large" for r in rows)  # the rows it kept on the small one


def test_a_terminals_release_claims_renews_and_settles_the_combination_the_aliases_name_now(stack, spec_path, released,
                                                                                              tmp_path) -> None:
    from model_release.errors import ModelReleaseError
    from model_release.pipeline import release
    from model_release.store.claim import Holder

    ref, _, _ = released
    services = Services(tracking_uri=stack.tracking_uri, open_store=lambda uri: open_store(uri, s3_client=stack.s3_client()))
    ws = Workspace("claimed-cli", tmp_path)
    # a lease of 2 s, renewed every 0.5 s: the release takes far longer, so only its renewals keep the claim
    try:
        outcome = release(load_spec(spec_path), ws, services, holder=Holder.process(lease_s=2.0)).to_dict()
    except ModelReleaseError:  # judged against the DAG's release as its champion: a gate may refuse it
        outcome = json.loads((ws.path / "outcome.json").read_text())
    store = open_store(f"s3://{stack.bucket}/{PREFIX}", s3_client=stack.s3_client())
    claimed = outcome["ledger"]["version"]
    assert claimed != ref["claim"]["version"]  # both aliases moved: a new combination
    entry = ledger.read_entry(store, CHANNEL, SMALL, claimed)[0]
    assert (entry["release_id"], entry["state"]) == (ws.release_id, outcome["ledger"]["state"])
    assert entry["state"] == (ledger.RELEASED if outcome["promoted"] else ledger.REJECTED), outcome["error"]
    assert entry["run"]["run_id"].startswith("cli ") and "lease_s" not in entry
    assert ledger.CLAIMED not in _ledger_states(store).values()
