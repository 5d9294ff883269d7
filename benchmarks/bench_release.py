"""One iris release, where its time goes: the stages and the canary's phases, against its unavoidable parts.

Starts the embedded stack (MLflow on SQLite, the moto S3 server), registers the demo's first iris
classifier and releases it in this process (``pipeline.release``, as ``model-release release``
does), then registers the demo's third (C=10) and releases it against the first, now the champion
served beside it. The second release is the one measured: every stage, and inside the canary the
phases below, each timed by wrapping the function that does it (found by name wherever it lives in
the package, so the figures follow the code when it moves).

The unavoidable parts, measured in the same run: the export stage, Triton loading the repository
(candidate and champion), the load phase (its configured budget or less when it settles sooner)
and the promotion's upload. Printed: the release's wall time over their sum (target at most 1.5x)::

    .venv/bin/python benchmarks/bench_release.py

The measured release has the first's shape (one pipeline retrained), so it carries the champion's
tuned setting instead of searching the grid (``canary.tune.reuse_days``), as a channel's scheduled
release does; ``--search-tuning`` measures it searching, as a release of a new shape does.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))

#: (phase, module, function or Class.method): what each canary phase is, by its exact name. A name
#: that no longer exists stops the bench before anything runs (so a renovation cannot silently make
#: a phase read 0 s): move it here with the code.
PHASES = (
    ("champion fetch (store)", "model_release.canary.champion", "served_champion"),  # on a thread, beside the export
    ("champion lookup (canary)", "model_release.canary.champion", "find_champion"),
    ("repository copy + shim", "model_release.triton.shim", "prepare_canary_repository"),
    ("server start", "model_release.triton.local", "LocalTriton.start"),
    ("model loads", "model_release.triton.server", "TritonServer.load"),
    ("tuning reloads", "model_release.triton.server", "TritonServer.load_with_config"),
    ("replay candidate", "model_release.canary.serve", "_replay_entry"),
    ("replay champion", "model_release.canary.serve", "_replay_champion"),
    ("tuning", "model_release.canary.measure.tune", "tune"),
    ("load phase", "model_release.canary.measure.latency", "load_phase"),
    ("expectations", "model_release.canary.judge.expect", "run_expectations"),
    ("plots", "model_release.canary.report.plots", "confusion"),
    ("plots", "model_release.canary.report.plots", "per_class"),
    ("plots", "model_release.canary.report.plots", "latency_cdf"),
    ("plots", "model_release.canary.report.plots", "tuning"),
    ("plots", "model_release.canary.report.plots", "predicted"),
    ("plots", "model_release.canary.report.plots", "residuals"),
    ("plots", "model_release.canary.report.plots", "parity_errors"),
    ("report write (json + html)", "model_release.canary.report.document", "write_reports"),
    ("MLflow record", "model_release.canary.report.record", "_log"),
    ("server stop", "model_release.triton.local", "LocalTriton.stop"),
    ("promote upload", "model_release.store.promote", "_upload"),
)
GX = "great_expectations import"


class Timer:
    """Seconds per phase (summed over calls, from any thread), the calls counted, and each phase's own
    time: its seconds less those of the timed phases it called (so nothing is counted twice)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.own: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()
        self._active = threading.local()

    def snapshot(self) -> dict[str, float]:
        """The seconds so far, and start again from zero."""
        with self._lock:
            taken = dict(self.seconds)
            self.seconds.clear()
            self.own.clear()
            self.calls.clear()
        return taken

    def timed(self, phase: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        stack = self._active.__dict__.setdefault("stack", [])
        stack.append(0.0)  # the seconds of the timed phases this one calls
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            seconds = time.perf_counter() - t
            inner = stack.pop()
            if stack:
                stack[-1] += seconds
            with self._lock:
                self.seconds[phase] += seconds
                self.own[phase] += seconds - inner
                self.calls[phase] += 1

    def wrap(self, phase: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            # the great_expectations engine's import, apart, where the spec chooses it (the native engine imports nothing)
            if phase == "expectations" and kwargs.get("engine") == "great_expectations" and "great_expectations" not in sys.modules:
                self.timed(GX, importlib.import_module, "great_expectations")
            return self.timed(phase, fn, *args, **kwargs)
        timed.__wrapped_by_bench__ = True
        return timed


def instrument(timer: Timer) -> None:
    """Wrap every phase's function where it is defined and wherever it was imported by name.

    Raises:
        SystemExit: a module or function of :data:`PHASES` no longer exists (the message names each).
    """
    missing = []
    for phase, module, qualname in PHASES:
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            missing.append(f"{phase}: module {module} ({exc})")
            continue
        owner, _, attr = qualname.rpartition(".")
        holder = getattr(mod, owner, None) if owner else mod
        fn = getattr(holder, attr, None) if holder is not None else None
        if fn is None or not callable(fn):
            missing.append(f"{phase}: {module}.{qualname}")
            continue
        if getattr(fn, "__wrapped_by_bench__", False):
            continue
        timed = timer.wrap(phase, fn)
        setattr(holder, attr, timed)
        if not owner:  # `from .x import f` elsewhere holds the original too
            for name, other in list(sys.modules.items()):
                if name.startswith("model_release") and other is not None and getattr(other, attr, None) is fn:
                    setattr(other, attr, timed)
    if missing:
        raise SystemExit("bench_release: these phases' functions no longer exist, so their time would read 0 s; "
                         "update PHASES to where the code moved: " + "; ".join(missing))


def stage_times(timer: Timer) -> Any:
    """Wrap the one stage runner so each stage's wall time is recorded under ``stage <name>``."""
    from model_release import pipeline

    original = pipeline.run_stage

    @functools.wraps(original)
    def timed(ws: Any, stage: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return timer.wrap(f"stage {stage}", original)(ws, stage, fn, *args, **kwargs)

    pipeline.run_stage = timed


def release_once(stack: Any, c: float, *, search: bool = False) -> tuple[float, Any]:
    from model_release.local.demo import SPEC, train_iris
    from model_release.pipeline import Services, release
    from model_release.spec import load_spec
    from model_release.workspace import Workspace, new_release_id

    train_iris(str(stack.tracking_uri), c=c)
    spec = load_spec(str(ROOT / SPEC))
    if search:  # the champion's tuned setting is not carried: the grid is searched as on a first release
        tune = spec.canary.tune.model_copy(update={"reuse_days": 0.0})
        spec = spec.model_copy(update={"canary": spec.canary.model_copy(update={"tune": tune})})
    ws = Workspace(new_release_id(spec.name), str(stack.workspace))
    from model_release.errors import CanaryInconclusive, CanaryRejected

    t = time.perf_counter()
    try:
        outcome = release(spec, ws, Services(tracking_uri=str(stack.tracking_uri)))
    except (CanaryRejected, CanaryInconclusive) as exc:  # a latency gate tripped by a busy machine: the stages were still timed
        verdict = "rejected" if isinstance(exc, CanaryRejected) else "inconclusive"
        print(f"NOTE: the canary was {verdict}, nothing promoted (its times are still printed; promote reads 0): "
              f"{exc.message[:300]}")
        outcome = None
    return time.perf_counter() - t, (spec, outcome)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=float, default=1.5, help="the ratio to meet (exit 1 above it)")
    parser.add_argument("--search-tuning", action="store_true",
                        help="search the tuning grid in the measured release too (canary.tune.reuse_days 0) instead of "
                             "carrying the champion's setting, as a release of another shape would")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    root = Path(tempfile.mkdtemp(prefix="bench-release-"))
    os.chdir(ROOT)
    timer = Timer()
    instrument(timer)
    stage_times(timer)
    from model_release.local.stack import EmbeddedStack

    try:
        with EmbeddedStack(root) as stack:
            for key in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI", "MLFLOW_DISABLE_TELEMETRY", "MODEL_RELEASE_WORKSPACE"):
                os.environ[key] = stack.env()[key]
            from model_release.local.moto_process import _MOTO_KEY_ID, _MOTO_SECRET

            os.environ.update(AWS_ENDPOINT_URL=stack.endpoint_url, AWS_ACCESS_KEY_ID=_MOTO_KEY_ID,
                              AWS_SECRET_ACCESS_KEY=_MOTO_SECRET, AWS_DEFAULT_REGION="us-east-1")
            first, _ = release_once(stack, 1.0)
            first_seconds = timer.snapshot()
            wall, (spec, outcome) = release_once(stack, 10.0, search=args.search_tuning)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_table(timer, first_seconds, wall, first, spec, args.target)
    print_tuning(outcome)
    return 0 if ratio(timer, wall, spec) <= args.target else 1


def print_tuning(outcome: Any) -> None:
    """How the measured release's serving setting was chosen: carried from the champion, or searched."""
    tuning = ((outcome.canary.figures if outcome is not None and outcome.canary is not None else None) or {}).get("tuning")
    if not tuning:
        print("tuning of the measured release: none recorded")
    elif tuning.get("carried_from"):
        print(f"tuning of the measured release: carried from the champion {tuning['carried_from']} (same fingerprint, "
              f"measured in {tuning.get('measured_in')}), no trials; --search-tuning measures a search instead")
    else:
        confirm = " and a confirmation (pick, default, default, pick)" if tuning.get("confirm") else ""
        print(f"tuning of the measured release: searched, {len(tuning.get('trials') or [])} trials{confirm}")


def unavoidable(timer: Timer, spec: Any) -> dict[str, float]:
    s = timer.seconds
    return {
        "export stage": s.get("stage export", 0.0),
        "Triton load of the repository": s.get("model loads", 0.0),
        "load phase (budget %.0f s)" % spec.canary.load.budget_s: min(s.get("load phase", 0.0), spec.canary.load.budget_s + 2.0),
        "promote upload": s.get("promote upload", 0.0),
    }


def ratio(timer: Timer, wall: float, spec: Any) -> float:
    return wall / max(sum(unavoidable(timer, spec).values()), 1e-9)


def print_table(timer: Timer, first_seconds: dict[str, float], wall: float, first: float, spec: Any, target: float) -> None:
    print(f"first release (no champion): {first:.1f} s; the release measured (against it as champion): {wall:.1f} s")
    print("\nstage                               first  measured")
    for phase, sec in timer.seconds.items():
        if phase.startswith("stage "):
            print(f"  {phase[6:]:<32}{first_seconds.get(phase, 0.0):7.2f}  {sec:8.2f}")
    print("\ncanary phase                        first  measured  calls  own")
    for phase in dict.fromkeys([GX] + [p for p, _, _ in PHASES]):
        if phase.startswith("promote") or (phase not in timer.seconds and phase not in first_seconds):
            continue
        print(f"  {phase:<32}{first_seconds.get(phase, 0.0):7.2f}  {timer.seconds.get(phase, 0.0):8.2f}  "
              f"{timer.calls.get(phase, 0):5d}  {timer.own.get(phase, 0.0):5.2f}")
    print(f"  {'(rest of the canary)':<32}{'':7}  {timer.own.get('stage canary', 0.0):8.2f}")
    parts = unavoidable(timer, spec)
    print("\nunavoidable part                    seconds")
    for name, sec in parts.items():
        print(f"  {name:<34}{sec:7.2f}")
    total = sum(parts.values())
    r = wall / max(total, 1e-9)
    print(f"\nrelease {wall:.1f} s / unavoidable {total:.1f} s = {r:.2f}x (target <= {target}x): {'met' if r <= target else 'NOT met'}")


if __name__ == "__main__":
    raise SystemExit(main())
