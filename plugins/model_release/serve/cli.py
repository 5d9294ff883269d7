"""``model-release rollout`` and ``model-release fleet status``: the serving fleet from a terminal.

    model-release rollout --channel C [--store URI] [--fleet FILE] [--release ID] [--no-shim]
    model-release fleet status --channel C [--store URI] [--fleet FILE]

``--store`` defaults to ``$MODEL_RELEASE_STORE``, ``--fleet`` to ``$MODEL_RELEASE_FLEET`` (the local
stack writes both). Output is JSON on stdout; progress lines on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..errors import UserError
from ..store.model_store import open_store
from .fleet import load_fleet
from .rollout import RolloutOptions, desired_release, roll_out
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
    args = parser.parse_args(argv)
    store = _store(args.store)
    fleet = load_fleet(args.channel, args.fleet)
    rule = WarmupRule(requests=args.warmup_requests, first_request_limit_ms=args.first_request_limit_ms)
    options = RolloutOptions(cache_dir=args.cache, shim=not args.no_shim, lock_ttl_s=args.lock_ttl,
                             lock_wait_s=args.lock_wait, warmup=rule.check if rule.active else None, run=args.run)
    record = roll_out(store, fleet, options, release_id=args.release, progress=lambda line: print(line, file=sys.stderr))
    print(json.dumps(record.to_doc(), indent=2))
    return 0


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
