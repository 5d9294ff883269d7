"""Serving both models: the candidate and the production champion on one Triton, the golden rows replayed through each.

With ``remote`` (a canary Triton started separately, sharing no disk) the models are delivered
by :mod:`model_release.triton.delivery`: pushed through the load API, or staged in the server's
object-store repository for ensembles, and taken back afterwards. On the embedded setup
(``endpoint=None``) the assembled repository is copied to ``<workspace>/canary/repository`` with
every ONNX leaf shimmed (:mod:`model_release.triton.shim`) and served by a
:class:`~model_release.triton.local.LocalTriton` started for this run. With an ``endpoint`` the
canary uses that Triton as it is: it must run in explicit model-control mode with the assembled
repository as (one of) its model repositories; models are loaded by name and unloaded afterwards.
Either way the champion (:mod:`.champion`) is pushed to the same server through the load API
under its own model names, and the same golden rows are replayed through both. The load phase
(:mod:`.measure.phase`) runs while both are served.

great_expectations costs seconds to import (once per process); the expectation suite needs it only
after serving, and only with ``canary.expectations_engine: great_expectations`` (the default native
engine needs no import). It is then imported in a background thread while the Triton starts and the
models load (:func:`prefetch`), and waited for before the first replayed request, so nothing timed
shares the CPU with it; the suite's own ``import great_expectations`` then finds it in place.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import shutil
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CanaryRejected
from ..model.golden import SLICE_PREFIX
from ..spec import DEFAULT_MIN_GOLDEN_ROWS, ReleaseSpec
from ..triton.client import ReplayResult, TritonHttpClient, replay
from ..triton.delivery import Delivery, RemoteCanary, check_plans
from ..triton.server import TritonServer
from ..triton.shim import auto_complete_needed, prepare_canary_repository
from ..types import AssembleResult, ExportResult
from .champion import SERVED, Champion
from .footprint import footprint, memory_in_use
from .measure.phase import under_load
from .report.document import CanaryReport
from .served import Golden, Replays

log = logging.getLogger(__name__)
#: imported in the background while the canary's server starts when the great_expectations engine judges
PREFETCH = ("great_expectations",)


def prefetch(modules: tuple[str, ...] = PREFETCH) -> threading.Thread | None:
    """Import ``modules`` (those not imported yet) in a daemon thread; join it before timing anything.

    A failure is only logged at DEBUG: the judging's own import raises it where it belongs.
    """
    todo = [m for m in modules if m not in sys.modules]
    if not todo:
        return None

    def run() -> None:
        for module in todo:
            try:
                importlib.import_module(module)
            except Exception as exc:  # noqa: BLE001 - the real import, in judging, reports it
                log.debug("canary: importing %s ahead failed: %s", module, exc)

    thread = threading.Thread(target=run, name="canary-prefetch", daemon=True)
    thread.start()
    return thread


def _load_npz(path: str, what: str) -> dict[str, np.ndarray]:
    if not path or not Path(path).is_file():
        raise CanaryRejected(f"the {what} {path!r} does not exist; re-run the export stage")
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def load_golden(spec: ReleaseSpec, export: ExportResult, report: CanaryReport) -> Golden:
    inputs = _load_npz(export.golden_path, "golden set")
    composed = export.composed_reference or {}  # a cascade's or fan-out's members composed as it composes them
    reference_path = composed.get("path") or export.reference_path
    reference = _load_npz(reference_path, "composed reference" if composed else "native reference")
    written = _load_npz(export.truth_path, "ground truth") if export.truth_path else {}
    truth = written.get("target")
    slices = {column: written[SLICE_PREFIX + column] for column in spec.golden.slices if SLICE_PREFIX + column in written}
    missing = [c for c in spec.golden.slices if c not in slices]
    if missing and export.truth_path:
        raise CanaryRejected(f"the ground truth {export.truth_path!r} holds no golden.slices column {missing}: it was "
                             "written before the spec named them; re-run the export stage")
    rows = int(len(next(iter(inputs.values())))) if inputs else 0
    report.golden = {
        "path": export.golden_path, "reference": reference_path, "inputs": sorted(inputs), "rows": rows,
        "reference_of": composed.get("description") or "the release model's native outputs",
        "target": spec.golden.target, "truth": export.truth_path or None, "min_rows": spec.golden.min_rows,
        "min_rows_lowered": spec.golden.min_rows < DEFAULT_MIN_GOLDEN_ROWS, "slices": sorted(slices),
    }
    if spec.golden.min_rows < DEFAULT_MIN_GOLDEN_ROWS:
        report.golden["note"] = (f"golden.min_rows is {spec.golden.min_rows}, below the default {DEFAULT_MIN_GOLDEN_ROWS}: "
                                 "an explicit choice of the spec")
    return Golden(inputs, reference, truth, rows, slices=slices)


@contextlib.contextmanager
def _triton(spec: ReleaseSpec, assembled: AssembleResult, folder: Path, endpoint: str | None,
            champion: Champion, remote: RemoteCanary | None = None, later: contextlib.ExitStack | None = None,
            ) -> Iterator[tuple[str, dict[str, Any], Callable[[], str | None]]]:
    """Yield (url, server facts, alive): a LocalTriton on a shimmed copy (the champion's models beside
    the candidate's), the remote canary (models delivered by :mod:`model_release.triton.delivery`), or the given endpoint.
    ``alive()`` is None while the server runs, else why not. With ``later`` the LocalTriton is stopped on a
    thread of its own when the block ends, and ``later`` joins that thread when it closes."""
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
    from ..triton.local import NO_AUTO_COMPLETE, LocalTriton

    copy = prepare_canary_repository(Path(assembled.repository_dir), folder / "repository")
    if champion.kind == SERVED and champion.repository is not None:
        # in the server's own repository, not pushed: Triton 2.51 loads an ensemble only when its steps
        # are in a repository it polls (models pushed through the load API are not)
        theirs = prepare_canary_repository(champion.repository, folder / "champion" / "served")
        for model in sorted(p for p in theirs.path.iterdir() if p.is_dir()):
            shutil.move(str(model), copy.path / model.name)
        copy.shimmed += theirs.shimmed
    # a stub per python model load less when no model completes its own configuration (triton.shim)
    completes = auto_complete_needed(copy.path)
    facts = {
        "mode": "local", "description": copy.description, "shimmed_models": copy.shimmed,
        "repository": str(copy.path), "log": str(folder / "tritonserver.log"),
        "auto_complete_config": f"on: {completes}" if completes else "off: no model completes its own configuration",
    }
    # the server's own files go to a temporary folder; only its log stays, beside the report. Its
    # python models are compiled first, so loading an ensemble does not load its steps again
    triton = LocalTriton(copy.path, log_path=folder / "tritonserver.log", ready_timeout=spec.canary.ready_timeout_s,
                         precompile=True, server_args=[] if completes else [NO_AUTO_COMPLETE])
    try:
        triton.start()
    except BaseException:
        triton.stop()
        raise
    try:
        facts["url"], facts["pid"] = triton.http_url, triton.pid

        def alive() -> str | None:
            code = triton.process.poll() if triton.process is not None else None
            return None if code is None else f"the canary Triton exited with code {code}"

        yield triton.http_url, facts, alive
    finally:
        if later is None:
            triton.stop()
        else:  # everything is read from it: its shutdown (seconds) runs beside the judging, joined by ``later``
            later.callback(triton.stop_in_background().join)


def serve_and_replay(
    spec: ReleaseSpec, assembled: AssembleResult, export: ExportResult, golden: Golden, champion: Champion,
    folder: Path, endpoint: str | None, report: CanaryReport, remote: RemoteCanary | None = None,
    open_store: Callable[[str], Any] | None = None, later: contextlib.ExitStack | None = None,
    blocked: Callable[[Replays], list[str]] | None = None,
) -> Replays:
    """Start (or reach) the Triton, load candidate and champion in dependency order, replay both.

    ``later``: where the local Triton's stop is left to finish (it runs on a thread from when this
    returns or raises, and is joined when ``later`` closes); None stops it before this returns.
    ``blocked``: the gates that already block the release on its replays; when it names any and
    ``canary.load.when_blocked`` is ``skip``, tuning and the load phase do not run (``Replays.load_skipped`` says why).
    """
    order = list(assembled.load_order)
    if assembled.entry_model not in order:
        order.append(assembled.entry_model)
    ahead = prefetch() if spec.canary.expectations and spec.canary.expectations_engine == "great_expectations" else None
    with _triton(spec, assembled, folder, endpoint, champion, remote, later) as (url, server_facts, alive):
        report.server = server_facts
        server = TritonServer(url, ready_timeout=spec.canary.ready_timeout_s)
        pushed: list[str] = []
        delivery = Delivery(server, remote, open_store or _no_store, folder / "delivered") if remote is not None else None
        try:
            meta = server.metadata()
            server_facts.update({"name": meta.get("name"), "version": meta.get("version")})
            report.load = {"order": order}
            gauge = _memory_gauge(server_facts, url)
            before = gauge()
            if delivery is not None:  # a plan the canary cannot run is refused before anything loads
                check_plans(Path(assembled.repository_dir), order, _manifest(assembled.manifest_path).get("tensorrt"),
                            delivery.canary, whose="the candidate")
                if champion.kind == SERVED and champion.repository is not None:
                    check_plans(champion.repository, champion.load_order, (champion.manifest or {}).get("tensorrt"),
                                delivery.canary, whose=f"the champion {champion.name}")
                delivery.clear()
                candidate_copy = delivery.prepare(Path(assembled.repository_dir), "candidate", whose="the candidate")
                if champion.kind == SERVED and champion.repository is not None:  # refused before anything loads, too
                    delivery.prepare(champion.repository, "champion", whose=f"the champion {champion.name}")
                loaded = delivery.load(candidate_copy, order)
            else:
                loaded = server.load(order)
            report.load = {"order": loaded.order, "versions": loaded.versions, "seconds": loaded.seconds,
                           "memory": footprint(before, gauge())}
            server_facts["models_loaded"] = dict(loaded.versions)
            if ahead is not None:  # nothing timed shares the CPU with the import
                ahead.join()
            candidate = _replay_entry(spec, server, url, assembled.entry_model, golden, export, report)
            replays = Replays(candidate)
            if champion.kind == SERVED:
                pushed = champion.load_order
                replays.champion, replays.champion_skipped = _replay_champion(
                    spec, server, url, champion, golden, endpoint, report, delivery)
            if spec.canary.load.enabled:
                replays.load_skipped = _skip_load(spec, replays, blocked, report)
            if spec.canary.load.enabled and replays.load_skipped is None:
                replays.load, replays.load_histograms = under_load(
                    spec, server, url, assembled, champion, golden.inputs, replays.champion is not None, folder, alive, report)
            return replays
        finally:
            if delivery is not None:
                server_facts.update(delivery.facts(), cleanup=delivery.close())
            elif alive() is None:  # a dead server (its stubs may still hold the sockets) is not asked anything
                if endpoint is not None:
                    server.unload(order)
                server.unload(pushed)
            server.close()


#: why each load gate is skipped when the replay blocked the release (report.json's load_phase says it in full)
SKIPPED_BLOCKED = "not measured: the replay already blocked the release"


def _skip_load(spec: ReleaseSpec, replays: Replays, blocked: Callable[[Replays], list[str]] | None,
               report: CanaryReport) -> str | None:
    """Why the load gates are skipped when the replay has blocked the release already (tuning and the
    load phase then do not run; the report's sections say why in full), or None."""
    if blocked is None or spec.canary.load.when_blocked != "skip":
        return None
    gates = blocked(replays)
    if not gates:
        return None
    why = (f"not measured: the replay already blocked the release ({', '.join(gates)}), and nothing measured under load "
           "can unblock it (canary.load.when_blocked: skip; set measure for its latency figures anyway)")
    report.load_phase = {"skipped": why}
    if spec.canary.tune.enabled:
        report.tuning = {"skipped": why}
    log.info("canary: tuning and the load phase are skipped: %s", why)
    return SKIPPED_BLOCKED  # each load gate's line, short: the failed gates are listed beside them


def _memory_gauge(facts: dict[str, Any], url: str) -> Callable[[], tuple[int, str] | None]:
    """What the canary Triton holds now (:mod:`.footprint`): its processes' memory when local, else its GPU metrics."""
    pid = facts.get("pid")
    metrics = None if pid else f"http://{url.rsplit(':', 1)[0]}:8002/metrics"
    return lambda: memory_in_use(pid, metrics)


def _no_store(uri: str) -> Any:
    from ..store import open_store

    return open_store(uri)


def _manifest(path: str) -> dict[str, Any]:
    import json

    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}


def _replay_entry(spec: ReleaseSpec, server: TritonServer, url: str, name: str, golden: Golden, export: ExportResult,
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
    spec: ReleaseSpec, server: TritonServer, url: str, champion: Champion, golden: Golden,
    endpoint: str | None, report: CanaryReport, delivery: Delivery | None = None,
) -> tuple[ReplayResult | None, str | None]:
    """Load the champion beside the candidate and replay the same rows through it.

    On the local Triton its (shimmed) models sit in the server's repository already; a remote
    endpoint gets them pushed through the load API.
    """
    assert champion.repository is not None
    try:
        if delivery is not None:
            copy = delivery.prepare(champion.repository, "champion", whose=f"the champion {champion.name}")
            loaded = delivery.load(copy, champion.load_order)
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


def _unfit_inputs(champion: Champion, golden: Golden) -> list[str]:
    """The champion's inputs this golden set cannot feed (missing, or of other dims): it is then not replayed."""
    unfit = []
    for name, (_, dims) in (champion.contract.inputs if champion.contract else {}).items():
        array = golden.inputs.get(name)
        if array is None:
            unfit.append(f"no input {name!r}")
        elif len(array.shape[1:]) != len(dims) or any(d not in (-1, g) for d, g in zip(dims, array.shape[1:])):
            unfit.append(f"input {name!r} is {list(dims)} per row, the golden set has {list(array.shape[1:])}")
    return unfit
