"""``model-release rollout`` and ``model-release fleet status``: the serving fleet from a terminal.

    model-release rollout --channel C [--store URI] [--fleet FILE] [--release ID] [--no-shim]
                          [--spec FILE | --no-watch] [--mlflow-tracking-uri URI]
    model-release fleet status --channel C [--store URI] [--fleet FILE]

``--store`` defaults to ``$MODEL_RELEASE_STORE``, ``--fleet`` to ``$MODEL_RELEASE_FLEET`` (the local
stack writes both). Output is JSON on stdout; progress lines on stderr.

The roll-out watches each wave as the DAG's does (:func:`.stage.watch_plan`), by the ``serve.watch``
of the spec the release recorded in its manifest, or of ``--spec FILE``; ``--no-watch`` rolls out
unwatched. A watch that rolls back moves the MLflow alias (the spec's ``promote.mlflow_alias``) back
with the pointer, so it needs ``--mlflow-tracking-uri`` (default ``$MLFLOW_TRACKING_URI``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from ..errors import SpecError, UserError
from ..spec import load_spec
from ..store.model_store import ModelStore, open_store
from .fleet import Fleet, load_fleet
from .guard import WatchPlan
from .rollout import RolloutOptions, desired_release, roll_out
from .stage import recorded_spec, watch_plan
from .status import fleet_status
from .warmup import WarmupRule


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UserError(f"{self.prog}: {message}; see {self.prog} --help")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--channel", required=True, help="the channel whose fleet to act on, e.g. production")
    parser.add_argument("--store", default=os.environ.get("MODEL_RELEASE_STORE"), help="default $MODEL_RELEASE_STORE")
    parser.add_argument("--fleet", type=Path, default=None, help="fleet file (default $MODEL_RELEASE_FLEET)")


def _store(raw: str | None):  # noqa: ANN202
    if not raw:
        raise UserError("no model store: pass --store URI or set MODEL_RELEASE_STORE")
    return open_store(raw)


def rollout_main(argv: list[str]) -> int:
    """``model-release rollout``: make the channel's fleet serve the channel's release."""
    parser = _Parser(prog="model-release rollout", description="Roll the channel's release out to its serving Tritons.")
    _common(parser)
    parser.add_argument("--release", help="roll out this release instead of the pointer's (tests, drills)")
    parser.add_argument("--no-shim", action="store_true", help="the fleet has native onnxruntime/TensorRT backends")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("MODEL_RELEASE_SERVE_CACHE", ".work/serve-cache")))
    parser.add_argument("--lock-ttl", type=float, default=600, help="seconds before a killed roll-out's lock is free")
    parser.add_argument("--lock-wait", type=float, default=0, help="seconds to wait for another roll-out's lock")
    parser.add_argument("--warmup-requests", type=int, default=0, help="requests sent to each new leaf before the switch")
    parser.add_argument("--first-request-limit-ms", type=float, default=None,
                        help="refuse the switch when a new leaf's first request is slower (the canary p99 x the spec's factor)")
    parser.add_argument("--run", default=os.environ.get("AIRFLOW_CTX_DAG_RUN_ID"), help="the run, for the record")
    watch = parser.add_mutually_exclusive_group()
    watch.add_argument("--spec", type=Path, default=None,
                       help="the release spec whose serve.watch applies (default: the one the release recorded)")
    watch.add_argument("--no-watch", action="store_true", help="roll out without watching the waves (a drill, a fleet without traffic)")
    parser.add_argument("--mlflow-tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI"),
                        help="where a watch that rolls back moves the MLflow alias back (default $MLFLOW_TRACKING_URI)")
    args = parser.parse_args(argv)
    store = _store(args.store)
    fleet = load_fleet(args.channel, args.fleet)
    release_id = args.release or desired_release(store, args.channel)  # the release whose spec is read is the one rolled out
    rule = WarmupRule(requests=args.warmup_requests, first_request_limit_ms=args.first_request_limit_ms)
    options = RolloutOptions(cache_dir=args.cache, shim=not args.no_shim, lock_ttl_s=args.lock_ttl,
                             lock_wait_s=args.lock_wait, warmup=rule.check if rule.active else None, run=args.run,
                             watch=None if args.no_watch else _watch(store, fleet, release_id, args, say))
    record = roll_out(store, fleet, options, release_id=release_id, progress=say)
    print(json.dumps(record.to_doc(), indent=2))
    return 0


def say(line: str) -> None:
    """A progress line, on stderr (stdout holds the JSON result)."""
    print(line, file=sys.stderr)


def _watch(store: ModelStore, fleet: Fleet, release_id: str, args: argparse.Namespace,
           say: Callable[[str], None]) -> WatchPlan | None:
    """The watch the release's spec asks for (the DAG's, from the same :func:`.stage.watch_plan`), or None.

    Raises:
        SpecError: the spec cannot be read, or its probe rows cannot be read here.
        UserError: a watch that may roll back must move the MLflow alias, and no tracking URI is given.
    """
    if args.spec is not None:
        spec, where = load_spec(args.spec), str(args.spec)
    else:
        where = f"the spec recorded in release {release_id}"
        try:
            spec = recorded_spec(store, release_id)
        except SpecError as exc:
            raise exc.restated(f"{exc.message}; pass --spec FILE to watch by a spec file, or --no-watch") from None
        if spec is None:
            say(f"watch: release {release_id} recorded no spec, so its waves are not watched; pass --spec FILE to watch them")
            return None
    if not spec.serve.watch.enabled:
        say(f"watch: serve.watch.enabled is false in {where}: the waves are not watched")
        return None
    alias = spec.promote.mlflow_alias
    tracking_uri = args.mlflow_tracking_uri if alias else None
    if alias and not tracking_uri and all(s.metrics_url for s in fleet.servers):
        raise UserError(f"model-release rollout: {where} moves the MLflow alias {alias!r} with the channel pointer "
                        "(promote.mlflow_alias), so a watch that rolls back must move it back too: pass "
                        "--mlflow-tracking-uri URI or set MLFLOW_TRACKING_URI, or roll out with --no-watch")
    if tracking_uri:
        from ..mlflow_env import check_tracking_uri

        check_tracking_uri(tracking_uri)
    try:
        plan = watch_plan(spec.serve, tracking_uri=tracking_uri, alias=alias or "production",
                          resolve_path=spec.resolve_path, log=say)
    except SpecError as exc:
        raise exc.restated(f"{exc.message} (from {where}); pass --spec FILE where its files are, or --no-watch") from None
    w = spec.serve.watch
    say(f"watch: each wave watched by {where}: bake {w.bake_s:g} s, a measurement every {w.interval_s:g} s, "
        f"at least {w.min_requests} requests each, budget {w.budget_s:g} s")
    return plan


def fleet_main(argv: list[str]) -> int:
    """``model-release fleet status``: what each server serves, beside the channel pointer."""
    if not argv or argv[0] != "status":
        raise UserError("model-release fleet: the one subcommand is `status`; see model-release fleet status --help")
    parser = _Parser(prog="model-release fleet status", description="What each serving Triton serves, and drift.")
    _common(parser)
    args = parser.parse_args(argv[1:])
    store = _store(args.store)
    fleet = load_fleet(args.channel, args.fleet)
    got = store.read_manifest(desired_release(store, args.channel))
    entry = got[0]["repository"]["entry_model"] if got else ""
    print(json.dumps(fleet_status(store, fleet, entry), indent=2))
    return 0
