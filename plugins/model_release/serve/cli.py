"""``model-release rollout``, ``model-release fleet status`` and ``model-release serve-agent``: the serving fleet from a terminal.

    model-release rollout [--channel C] [--store URI] [--release ID] [--spec FILE | --no-watch]
                          [--lock-wait S] [--tracking-uri URI]
    model-release fleet status [--channel C] [--store URI]
    model-release serve-agent --name N --triton-grpc HOST:PORT --triton-http HOST:PORT --repository DIR
                              [--channel C] [--store URI] [--metrics-url URL] [--listen HOST:PORT] ...

The store, channel, release and tracking URI flags are the CLI's one grammar (:mod:`model_release.flags`:
``--store`` defaults to ``$MODEL_RELEASE_STORE``, which the local stack writes; ``--channel`` to
production). Output is JSON on stdout; progress lines on stderr. The fleet is whoever's agent has a
heartbeat in the store.

The roll-out follows the ``serve`` section (``rollout`` steps and swap, ``warmup``, ``watch``) of the
spec the release recorded in its manifest, or of ``--spec FILE``; ``--no-watch`` rolls out
unwatched. A watch that rolls back moves the MLflow alias (the spec's ``promote.mlflow_alias``)
back with the pointer, so it needs ``--tracking-uri`` (default ``$MLFLOW_TRACKING_URI``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import flags
from ..errors import SpecError, UserError
from ..spec import ReleaseSpec, load_spec
from ..spec.serve import RolloutSpec
from ..store.model_store import ModelStore, open_store
from .fleet import Fleet
from .guard import WatchPlan
from .membership import membership
from .rollout import RolloutOptions, desired_release, roll_out
from .stage import recorded_spec, watch_plan
from ..waiting import wait_until
from .status import fleet_status, serving_gap, status_text
from .warmup import WarmupRule


def _common(parser: argparse.ArgumentParser) -> None:
    flags.add(parser, "channel")
    flags.add(parser, "store")


def _store(raw: str | None) -> ModelStore:
    if not raw:
        raise UserError("no model store: pass --store URI or set MODEL_RELEASE_STORE")
    return open_store(raw)


def rollout_parser() -> argparse.ArgumentParser:
    """``model-release rollout``'s options."""
    parser = flags.Parser(prog="model-release rollout", description="Roll the channel's release out to its serving agents.")
    _common(parser)
    flags.add(parser, "release", help="roll out this release instead of the pointer's (tests, drills)")
    parser.add_argument("--lock-wait", type=float, default=None,
                        help="seconds to wait for another roll-out's lease (default: one lease term, which a killed "
                             "roll-out's lease lapses within)")
    parser.add_argument("--warmup-requests", type=int, default=None, help="requests each agent sends a new leaf before the switch")
    parser.add_argument("--first-request-limit-ms", type=float, default=None,
                        help="refuse the switch when a new leaf's first request is slower (the canary p99 x the spec's factor)")
    parser.add_argument("--run", default=None, help="the run, for the roll-out's record (default $AIRFLOW_CTX_DAG_RUN_ID)")
    watch = parser.add_mutually_exclusive_group()
    watch.add_argument("--spec", type=Path, default=None,
                       help="the release spec whose serve section applies (default: the one the release recorded)")
    watch.add_argument("--no-watch", action="store_true", help="roll out without watching the steps (a drill, a fleet without traffic)")
    flags.add(parser, "tracking_uri", old=("--mlflow-tracking-uri",),
              help="where a watch that rolls back moves the MLflow alias back (default $MLFLOW_TRACKING_URI)")
    return parser


def rollout_main(argv: list[str]) -> int:
    """``model-release rollout``: make the channel's fleet serve the channel's release, step by step."""
    parser = rollout_parser()
    args = parser.parse_args(argv)
    store = _store(args.store)
    release_id = args.release or desired_release(store, args.channel)  # the release whose spec is read is the one rolled out
    spec, where = _spec(store, release_id, args)
    rollout = spec.serve.rollout if spec is not None else RolloutSpec()
    rule = WarmupRule(requests=args.warmup_requests if args.warmup_requests is not None
                      else (spec.serve.warmup.requests if spec is not None else 0),
                      first_request_limit_ms=args.first_request_limit_ms)
    fleet = membership(store, args.channel, silent_after_s=rollout.silent_after_s).fleet
    run = args.run or os.environ.get("AIRFLOW_CTX_DAG_RUN_ID")
    options = RolloutOptions(spec=rollout, lock_wait_s=args.lock_wait, warmup=rule if rule.active else None, run=run,
                             watch=None if args.no_watch else _watch(spec, where, fleet, release_id, args, say))
    record = roll_out(store, args.channel, options, release_id=release_id, progress=say)
    print(json.dumps(record.to_doc(), indent=2))
    return 0


def say(line: str) -> None:
    """A progress line, on stderr (stdout holds the JSON result)."""
    print(line, file=sys.stderr)


def _spec(store: ModelStore, release_id: str, args: argparse.Namespace) -> tuple[ReleaseSpec | None, str]:
    """The spec whose ``serve`` applies: ``--spec FILE``, else the one the release recorded (None: it recorded none)."""
    if args.spec is not None:
        return load_spec(args.spec), str(args.spec)
    where = f"the spec recorded in release {release_id}"
    try:
        return recorded_spec(store, release_id), where
    except SpecError as exc:
        raise exc.restated(f"{exc.message}; pass --spec FILE to roll out by a spec file") from None


def _watch(spec: ReleaseSpec | None, where: str, fleet: Fleet, release_id: str, args: argparse.Namespace,
           say: Callable[[str], None]) -> WatchPlan | None:
    """The watch the release's spec asks for (the DAG's, from the same :func:`.stage.watch_plan`), or None.

    Raises:
        SpecError: its probe rows cannot be read here.
        UserError: a watch that may roll back must move the MLflow alias, and no tracking URI is given.
    """
    if spec is None:
        say(f"watch: release {release_id} recorded no spec, so its steps are not watched; pass --spec FILE to watch them")
        return None
    if not spec.serve.watch.enabled:
        say(f"watch: serve.watch.enabled is false in {where}: the steps are not watched")
        return None
    alias = spec.promote.mlflow_alias
    tracking_uri = args.tracking_uri if alias else None
    if alias and not tracking_uri and all(s.metrics_url for s in fleet.servers):
        raise UserError(f"model-release rollout: {where} moves the MLflow alias {alias!r} with the channel pointer "
                        "(promote.mlflow_alias), so a watch that rolls back must move it back too: pass "
                        "--tracking-uri URI or set MLFLOW_TRACKING_URI, or roll out with --no-watch")
    if tracking_uri:
        from ..mlflow_env import check_tracking_uri

        check_tracking_uri(tracking_uri)
    try:
        plan = watch_plan(spec.serve, tracking_uri=tracking_uri, alias=alias or "production",
                          resolve_path=spec.resolve_path, log=say)
    except SpecError as exc:
        raise exc.restated(f"{exc.message} (from {where}); pass --spec FILE where its files are, or --no-watch") from None
    w = spec.serve.watch
    say(f"watch: each step watched by {where}: bake {w.bake_s:g} s, a measurement every {w.interval_s:g} s, "
        f"at least {w.min_requests} requests each, budget {w.budget_s:g} s")
    return plan


def fleet_status_parser() -> argparse.ArgumentParser:
    """``model-release fleet status``'s options."""
    parser = flags.Parser(prog="model-release fleet status", description="What each serving Triton serves, beside the "
                          "plan and the channel pointer, and which servers drift.")
    _common(parser)
    flags.add(parser, "json")
    parser.add_argument("--wait", type=float, metavar="S", default=None,
                        help="wait up to S seconds until every agent with a heartbeat serves what the plan (or the "
                             "pointer) names and is ready; exit 4 when they do not in time")
    return parser


def fleet_main(argv: list[str]) -> int:
    """``model-release fleet status``: what each server serves, beside the plan and the channel pointer."""
    if argv and argv[0] in ("-h", "--help"):
        print("usage: model-release fleet status [--channel C] [--store URI] [--json]\n\n"
              "The one subcommand: `status`, what each serving Triton serves (model-release fleet status --help).")
        return 0
    if not argv or argv[0] != "status":
        raise UserError("model-release fleet: the one subcommand is `status`; see model-release fleet status --help")
    args = fleet_status_parser().parse_args(argv[1:])
    store = _store(args.store)
    if args.wait is not None:
        wait_until(lambda: serving_gap(fleet_status(store, args.channel)), timeout=args.wait, stopping=lambda: False,
                   what=f"the serving fleet of channel {args.channel!r} in {store.uri}")
    doc = fleet_status(store, args.channel)
    print(json.dumps(doc, indent=2) if flags.wants_json(args) else status_text(doc))
    return 0


def agent_parser() -> argparse.ArgumentParser:
    """``model-release serve-agent``'s options (the local stack's serving process takes the same)."""
    parser = flags.Parser(prog="model-release serve-agent",
                     description="The agent beside a serving Triton: it makes the Triton serve what the channel's plan says.")
    _common(parser)
    parser.add_argument("--name", required=True, help="this server's name in the fleet (a pod's name)")
    parser.add_argument("--triton-grpc", required=True, help="HOST:PORT of the Triton's gRPC endpoint (the agent loads through it)")
    parser.add_argument("--triton-http", required=True, help="HOST:PORT of the Triton's HTTP endpoint as clients reach it")
    parser.add_argument("--metrics-url", default=None, help="the Triton's metrics endpoint (the watch reads it; memory, pending requests)")
    parser.add_argument("--repository", type=Path, required=True, help="the Triton's model repository (the agent's own disk)")
    parser.add_argument("--cache", type=Path, default=None, help="the agent's content cache (default: beside the repository)")
    parser.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT of the readiness endpoint (/ready, /state)")
    parser.add_argument("--advertise", default=None, help="the host others reach the readiness endpoint by (default: --listen's)")
    parser.add_argument("--shim", action="store_true", help="a CPU Triton with the python backend only: serve ONNX leaves through the shim")
    parser.add_argument("--no-auto-complete", action="store_true", help="the Triton runs with --disable-auto-complete-config")
    parser.add_argument("--memory-budget", type=int, default=None, help="bytes this server may use for models (default: Triton's metrics)")
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between reads of the plan")
    parser.add_argument("--heartbeat", type=float, default=2.0, help="seconds between heartbeats")
    return parser


def agent_config(args: argparse.Namespace) -> Any:
    """The :class:`~.agent.AgentConfig` of parsed ``serve-agent`` options."""
    from .agent import AgentConfig

    return AgentConfig(args.name, args.channel, args.triton_http, args.metrics_url, auto_complete=not args.no_auto_complete,
                       shim=args.shim, poll_s=args.poll, heartbeat_s=args.heartbeat, memory_budget=args.memory_budget)


def run_agent(args: argparse.Namespace, stop: threading.Event, started: Callable[[str], None] | None = None) -> None:
    """Run the agent ``args`` describe, with its readiness endpoint, until ``stop`` is set; ``started`` gets the
    endpoint's URL once it listens."""
    from .agent import local_agent
    from .agent_http import ReadinessServer

    host, _, port = args.listen.rpartition(":")
    cache = args.cache or Path(args.repository).resolve().parent / "agent-cache"
    agent = local_agent(agent_config(args), _store(args.store), args.triton_grpc, args.repository, cache)
    endpoint = ReadinessServer(agent, host or "127.0.0.1", int(port or 0), advertise=args.advertise)
    say(f"serve-agent {args.name}: readiness at {endpoint.url}, following channel {args.channel!r}")
    if started is not None:
        started(endpoint.url)
    try:
        agent.run(stop)
    finally:
        endpoint.close()


def agent_main(argv: list[str]) -> int:
    """``model-release serve-agent``: run until SIGTERM or SIGINT."""
    args = agent_parser().parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    run_agent(args, stop)
    return 0
