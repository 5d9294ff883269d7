"""The pages people read, from real canary runs, rendered in real headless Chromium.

Four real releases on the embedded stack (MLflow on SQLite, the moto S3 server over HTTP, the real
tritonserver), made once for the whole module, give every page the tests open: an iris classifier
three times on one channel (its first release, no champion, promoted; a retrain judged against it
and promoted; a degraded retrain the canary blocks, its reports kept under ``rejected/``), then a
rollback; and a ridge regressor's first release on a channel of its own. That is the fewest
releases that hold a first release, a passing and a blocked one, a regressor, and a channel
history with a promotion, a rejection and a rollback. Each release's load phase is brief (as in
NOT_ABOUT_LATENCY: four windows of 0.1 s per model) and tuning is off: these runs are about
what the pages show, not about stable figures (the tuning plot's drawing is unit-tested from a
report in ``tests/canary/test_report_page.py``; here its place says tuning was off).

Each report.html the canary wrote, and the channel's history page as the store holds it, is opened
in headless Chromium: a PNG is saved, any console error or any request other than the file fails
the test, and every plot must have rendered with a non-zero size.

PNGs go to the test's temporary folder, and also to ``$MODEL_RELEASE_SHOTS`` when it is set.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from model_release.cli import main
from model_release.local.demo import train_iris
from model_release.errors import CanaryRejected
from model_release.pipeline import Services, release
from model_release.spec import load_spec
from model_release.store import open_store, rollback
from model_release.workspace import Workspace, new_release_id

from .conftest import NOT_ABOUT_LATENCY, SPEC, StoreView
from .pagecheck import PageBrowser, PageFacts

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MODEL, PREFIX, REGRESSOR, REGRESSOR_PREFIX = "iris-pages", "pages", "diabetes-ridge", "pages-ridge"


def _services(stack) -> Services:  # noqa: ANN001
    return Services(tracking_uri=stack.tracking_uri, open_store=lambda uri: open_store(uri, s3_client=stack.s3_client()))


def _release(stack, root: Path, spec) -> Workspace:  # noqa: ANN001
    ws = Workspace(new_release_id(spec.name), root)
    try:
        outcome = release(spec, ws, _services(stack))
        assert outcome.promoted is not None, outcome.error
    except CanaryRejected:
        pass
    return ws


def _ridge(stack, x: np.ndarray, y: np.ndarray) -> str:  # noqa: ANN001
    import mlflow
    from mlflow.models import infer_signature
    from sklearn.linear_model import Ridge

    mlflow.set_tracking_uri(stack.tracking_uri)
    mlflow.set_registry_uri(stack.tracking_uri)
    mlflow.set_experiment("model-release")
    model = Ridge(alpha=1.0).fit(x, y)
    with mlflow.start_run():
        info = mlflow.sklearn.log_model(model, name="model", signature=infer_signature(x, model.predict(x)), input_example=x[:5],
                                        registered_model_name=REGRESSOR, pip_requirements=["scikit-learn==1.9.1"])
    version = str(info.registered_model_version)
    mlflow.MlflowClient(tracking_uri=stack.tracking_uri).set_registered_model_alias(REGRESSOR, "candidate", version)
    return version


@pytest.fixture(scope="module")
def runs(stack, tmp_path_factory) -> dict[str, Any]:  # noqa: ANN001
    """The workspaces of the four releases the page tests open, and the blocked one's model version."""
    root = tmp_path_factory.mktemp("pages")
    spec = load_spec(SPEC, overrides={"model.name": MODEL, "promote.store": f"s3://model-store/{PREFIX}", **NOT_ABOUT_LATENCY})
    out: dict[str, Any] = {}
    train_iris(stack.tracking_uri, model_name=MODEL, c=1.0)
    out["first"] = _release(stack, root, spec)
    train_iris(stack.tracking_uri, model_name=MODEL, c=2.0)
    out["passing"] = _release(stack, root, spec)
    out["blocked_version"] = train_iris(stack.tracking_uri, model_name=MODEL, c=1.0, noise=0.4)
    out["blocked"] = _release(stack, root, spec)
    rollback(open_store(f"s3://model-store/{PREFIX}", s3_client=stack.s3_client()), "production")

    from sklearn.datasets import load_diabetes

    x, y = load_diabetes(return_X_y=True)
    golden = root / "diabetes.npz"
    np.savez(golden, input=x.astype(np.float32), progression=y.astype(np.float32))
    regressor = load_spec(SPEC, overrides={
        "name": "diabetes", "model.name": REGRESSOR, "promote.store": f"s3://model-store/{REGRESSOR_PREFIX}", **NOT_ABOUT_LATENCY,
        "repository.shape": "single", "repository.labels": None, "golden.path": str(golden), "golden.target": "progression",
        "canary.quality": {}, "canary.champion.max_ks": 0.5, "canary.tolerances": {"default": {"atol": 1e-3, "rtol": 1e-4}},
        "export.tolerances": {"default": {"atol": 1e-5, "rtol": 1e-4}},  # iris.yaml's 'probabilities' is no output of a ridge
    })
    _ridge(stack, x.astype(np.float32), y.astype(np.float32))
    out["regressor"] = _release(stack, root, regressor)
    return out


@pytest.fixture(scope="module")
def browser():  # noqa: ANN201
    with PageBrowser(width=1280, height=900) as b:
        yield b


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:  # noqa: ANN001
    return tmp_path_factory.mktemp("shots")


def _shot(shots: Path, name: str) -> Path:
    return shots / f"{name}.png"


def _keep(png: Path) -> None:
    target = os.environ.get("MODEL_RELEASE_SHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for p in (png, png.with_name(png.stem + "-full.png")):
            shutil.copy(p, Path(target) / p.name)


def _clean(facts: PageFacts) -> None:
    """What every page must be: quiet, self-contained, every plot drawn with a size, no page-wide scroll."""
    assert facts.console_errors == [], facts.console_errors
    assert facts.outside_requests == [], facts.outside_requests
    assert facts.plots, "no plot on the page"
    for plot in facts.plots:
        assert plot["width"] > 50 and plot["height"] > 50, plot
    assert facts.scroll_width <= facts.inner_width, "a table or plot makes the whole page scroll sideways"


#: per case: plots that must be drawn, and plots whose place must say why they are missing (with what it says)
EXPECTED = {
    "first": ({"confusion-candidate", "per-class", "predicted", "reliability", "latency-cdf", "parity-probabilities"},
              {"confusion-champion": "No champion", "confusion-agreement": "No champion", "tuning": "tuning was off"}),
    "passing": ({"confusion-candidate", "confusion-champion", "per-class", "confusion-agreement", "predicted", "reliability",
                 "latency-cdf", "parity-probabilities"}, {"tuning": "tuning was off"}),
    "blocked": ({"confusion-candidate", "confusion-champion", "per-class", "confusion-agreement", "predicted", "reliability",
                 "latency-cdf", "parity-probabilities"}, {"tuning": "tuning was off"}),
    "regressor": ({"residuals", "predicted", "latency-cdf", "parity-variable"},
                  {"reliability": "No class scores: a regressor", "tuning": "tuning was off"}),
}
#: per case: what the paired sections say (the flips' place, the per-class table's), from report.json's quality.paired
PAIRED = {"first": ("No champion", "No champion"), "passing": ("Flips:", "Per class"), "blocked": ("Flips:", "Per class"),
          "regressor": ("No flips for a regressor", "No classes for a regressor")}


@pytest.mark.parametrize("case", list(EXPECTED))
def test_the_report_renders_in_chromium_decision_first_with_every_plot(case, runs, browser, shots) -> None:
    ws: Workspace = runs[case]
    report = json.loads((ws.path / "canary" / "report.json").read_text())
    png = _shot(shots, f"report-{case}")
    facts = browser.check(ws.path / "canary" / "report.html", png)
    _keep(png)
    _clean(facts)
    drawn, missing = EXPECTED[case]
    assert set(facts.drawn()) == drawn, facts.drawn()
    placeholders = facts.placeholders()
    assert set(placeholders) == set(missing), placeholders
    for plot, says in missing.items():
        assert placeholders[plot].startswith(says), (plot, placeholders[plot])
    # the decision fits the first screen: verdict, every gate, acknowledgements, reasons
    assert facts.header_bottom is not None and facts.header_bottom <= facts.inner_height, facts.header_bottom
    first_screen = facts.text[: facts.text.index("Quality on ground truth")]
    assert ("PASSED" in first_screen) is report["passed"] and ("REJECTED" in first_screen) is (not report["passed"])
    for gate in report["gates"]:
        assert gate["name"] in first_screen
    assert png.stat().st_size > 10_000
    start = facts.text.index("Row by row against the champion")
    paired = facts.text[start: facts.text.index("Latency", start)]
    flips, classes = PAIRED[case]
    assert flips in paired and classes in paired, paired
    if case in ("passing", "blocked"):  # the flips' and the per-class table's figures are report.json's
        f, table = report["quality"]["paired"]["flips"], report["quality"]["paired"]["classes"]
        assert f"{f['negative']} of {f['rows']} rows the champion got right are now wrong, {f['positive']} now right" in paired
        gated = sum(1 for r in table if r.get("recall_outcome") or r.get("precision_outcome"))
        assert f"{len(table)} classes, {gated} gated" in paired, paired
    if case == "blocked":
        assert "✗ failed\tquality.accuracy" in first_screen and "Why it was rejected" in first_screen
    if case == "regressor":  # its channel's first release: residuals of the candidate alone
        assert report["champion"]["kind"] == "none" and report["passed"], report["reasons"]
        assert report["plots"]["residuals"]["champion"] is None
        assert len(report["plots"]["residuals"]["candidate"]) == len(report["plots"]["residuals"]["target"])


def test_the_channel_history_page_lists_the_promotions_the_rejection_and_the_rollback_in_order(
        stack, runs, browser, shots, tmp_path) -> None:  # noqa: ANN001
    view = StoreView(stack, PREFIX)
    blocked = runs["blocked"].release_id
    assert sorted(view.keys(f"rejected/{blocked}/")) == [f"rejected/{blocked}/rejected.json", f"rejected/{blocked}/reports/report.html",
                                                         f"rejected/{blocked}/reports/report.json"]  # no model
    copy = tmp_path / "store"  # the store as an auditor downloads it: the page's links are relative
    for key in view.keys():
        if key.startswith(("channels/", "rejected/")) or "/reports/" in key:
            (copy / key).parent.mkdir(parents=True, exist_ok=True)
            (copy / key).write_bytes(view.get(key))
    png = _shot(shots, "channel-production")
    facts = browser.check(copy / "channels" / "production.html", png)
    _keep(png)
    _clean(facts)
    assert facts.drawn() == ["channel-figures"]
    first, passing = runs["first"].release_id, runs["passing"].release_id
    assert facts.rows == [["promote", first], ["promote", passing], ["rejected", blocked], ["rollback", first]], facts.rows
    assert f"Now serving: {first}" in facts.text
    assert all((copy / "channels" / link).resolve().is_file() for link in facts.links) and len(facts.links) == 4
    stored = json.loads(view.get(f"rejected/{blocked}/reports/report.json"))
    assert stored["passed"] is False and any("[canary.quality.accuracy]" in r for r in stored["reasons"])


def test_the_report_is_an_artifact_of_the_candidates_evaluation_run(stack, runs, tmp_path) -> None:  # noqa: ANN001
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=stack.tracking_uri)
    version = client.get_model_version(MODEL, runs["blocked_version"])
    run_id = version.tags["model_release.canary_run_id"]
    assert sorted(a.path for a in client.list_artifacts(run_id, "canary")) == ["canary/report.html", "canary/report.json"]
    local = client.download_artifacts(run_id, "canary/report.html", str(tmp_path))
    assert Path(local).read_bytes() == (runs["blocked"].path / "canary" / "report.html").read_bytes()


def test_model_release_report_prints_the_decision_of_real_reports(runs, capsys) -> None:
    assert main(["report", str(runs["blocked"].path / "canary")]) == 3
    out = capsys.readouterr().out
    assert out.startswith("REJECTED") and "\033[" not in out
    assert any(line.startswith("✗ quality.accuracy") and "0.82" in line for line in out.splitlines()), out
    assert main(["report", str(runs["passing"].path / "canary" / "report.json")]) == 0
    out = capsys.readouterr().out  # what the README's session shows for version 2
    assert out.startswith("PASSED") and f"judged against release {runs['first'].release_id} (" in out and "(served)" in out, out
