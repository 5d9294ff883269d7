"""The canary stage: serve the candidate beside the production champion and judge the model as served.

With ``remote`` (a canary Triton started separately, sharing no disk) the models are delivered
by :mod:`.remote`: pushed through the load API, or staged in the server's object-store repository
for ensembles, and taken back afterwards. On the embedded setup (``endpoint=None``) the assembled repository is copied to
``<workspace>/canary/repository`` with every ONNX leaf shimmed (:mod:`.shim`) and served by a
:class:`~model_release.triton.local.LocalTriton` started for this run. With an ``endpoint`` the
canary uses that Triton as it is: it must run in explicit model-control mode with the assembled
repository as (one of) its model repositories; models are loaded by name and unloaded afterwards.
Either way the champion (:mod:`.champion`) is pushed to the same server through the load API
under its own model names, and the same golden rows are replayed through both.

Phases: :func:`_serve_and_replay` (server, load, replay both), :func:`_judge` (every gate on the
served outputs, :mod:`.gates`), :func:`_close` (the reports and the result). Everything found goes
into one typed :class:`~.report.CanaryReport`.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CanaryRejected, UserError
from ..metrics import CLASSIFICATION, REGRESSION
from ..provenance import trigger
from ..roles import LABEL, VARIABLE
from ..spec import DEFAULT_MIN_GOLDEN_ROWS, ReleaseSpec
from ..types import AssembleResult, CanaryResult, ExportResult, IntakeResult
from ..workspace import Workspace
from . import compare as cmp
from . import gates as gt
from . import plotdata as pd
from . import quality as q
from .champion import NATIVE, NONE, SERVED, Champion
from ..triton.client import ReplayResult, TritonHttpClient, replay
from .contract import breaks, contract_of
from .load import paired_ratios as load_paired
from .report import CanaryReport, verdict, write_reports
from ..triton.delivery import Delivery, RemoteCanary, check_plans
from ..triton.server import CanaryServer
from ..triton.shim import prepare_canary_repository

log = logging.getLogger(__name__)

#: finds the champion, given a folder to fetch it into
ChampionFinder = Callable[[Path], Champion]
#: records the verdict elsewhere (MLflow); returns what to keep in the report. One with an
#: ``attach(report, [html, json])`` method is also given the written report files.
Recorder = Callable[[CanaryReport], dict[str, Any]]


@dataclass
class _Replays:
    candidate: ReplayResult
    champion: ReplayResult | None = None
    champion_skipped: str | None = None
    #: the load phase's figures of ``candidate`` and (when replayed) ``champion``
    load: dict[str, dict[str, Any]] | None = None


@dataclass
class _Golden:
    inputs: dict[str, np.ndarray]
    reference: dict[str, np.ndarray]
    truth: np.ndarray | None = None
    rows: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _load_npz(path: str, what: str) -> dict[str, np.ndarray]:
    if not path or not Path(path).is_file():
        raise CanaryRejected(f"the {what} {path!r} does not exist; re-run the export stage")
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


@contextlib.contextmanager
def _triton(spec: ReleaseSpec, assembled: AssembleResult, folder: Path, endpoint: str | None,
            champion: Champion, remote: RemoteCanary | None = None,
            ) -> Iterator[tuple[str, dict[str, Any], Callable[[], str | None]]]:
    """Yield (url, server facts, alive): a LocalTriton on a shimmed copy (the champion's models beside
    the candidate's), the remote canary (models delivered by :mod:`.remote`), or the given endpoint.
    ``alive()`` is None while the server runs, else why not."""
    if remote is not None:
        yield remote.url.removeprefix("http://"), {
            "mode": "remote", "url": remote.url, "description": remote.describe(), "shimmed_models": [],
            "repository": remote.repository or "none (models pushed through the load API)",
        }, lambda: None
        return
    if endpoint is not None:
        yield endpoint.removeprefix("http://"), {
            "mode": "endpoint", "url": endpoint, "description": "remote Triton, backends as deployed", "shimmed_models": [],
            "repository": "the endpoint's own model repository",
        }, lambda: None
        return
    from ..triton.local import LocalTriton

    copy = prepare_canary_repository(Path(assembled.repository_dir), folder / "repository")
    if champion.kind == SERVED and champion.repository is not None:
        # in the server's own repository, not pushed: Triton 2.51 loads an ensemble only when its steps
        # are in a repository it polls (models pushed through the load API are not)
        theirs = prepare_canary_repository(champion.repository, folder / "champion" / "served")
        for model in sorted(p for p in theirs.path.iterdir() if p.is_dir()):
            shutil.move(str(model), copy.path / model.name)
        copy.shimmed += theirs.shimmed
    facts = {
        "mode": "local", "description": copy.description, "shimmed_models": copy.shimmed,
        "repository": str(copy.path), "log": str(folder / "tritonserver.log"),
    }
    # the server's own files go to a temporary folder; only its log stays, beside the report
    with LocalTriton(copy.path, log_path=folder / "tritonserver.log", ready_timeout=spec.canary.ready_timeout_s) as triton:
        facts["url"] = triton.http_url

        def alive() -> str | None:
            code = triton.process.poll() if triton.process is not None else None
            return None if code is None else f"the canary Triton exited with code {code}"

        yield triton.http_url, facts, alive


def run_canary(
    spec: ReleaseSpec,
    intake: IntakeResult,
    export: ExportResult,
    assembled: AssembleResult,
    ws: Workspace,
    *,
    endpoint: str | None = None,
    find_champion: ChampionFinder | None = None,
    record: Recorder | None = None,
    remote: RemoteCanary | None = None,
    open_store: Callable[[str], Any] | None = None,
) -> CanaryResult:
    """Run the canary gate on an assembled repository and write its report.

    Args:
        spec: the release spec (``spec.canary`` holds the gates).
        intake: the model version (lineage).
        export: where the golden set, its ground truth and the native reference are.
        assembled: the repository, its entry model, load order and how to read its outputs.
        ws: the release workspace; the report goes to ``ws.stage_dir("canary")``.
        endpoint: ``host:port`` of a running Triton to use instead of a local one.
        find_champion: finds the production champion (given a folder to fetch it into); None judges
            the candidate alone (the change gates are skipped, and the report says so).
        record: called with the closed report (pass or reject), e.g. to log the served metrics to MLflow.
        remote: a canary Triton started separately that shares no disk (:mod:`.remote`); takes the place
            of ``endpoint``. ``open_store`` opens its object-store repository with the task's credentials.

    Returns:
        The verdict, the report paths, the figures and the champion it was judged against.

    Raises:
        CanaryRejected: a model failed to load, or a gate failed; the reports are written first, the
            message names each failed gate with the candidate's figure, the champion's and the limit,
            and the error carries the rejected result (``.result``).
        ServiceUnavailable: the Triton, or the store holding the champion, could not be reached.
        GpuUnavailable: the repository holds a model the local CPU Triton cannot serve (a TensorRT plan).
    """
    folder = ws.stage_dir("canary", fresh=True)
    t0 = time.perf_counter()
    report = CanaryReport(
        release_id=ws.release_id, release=spec.name,
        model={"name": intake.model_name, "version": intake.version, "alias": intake.alias, "run_id": intake.run_id},
        entry_model=assembled.entry_model, source_repository=assembled.repository_dir,
        started_at=datetime.now(timezone.utc).isoformat(), trigger=trigger(),
    )
    golden = _golden(spec, export, report)
    report.acknowledgements = _acknowledgements(spec)
    champion = find_champion(folder / "champion") if find_champion else Champion(
        NONE, spec.promote.channel, reason="the canary ran without a champion finder (no store or MLflow given)")
    report.champion = champion.describe()
    try:
        replays = _serve_and_replay(spec, assembled, export, golden, champion, folder, endpoint, report, remote, open_store)
        passed, reasons = _judge(spec, assembled, golden, replays, champion, report)
    except UserError as exc:  # the candidate's (or the spec's) fault: the report says why before the error goes up
        if report.closed:
            raise
        result = _close(report, folder, False, [exc.message], t0, champion, record)
        if isinstance(exc, CanaryRejected):
            raise CanaryRejected(f"{exc.message} The report is at {result.report_json}.", result=result) from None
        raise exc.restated(f"{exc.message}. The report is at {result.report_json}.") from None
    result = _close(report, folder, passed, reasons, t0, champion, record)
    if not passed:
        raise CanaryRejected(
            f"the canary of {spec.name} ({ws.release_id}) was rejected: " + "; ".join(reasons)
            + f". The report is at {result.report_json} ({result.report_html}).",
            result=result,
        )
    return result


def _golden(spec: ReleaseSpec, export: ExportResult, report: CanaryReport) -> _Golden:
    inputs = _load_npz(export.golden_path, "golden set")
    reference = _load_npz(export.reference_path, "native reference")
    truth = _load_npz(export.truth_path, "ground truth")["target"] if export.truth_path else None
    rows = int(len(next(iter(inputs.values())))) if inputs else 0
    report.golden = {
        "path": export.golden_path, "reference": export.reference_path, "inputs": sorted(inputs), "rows": rows,
        "target": spec.golden.target, "truth": export.truth_path or None, "min_rows": spec.golden.min_rows,
        "min_rows_lowered": spec.golden.min_rows < DEFAULT_MIN_GOLDEN_ROWS,
    }
    if spec.golden.min_rows < DEFAULT_MIN_GOLDEN_ROWS:
        report.golden["note"] = (f"golden.min_rows is {spec.golden.min_rows}, below the default {DEFAULT_MIN_GOLDEN_ROWS}: "
                                 "an explicit choice of the spec")
    return _Golden(inputs, reference, truth, rows)


def _acknowledgements(spec: ReleaseSpec) -> list[dict[str, Any]]:
    """What the spec says it accepts on purpose, for the top of the report."""
    out = []
    if spec.promote.breaking_change:
        out.append({"setting": "promote.breaking_change", "text": spec.promote.breaking_change,
                    "meaning": "an interface break against the champion is acknowledged (recorded in the manifest)"})
    if spec.golden.min_rows < DEFAULT_MIN_GOLDEN_ROWS:
        out.append({"setting": "golden.min_rows", "text": str(spec.golden.min_rows),
                    "meaning": f"golden sets smaller than the default minimum of {DEFAULT_MIN_GOLDEN_ROWS} rows are accepted"})
    return out


def _serve_and_replay(
    spec: ReleaseSpec, assembled: AssembleResult, export: ExportResult, golden: _Golden, champion: Champion,
    folder: Path, endpoint: str | None, report: CanaryReport, remote: RemoteCanary | None = None,
    open_store: Callable[[str], Any] | None = None,
) -> _Replays:
    """Start (or reach) the Triton, load candidate and champion in dependency order, replay both."""
    order = list(assembled.load_order)
    if assembled.entry_model not in order:
        order.append(assembled.entry_model)
    with _triton(spec, assembled, folder, endpoint, champion, remote) as (url, server_facts, alive):
        report.server = server_facts
        server = CanaryServer(url, ready_timeout=spec.canary.ready_timeout_s)
        pushed: list[str] = []
        delivery = Delivery(server, remote, open_store or _no_store, folder / "delivered") if remote is not None else None
        try:
            meta = server.metadata()
            server_facts.update({"name": meta.get("name"), "version": meta.get("version")})
            report.load = {"order": order}
            if delivery is not None:  # a plan the canary cannot run is refused before anything loads
                check_plans(Path(assembled.repository_dir), order, _manifest(assembled.manifest_path).get("tensorrt"),
                            delivery.canary, whose="the candidate")
                if champion.kind == SERVED and champion.repository is not None:
                    check_plans(champion.repository, champion.load_order, (champion.manifest or {}).get("tensorrt"),
                                delivery.canary, whose=f"the champion {champion.name}")
                delivery.clear()
                loaded = delivery.load(delivery.prepare(Path(assembled.repository_dir), "candidate"), order)
            else:
                loaded = server.load(order)
            report.load = {"order": loaded.order, "versions": loaded.versions, "seconds": loaded.seconds}
            server_facts["models_loaded"] = dict(loaded.versions)
            candidate = _replay_entry(spec, server, url, assembled.entry_model, golden, export, report)
            replays = _Replays(candidate)
            if champion.kind == SERVED:
                pushed = champion.load_order
                replays.champion, replays.champion_skipped = _replay_champion(
                    spec, server, url, champion, golden, endpoint, report, delivery)
            if spec.canary.load.enabled:
                replays.load = _under_load(spec, server, url, assembled, champion, replays, golden, folder, alive, report)
            return replays
        finally:
            if delivery is not None:
                server_facts.update(delivery.facts(), cleanup=delivery.close())
            elif alive() is None:  # a dead server (its stubs may still hold the sockets) is not asked anything
                if endpoint is not None:
                    server.unload(order)
                server.unload(pushed)
            server.close()


def _no_store(uri: str) -> Any:
    from ..store import open_store

    return open_store(uri)


def _manifest(path: str) -> dict[str, Any]:
    import json

    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}


def _replay_entry(spec: ReleaseSpec, server: CanaryServer, url: str, name: str, golden: _Golden, export: ExportResult,
                  report: CanaryReport) -> ReplayResult:
    entry = server.entry(name)
    batch_rows = min(spec.canary.batch_rows, entry.max_batch_size) if entry.max_batch_size > 0 else spec.canary.batch_rows
    report.golden.update({
        "batch_rows": batch_rows, "batch_rows_requested": spec.canary.batch_rows, "entry_max_batch_size": entry.max_batch_size,
    })
    missing = sorted(set(entry.inputs) - set(golden.inputs))
    if missing:
        raise CanaryRejected(
            f'entry model "{entry.name}" takes inputs {missing} that the golden set {export.golden_path!r} lacks '
            f"(it has {sorted(golden.inputs)}); the golden set must be keyed by the entry model's input names"
        )
    return replay(
        {k: golden.inputs[k] for k in entry.inputs},
        lambda: TritonHttpClient(url, entry.name, entry.inputs, list(entry.outputs)),
        batch_rows=batch_rows, concurrency=spec.canary.concurrency,
    )


def _replay_champion(
    spec: ReleaseSpec, server: CanaryServer, url: str, champion: Champion, golden: _Golden,
    endpoint: str | None, report: CanaryReport, delivery: Delivery | None = None,
) -> tuple[ReplayResult | None, str | None]:
    """Load the champion beside the candidate and replay the same rows through it.

    On the local Triton its (shimmed) models sit in the server's repository already; a remote
    endpoint gets them pushed through the load API.
    """
    assert champion.repository is not None
    try:
        if delivery is not None:
            loaded = delivery.load(delivery.prepare(champion.repository, "champion"), champion.load_order)
        else:
            loaded = server.load(champion.load_order) if endpoint is None else server.push(champion.repository, champion.load_order)
    except CanaryRejected as exc:  # not the candidate's fault, but nothing unjudged ships
        raise CanaryRejected(
            f"the production champion {champion.name} could not be loaded beside the candidate, so the candidate "
            f"cannot be judged against it: {exc.message.split('. Fix the model')[0]}. On a remote canary, an ensemble "
            "champion needs its steps in a repository the server polls (Triton does not load an ensemble over models "
            "pushed through its load API); run the canary on the embedded Triton, or make the champion's release "
            "visible to the canary's repository"
        ) from None
    report.server.setdefault("models_loaded", {}).update(loaded.versions)
    report.champion = {**(report.champion or {}), "load_seconds": loaded.seconds}
    entry = server.entry(champion.entry)
    unfit = _unfit_inputs(champion, golden)
    if unfit:
        return None, f"its entry model's inputs do not fit this release's golden set ({'; '.join(unfit)})"
    batch_rows = min(spec.canary.batch_rows, entry.max_batch_size) if entry.max_batch_size > 0 else spec.canary.batch_rows
    result = replay({k: golden.inputs[k] for k in entry.inputs},
                    lambda: TritonHttpClient(url, entry.name, entry.inputs, list(entry.outputs)),
                    batch_rows=batch_rows, concurrency=spec.canary.concurrency)
    return result, None


def _under_load(spec: ReleaseSpec, server: CanaryServer, url: str, assembled: AssembleResult, champion: Champion,
                replays: _Replays, golden: _Golden, folder: Path, alive: Callable[[], str | None],
                report: CanaryReport) -> dict[str, dict[str, Any]]:
    """Tune (when asked), then the load phase: candidate and champion in alternating windows."""
    from . import latency

    entries = {latency.CANDIDATE: server.entry(assembled.entry_model)}
    if replays.champion is not None:
        entries[latency.CHAMPION] = server.entry(champion.entry)
    runner = latency.load_runner(url, server, entries, golden.inputs, spec.canary.load, alive=alive)
    try:
        if spec.canary.tune.enabled:
            from .tune import tune

            report.tuning = tune(spec, server, runner, assembled, folder, champion_target=latency.CHAMPION in entries)
        measured = latency.load_phase(runner, list(entries), spec.canary.load, progress=lambda line: log.info("canary: %s", line))
    finally:
        runner.close()
    gone = alive()
    if gone is not None:
        raise CanaryRejected(f"{gone} during the load phase (the candidate was being served); nothing after it was "
                             f"judged. The server log is {report.server.get('log')}")
    used = spec.canary.load.stable_windows
    figures = {t: m.figures(used) for t, m in measured.items()}
    report.plots["latency"] = {"source": "load phase", **{t: pd.latency_buckets(m.merged(used)) for t, m in measured.items()}}
    if latency.CHAMPION in measured:
        figures["paired"] = load_paired(measured[latency.CANDIDATE], measured[latency.CHAMPION])
    calls = {**assembled.calls, **(champion.calls if replays.champion is not None else {})}
    report.load_phase = {
        "concurrency": spec.canary.load.concurrency, "batch_rows": spec.canary.load.batch_rows,
        "window_s": spec.canary.load.window_s, "budget_s": spec.canary.load.budget_s,
        "note": ("measured on the embedded CPU Triton through the python-backend onnxruntime shim: these figures are "
                 "the shim's, not a GPU Triton's" if report.server.get("mode") == "local" else "measured on the endpoint"),
        **{t: {**figures[t], "windows": [w.summary() for w in measured[t].windows],
               "models": latency.where_time_goes(measured[t], used, calls)} for t in measured},
        "paired": figures.get("paired"),
    }
    return figures


def _unfit_inputs(champion: Champion, golden: _Golden) -> list[str]:
    """The champion's inputs this golden set cannot feed (missing, or of other dims): it is then not replayed."""
    unfit = []
    for name, (_, dims) in (champion.contract.inputs if champion.contract else {}).items():
        array = golden.inputs.get(name)
        if array is None:
            unfit.append(f"no input {name!r}")
        elif len(array.shape[1:]) != len(dims) or any(d not in (-1, g) for d, g in zip(dims, array.shape[1:])):
            unfit.append(f"input {name!r} is {list(dims)} per row, the golden set has {list(array.shape[1:])}")
    return unfit


def _judge(spec: ReleaseSpec, assembled: AssembleResult, golden: _Golden, replays: _Replays, champion: Champion,
           report: CanaryReport) -> tuple[bool, list[str]]:
    """Every gate on the served outputs; fills the report's sections and returns the verdict."""
    interface = cmp.Interface.of(assembled)
    served = replays.candidate.outputs
    parity, unmatched = cmp.compare_with_reference(
        interface, spec.canary.tolerances, spec.canary.min_label_agreement, golden.reference, served,
    )
    report.parity, report.not_compared = parity.to_dict(), unmatched
    report.plots["parity_errors"] = _parity_errors(spec, interface, golden, served)
    timing = replays.candidate.timing()
    report.timing = timing
    expectations = _expectations(spec, interface, served, report)
    champion_outputs, why_not = _champion_outputs(champion, replays)
    if replays.champion is not None:
        report.champion_timing = replays.champion.timing()
    if replays.load is None:  # no load phase: the latency plot shows the replay's requests
        report.plots["latency"] = {"source": "replay", "candidate": pd.latency_buckets(pd.histogram_of(replays.candidate.latencies_ms)),
                                   **({"champion": pd.latency_buckets(pd.histogram_of(replays.champion.latencies_ms))}
                                      if replays.champion is not None else {})}
    gates = [
        _contract(spec, assembled, champion),
        gt.nonfinite_gate(q.nonfinite_rows(served), golden.rows),
        *_quality(spec, interface, served, golden, champion, champion_outputs, report),
        *_likeness(spec, interface, served, champion, champion_outputs, why_not, report),
    ]
    replay_slo = None  # the SLO is judged on the load phase; on the replay's burst only when there is none
    if replays.load is not None:
        gates += gt.load_gates(spec, replays.load["candidate"], replays.load.get("champion"), champion.name,
                               why_not or "the champion was not served beside the candidate", replays.load.get("paired"))
        p99 = replays.load["candidate"]["p99_ms"]
    else:
        replay_slo, p99 = spec.canary.p99_ms, timing["p99_ms"]
    report.slo = {"p99_ms_limit": spec.canary.p99_ms, "p99_ms": p99, "measured_by": "load phase" if replays.load else "replay",
                  "passed": spec.canary.p99_ms is None or p99 <= spec.canary.p99_ms}
    report.gates = [g.to_dict() for g in gates]
    _, reasons = verdict(parity, timing, replay_slo, expectations)
    reasons += [g.reason for g in gates if g.failed]
    return not reasons, reasons


def _expectations(spec: ReleaseSpec, interface: cmp.Interface, served: dict[str, np.ndarray], report: CanaryReport) -> dict[str, Any] | None:
    if not spec.canary.expectations:
        report.expectations = {"skipped": "canary.expectations is false in the release spec"}
        return None
    from .expect import run_expectations

    report.expectations = run_expectations(dict(served), classifier=interface.names_labels,
                                           label_set=interface.label_set() if interface.names_labels else None)
    return report.expectations


def _champion_outputs(champion: Champion, replays: _Replays) -> tuple[dict[str, np.ndarray] | None, str]:
    """The champion's answers on the golden rows, or why there are none."""
    if champion.kind == SERVED:
        if replays.champion is None:
            return None, f"the champion {champion.name} was not replayed: {replays.champion_skipped}"
        return replays.champion.outputs, ""
    if champion.kind == NATIVE and champion.outputs is not None:
        return champion.outputs, ""
    return None, champion.reason or "no champion"


def _contract(spec: ReleaseSpec, assembled: AssembleResult, champion: Champion) -> gt.Gate:
    if champion.contract is None:
        return gt.contract_gate(spec, None, champion.name)
    mine = contract_of(assembled.repository_dir, assembled.entry_model, assembled.labels if LABEL in assembled.roles else None)
    if champion.kind == NATIVE:  # a native champion's contract is its signature: compare inputs and classes
        mine = type(mine)(entry=mine.entry, inputs=mine.inputs, outputs={}, max_batch_size=None,
                          labels=[str(c) for c in assembled.classes] if assembled.classes is not None else None)
    found = breaks(champion.contract, mine, outputs=champion.kind == SERVED)
    return gt.contract_gate(spec, found, champion.name)


def _quality(spec: ReleaseSpec, interface: cmp.Interface, served: dict[str, np.ndarray], golden: _Golden,
             champion: Champion, champion_outputs: dict[str, np.ndarray] | None, report: CanaryReport) -> list[gt.Gate]:
    task = q.task_of(interface)
    if golden.truth is None or task is None:
        why = ("no ground truth: golden.target is not set" if golden.truth is None
               else "no output plays the role of a label, class scores or a prediction")
        report.quality = {"skipped": why}
        return [gt.skipped("quality", "golden.target", why)]
    mine = q.served_metrics(interface, served, golden.truth, "the candidate")
    theirs = None
    native_names = champion.kind == NATIVE and champion.interface.classes == interface.classes
    if champion_outputs is not None and q.task_of(champion.interface) == task:
        names = interface.labels if native_names else None
        theirs = q.served_metrics(champion.interface, champion_outputs, golden.truth, f"the champion {champion.name}", target_names=names)
    _quality_plots(interface, served, golden, champion, champion_outputs if theirs is not None else None, native_names, report)
    report.quality = {"task": task, "target": spec.golden.target, "rows": golden.rows, "candidate": mine, "champion": theirs,
                      "champion_name": champion.name if theirs is not None else None}
    return gt.quality_gates(spec, task, mine, theirs, champion.name or "none")


def _quality_plots(interface: cmp.Interface, served: dict[str, np.ndarray], golden: _Golden, champion: Champion,
                   champion_outputs: dict[str, np.ndarray] | None, native_names: bool, report: CanaryReport) -> None:
    """The plots' data on ground truth: confusion and per-class figures, or a regressor's residuals."""
    if q.task_of(interface) == REGRESSION:
        theirs = champion_outputs[champion.interface.roles[VARIABLE]] if champion_outputs is not None else None
        report.plots["residuals"] = pd.residual_sample(golden.truth, served[interface.roles[VARIABLE]], theirs)
        return
    names = interface.class_names() if native_names and champion.kind == NATIVE else None
    theirs = (q.classify(champion.interface, champion_outputs, golden.truth, "the champion", target_names=interface.labels if names else None)
              if champion_outputs is not None else None)
    report.plots["classes"] = pd.classes_section(q.classify(interface, served, golden.truth, "the candidate"), theirs,
                                                 champion_names=names)


def _parity_errors(spec: ReleaseSpec, interface: cmp.Interface, golden: _Golden, served: dict[str, np.ndarray]) -> dict[str, Any]:
    """Per numeric output, the histogram of |served - native| (labels are compared by agreement: none)."""
    expected, answered, labels, _ = cmp.comparable(interface, spec.canary.min_label_agreement, golden.reference, served)
    return {name: pd.parity_errors(expected[name], answered[name], atol=spec.canary.tolerances.for_output(name).atol,
                                   rtol=spec.canary.tolerances.for_output(name).rtol)
            for name in expected if name not in labels}


def _likeness(spec: ReleaseSpec, interface: cmp.Interface, served: dict[str, np.ndarray], champion: Champion,
              champion_outputs: dict[str, np.ndarray] | None, why_not: str, report: CanaryReport) -> list[gt.Gate]:
    """Agreement and distribution shift against the champion (no ground truth needed)."""
    task = q.task_of(interface)
    shift = None
    if task == CLASSIFICATION:
        if champion_outputs is not None and LABEL in champion.interface.roles and LABEL in interface.roles:
            mine, theirs = served[interface.roles[LABEL]], champion_outputs[champion.interface.roles[LABEL]]
            if champion.kind == NATIVE:  # compare class values: a native champion has no label names
                mine = q.class_values(interface, mine)
            shift = q.label_shift(mine, theirs)
            report.plots.update(pd.agreement_section(mine, theirs, _class_order(interface, native=champion.kind == NATIVE)))
        else:
            report.plots.update(pd.agreement_section(served[interface.roles[LABEL]], None, _class_order(interface))
                                if LABEL in interface.roles else {})
        report.shift = shift or {"skipped": why_not}
        return gt.agreement_gates(spec, shift, champion.name, why_not)
    if task == REGRESSION:
        if champion_outputs is not None and VARIABLE in champion.interface.roles:
            shift = q.numeric_shift(served[interface.roles[VARIABLE]], champion_outputs[champion.interface.roles[VARIABLE]])
        report.plots["predicted"] = pd.numeric_histograms(
            served[interface.roles[VARIABLE]], champion_outputs[champion.interface.roles[VARIABLE]] if shift else None)
        report.shift = shift or {"skipped": why_not}
        return [gt.ks_gate(spec, shift, champion.name, why_not)]
    report.shift = {"skipped": "no output plays the role of a label or a prediction"}
    return []


def _class_order(interface: cmp.Interface, *, native: bool = False) -> list[str]:
    """The candidate's classes as its label output answers them (class values when compared with a native champion)."""
    if native or not interface.names_labels:
        return [str(c) for c in interface.classes] if interface.classes is not None else []
    return list(interface.labels or [])


def _close(report: CanaryReport, folder: Path, passed: bool, reasons: list[str], t0: float, champion: Champion,
           record: Recorder | None) -> CanaryResult:
    """Set the verdict, record it elsewhere, write report.json and report.html, and return the stage's result."""
    report.close(passed, reasons, datetime.now(timezone.utc).isoformat(), time.perf_counter() - t0)
    if record is not None:
        report.recorded = record(report)
    json_path, html_path = write_reports(folder, report)
    attach = getattr(record, "attach", None)  # a recorder that keeps artifacts (MLflow) gets the written report
    if attach is not None:
        attach(report, [html_path, json_path])
    return CanaryResult(passed=passed, report_json=str(json_path), report_html=str(html_path), summary=report.summary(),
                        figures=report.figures(), server=report.server, champion_release=champion.release_id,
                        champion_kind=champion.kind, champion_pinned=champion.pinned,
                        repository_dir=(report.tuning or {}).get("repository"))
