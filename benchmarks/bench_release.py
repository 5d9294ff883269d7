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

#: (phase, module name ends with, function or Class.method): what each canary phase is, by name
PHASES = (
    ("champion fetch (store)", "champion", "find_champion"),
    ("repository copy + shim", "shim", "prepare_canary_repository"),
    ("server start", "triton", "LocalTriton.start"),
    ("model loads", "server", "CanaryServer.load"),
    ("tuning reloads", "server", "CanaryServer.load_with_config"),
    ("replay candidate", "stage", "_replay_entry"),
    ("replay champion", "stage", "_replay_champion"),
    ("tuning", "tune", "tune"),
    ("load phase", "latency", "load_phase"),
    ("expectations", "expect", "run_expectations"),
    ("plots", "plots", "confusion"),
    ("plots", "plots", "per_class"),
    ("plots", "plots", "latency_cdf"),
    ("plots", "plots", "tuning"),
    ("plots", "plots", "predicted"),
    ("plots", "plots", "residuals"),
    ("plots", "plots", "parity_errors"),
    ("report write (json + html)", "report", "write_reports"),
    ("MLflow record", "record", "_log"),
    ("server stop", "triton", "LocalTriton.stop"),
    ("promote upload", "promote", "_upload"),
)
GX = "great_expectations import"


class Timer:
    """Seconds per phase (summed over calls, from any thread), and the calls counted."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()
        self.on = False

    def add(self, phase: str, seconds: float) -> None:
        if self.on:
            with self._lock:
                self.seconds[phase] += seconds
                self.calls[phase] += 1

    def wrap(self, phase: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if phase == "expectations" and "great_expectations" not in sys.modules:
                t = time.perf_counter()
                importlib.import_module("great_expectations")
                self.add(GX, time.perf_counter() - t)
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(phase, time.perf_counter() - t)
        timed.__wrapped_by_bench__ = True
        return timed


def instrument(timer: Timer) -> list[str]:
    """Wrap every phase's function where it is defined and wherever it was imported; return those not found."""
    import pkgutil

    import model_release

    for info in pkgutil.walk_packages(model_release.__path__, "model_release."):
        if ".airflow" in info.name or info.name.endswith(("shim_model", "__main__")) or ".local.distributed" in info.name:
            continue
        with _quiet():
            try:
                importlib.import_module(info.name)
            except Exception:  # noqa: BLE001 - a module that needs what the bench lacks is simply not timed
                continue
    modules = [m for n, m in list(sys.modules.items()) if n.startswith("model_release.") and m is not None]
    missing = []
    for phase, suffix, qualname in PHASES:
        found = False
        for mod in modules:
            if not mod.__name__.endswith(suffix):
                continue
            owner, _, attr = qualname.rpartition(".")
            holder = getattr(mod, owner, None) if owner else mod
            fn = getattr(holder, attr, None) if holder is not None else None
            if fn is None or getattr(fn, "__module__", None) != mod.__name__ or getattr(fn, "__wrapped_by_bench__", False):
                continue
            timed = timer.wrap(phase, fn)
            setattr(holder, attr, timed)
            if not owner:  # `from .x import f` elsewhere holds the original too
                for other in modules:
                    if getattr(other, attr, None) is fn:
                        setattr(other, attr, timed)
            found = True
        if not found:
            missing.append(f"{phase}: {suffix}.{qualname}")
    return missing


class _quiet:
    def __enter__(self) -> None:
        self._level = logging.root.manager.disable
        logging.disable(logging.CRITICAL)

    def __exit__(self, *exc: object) -> None:
        logging.disable(self._level)


def stage_times(timer: Timer) -> Any:
    """Wrap the one stage runner so each stage's wall time is recorded under ``stage <name>``."""
    from model_release import pipeline

    original = pipeline.run_stage

    @functools.wraps(original)
    def timed(ws: Any, stage: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return timer.wrap(f"stage {stage}", original)(ws, stage, fn, *args, **kwargs)

    pipeline.run_stage = timed


def release_once(stack: Any, c: float) -> tuple[float, Any]:
    from model_release.demo import SPEC, train_iris
    from model_release.pipeline import Services, release
    from model_release.spec import load_spec
    from model_release.workspace import Workspace, new_release_id

    train_iris(str(stack.tracking_uri), c=c)
    spec = load_spec(str(ROOT / SPEC))
    ws = Workspace(new_release_id(spec.name), str(stack.workspace))
    t = time.perf_counter()
    outcome = release(spec, ws, Services(tracking_uri=str(stack.tracking_uri)))
    return time.perf_counter() - t, (spec, outcome)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=float, default=1.5, help="the ratio to meet (exit 1 above it)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    root = Path(tempfile.mkdtemp(prefix="bench-release-"))
    os.chdir(ROOT)
    timer = Timer()
    missing = instrument(timer)
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
            timer.on = True
            wall, (spec, outcome) = release_once(stack, 10.0)
            timer.on = False
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_table(timer, wall, first, spec, missing, args.target)
    return 0 if ratio(timer, wall, spec) <= args.target else 1


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


def print_table(timer: Timer, wall: float, first: float, spec: Any, missing: list[str], target: float) -> None:
    print(f"first release (no champion): {first:.1f} s; the release measured (against it as champion): {wall:.1f} s")
    print("\nstage                               seconds")
    for phase, sec in timer.seconds.items():
        if phase.startswith("stage "):
            print(f"  {phase[6:]:<34}{sec:7.2f}")
    print("\ncanary phase                        seconds  calls")
    canary = timer.seconds.get("stage canary", 0.0)
    inside = 0.0
    for phase in dict.fromkeys([GX] + [p for p, _, _ in PHASES]):
        if phase in timer.seconds and not phase.startswith("promote"):
            sec = timer.seconds[phase]
            nested = phase in ("model loads", "tuning reloads", "plots", "replay candidate", "replay champion") or phase == GX
            print(f"  {phase:<34}{sec:7.2f}  {timer.calls[phase]:5d}" + ("  (inside another phase)" if nested and phase != GX else ""))
    for phase in ("champion fetch (store)", "repository copy + shim", "server start", "replay candidate", "replay champion",
                  "tuning", "load phase", GX, "expectations", "report write (json + html)", "MLflow record", "server stop"):
        inside += timer.seconds.get(phase, 0.0)
    print(f"  {'(rest of the canary)':<34}{canary - inside:7.2f}")
    if missing:
        print("\nnot timed (not found by name): " + "; ".join(missing))
    parts = unavoidable(timer, spec)
    print("\nunavoidable part                    seconds")
    for name, sec in parts.items():
        print(f"  {name:<34}{sec:7.2f}")
    total = sum(parts.values())
    r = wall / max(total, 1e-9)
    print(f"\nrelease {wall:.1f} s / unavoidable {total:.1f} s = {r:.2f}x (target <= {target}x): {'met' if r <= target else 'NOT met'}")


if __name__ == "__main__":
    raise SystemExit(main())
