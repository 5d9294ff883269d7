"""``model-release store ...``: look at and operate a model store from a terminal.

Commands (each takes ``--store URI``, default ``$MODEL_RELEASE_STORE``; ``--channel`` defaults to
``production``; the grammar is :mod:`model_release.flags`)::

    history   [--channel C]            every move of a channel, oldest first
    releases                           every release, complete or not, and who points at it
    verify    --release ID [--deep]    check a release against its manifest
    rollback  [--channel C] [--release ID] [--tracking-uri URI] [--mlflow-alias A]
    retention --keep N [--protect-days D] [--dry-run]
    repair-pointer [--channel C] --release ID   point a damaged (or dangling) channel at a verified release
    page      [--channel C]            rewrite the channel's history page (channels/<C>.html)

At a terminal each prints a few lines; with ``--json``, or when stdout is not a terminal, JSON. An
error is one line on stderr and the exit codes of ``model-release --help``: 2 bad input (a release or
channel the store does not have, a typo'd store), 4 the store failed or holds something wrong (a
release that does not verify; for ``history`` and ``releases``, a damaged pointer or one naming a
missing release: what the store holds is still printed and the line on stderr says how to repair
it). Nothing but ``rollback``, ``retention``, ``repair-pointer`` and ``page`` writes, and no command
creates a store that is not there.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .. import flags
from ..errors import ModelReleaseError, StoreError, UserError
from ..flags import Parser
from ..safe_text import one_line
from ..workspace import check_release_id
from .channels import repair_pointer, rollback
from .history_page import write_channel_page
from .model_store import open_store
from .pointer import history
from .registry import MlflowFollower
from .retention import PROTECT_DAYS_RANGE, list_releases, pointer_problems, retention, valid_protect_days
from .text import text
from .verify import verify_release


def _days(raw: str) -> float:
    """``--protect-days``: refused as typed (``nan``, ``inf``, ``1e12``), before anything is read."""
    try:
        value = float(raw)
    except ValueError:
        value = None
    if not valid_protect_days(value):
        raise argparse.ArgumentTypeError(f"{raw!r} is not valid; give {PROTECT_DAYS_RANGE}")
    return float(value)  # type: ignore[arg-type]


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="model-release store", description="Inspect and operate a model store.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    def add(name: str, help_: str, *, reads: bool = False) -> argparse.ArgumentParser:
        s = sub.add_parser(name, help=help_, description=help_[0].upper() + help_[1:] + ".")
        flags.add(s, "store")
        if reads:
            flags.add(s, "json")
        return s

    s = add("history", "every move of a channel", reads=True)
    flags.add(s, "channel")
    add("releases", "every release in the store", reads=True)
    s = add("verify", "check a release against its manifest", reads=True)
    s.add_argument("release_positional", nargs="?", metavar="RELEASE_ID", help=argparse.SUPPRESS)
    flags.add(s, "release", help="the release to verify")
    s.add_argument("--deep", action="store_true", help="download and hash every object")
    s = add("rollback", "move a channel back to an earlier verified release")
    flags.add(s, "channel")
    flags.add(s, "release", help="the release to move to (default: the newest earlier release that verifies)",
              old=("--to",))
    flags.add(s, "tracking_uri", help="also move the MLflow alias, in this registry (default $MLFLOW_TRACKING_URI; "
                                      "none: the pointer alone)", old=("--mlflow-tracking-uri",))
    flags.add(s, "mlflow_alias", old=("--alias",))
    s = add("retention", "delete releases nothing needs")
    s.add_argument("--keep", type=int, required=True, help="verified releases per channel's history to keep")
    s.add_argument("--protect-days", type=_days, default=7.0, help=f"keep anything younger: {PROTECT_DAYS_RANGE}")
    s.add_argument("--dry-run", action="store_true", help="say what would be deleted, delete nothing")
    s = add("repair-pointer", "point a damaged or dangling channel pointer at a verified release")
    flags.add(s, "channel")
    flags.add(s, "release", required=True, help="a complete release (see `store releases`)", old=("--to",))
    s = add("page", "rewrite a channel's history page (channels/<channel>.html)")
    flags.add(s, "channel")
    return p


def _flagged(out: Any, problems: dict[str, str]) -> tuple[Any, int]:
    """Print what the store holds, and one line on stderr for what is wrong with its pointers."""
    if not problems:
        return out, 0
    print(one_line("model-release store: store problem: "
                   + " | ".join(f"channel {c!r}: {p}" for c, p in problems.items())), file=sys.stderr)
    return out, StoreError.exit_code


def _follower(tracking_uri: str | None, alias: str) -> MlflowFollower | None:
    """The registry follower of a rollback, its URI and alias checked before the pointer moves."""
    if tracking_uri is None:
        return None
    from ..mlflow_env import check_request_limits, check_tracking_uri
    from ..names import is_alias

    check_tracking_uri(tracking_uri)
    check_request_limits()
    if not is_alias(alias):
        raise UserError(f"--mlflow-alias {alias!r} is not a valid MLflow alias (letters, digits, _ and -, starting with "
                        "a letter or _), for example production")
    return MlflowFollower(tracking_uri, alias=alias)


def _run(args: argparse.Namespace) -> tuple[Any, int]:
    if not args.store:
        raise UserError("--store is required (or set MODEL_RELEASE_STORE)")
    store = open_store(args.store)
    store.check_readable()  # a typo'd store is refused here, and nothing is created
    if args.command == "history":
        entries = [p.to_doc() for p in history(store, args.channel)]
        others = [c for c in store.channels() if c != args.channel] if not entries else []
        if others:  # most likely a typo: an empty answer would read as "never released"
            raise UserError(f"channel {args.channel!r} has no history in {store.uri}; its channels: "
                            f"{', '.join(sorted(others))}")
        return _flagged(entries, {c: p for c, p in pointer_problems(store).items() if c == args.channel})
    if args.command == "releases":
        releases = list_releases(store)
        return _flagged([r.to_dict() for r in releases], pointer_problems(store, releases))
    if args.command == "verify":
        release_id = _verify_target(args)
        if next(iter(store.backend.list(store.release_prefix(release_id))), None) is None:
            raise UserError(f"store {store.uri} holds no release {release_id!r} (nothing under "
                            f"{store.release_uri(release_id)}); `model-release store releases --store {store.uri}` "
                            "lists the releases it holds")
        report = verify_release(store, release_id, deep=args.deep)
        return report.to_dict(), 0 if report.ok else StoreError.exit_code
    if args.command == "rollback":
        follower = _follower(args.tracking_uri, args.mlflow_alias)
        return rollback(store, args.channel, args.release, follower=follower).to_dict(), 0
    if args.command == "retention":
        deleted = retention(store, args.keep, protect_days=args.protect_days, dry_run=args.dry_run)
        return {"deleted": deleted, "dry_run": args.dry_run}, 0
    if args.command == "repair-pointer":
        return repair_pointer(store, args.channel, args.release).to_dict(), 0
    if args.command == "page":
        return {"page": write_channel_page(store, args.channel)}, 0
    raise UserError(f"unknown command {args.command!r}")  # pragma: no cover - argparse refuses first


def _verify_target(args: argparse.Namespace) -> str:
    """``verify``'s release: ``--release ID`` (a positional id still works, with a warning, for one release)."""
    if args.release_positional is not None:
        if args.release is not None:
            raise UserError("give the release once: --release ID")
        print("model-release store verify: a positional release id is deprecated and goes in the next release; "
              "use --release ID", file=sys.stderr)
        args.release = args.release_positional
    if args.release is None:
        raise UserError("verify needs --release ID; `model-release store releases` lists them")
    return check_release_id(args.release)


def main(argv: list[str]) -> int:
    """Run ``model-release store`` with ``argv`` (the words after ``store``); returns the exit code."""
    if argv and argv[0] == "store":
        argv = argv[1:]
    try:
        args = _parser().parse_args(argv)
        out, code = _run(args)
    except ModelReleaseError as exc:
        print(one_line(f"model-release store: {exc}" if exc.kind in ("error", "user") else
                       f"model-release store: {exc.kind} error: {exc}"), file=sys.stderr)
        return exc.exit_code
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    if flags.wants_json(args):
        print(json.dumps(out, indent=2, sort_keys=True, default=str))
    else:
        print(text(args.command, out))
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
