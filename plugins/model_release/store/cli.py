"""``model-release store ...``: look at and operate a model store from a terminal.

Commands (each takes ``--store URI``, default ``$MODEL_RELEASE_STORE``)::

    history   --channel C              every move of a channel, oldest first
    releases                           every release, complete or not, and who points at it
    verify    RELEASE_ID [--deep]      check a release against its manifest (exit 5 when it fails, or
                                       when the store holds nothing of it: one line, no report)
    rollback  --channel C [--to ID] [--mlflow-tracking-uri URI] [--alias production]
    retention --keep N [--protect-days D] [--dry-run]
    repair-pointer --channel C --to ID point a damaged (or dangling) channel at a verified release
    page      --channel C              rewrite the channel's history page (channels/<C>.html)

Output is JSON on stdout; an error is one line on stderr and a non-zero exit code: 2 bad input,
4 the store failed, 5 the store holds something wrong (a release that does not verify; for
``history`` and ``releases``, a damaged pointer or one naming a missing release: the JSON is still
printed and the line on stderr says how to repair it). Nothing but ``rollback``, ``retention``,
``repair-pointer`` and ``page`` writes, and no command creates a store that is not there.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..errors import ModelReleaseError
from ..safe_text import one_line
from ..workspace import check_release_id
from .channels import repair_pointer, rollback
from .history_page import write_channel_page
from .model_store import open_store
from .pointer import history
from .registry import MlflowFollower
from .retention import PROTECT_DAYS_RANGE, list_releases, pointer_problems, retention, valid_protect_days
from .verify import verify_release


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _Usage(f"{self.prog}: {message}")


class _Usage(Exception):
    pass


class _NotHeld(Exception):
    """``verify`` of a release the store holds nothing of: one line, exit 5."""


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
    p = _Parser(prog="model-release store", description="Inspect and operate a model store.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def add(name: str, help_: str) -> argparse.ArgumentParser:
        s = sub.add_parser(name, help=help_)
        s.add_argument("--store", default=os.environ.get("MODEL_RELEASE_STORE"),
                       help="s3://BUCKET[/PREFIX] or file:///PATH (default $MODEL_RELEASE_STORE)")
        return s

    s = add("history", "every move of a channel")
    s.add_argument("--channel", default="production")
    add("releases", "every release in the store")
    s = add("verify", "check a release against its manifest")
    s.add_argument("release_id")
    s.add_argument("--deep", action="store_true", help="download and hash every object")
    s = add("rollback", "move a channel back to an earlier verified release")
    s.add_argument("--channel", default="production")
    s.add_argument("--to", dest="to_release", default=None)
    s.add_argument("--mlflow-tracking-uri", default=None, help="also move the MLflow alias")
    s.add_argument("--alias", default="production")
    s = add("retention", "delete releases nothing needs")
    s.add_argument("--keep", type=int, required=True, help="verified releases per channel's history to keep")
    s.add_argument("--protect-days", type=_days, default=7.0, help=f"keep anything younger: {PROTECT_DAYS_RANGE}")
    s.add_argument("--dry-run", action="store_true")
    s = add("repair-pointer", "point a damaged or dangling channel pointer at a verified release")
    s.add_argument("--channel", required=True)
    s.add_argument("--to", dest="to_release", required=True, help="a complete release (see `store releases`)")
    s = add("page", "rewrite a channel's history page (channels/<channel>.html)")
    s.add_argument("--channel", default="production")
    return p


def _flagged(out: Any, problems: dict[str, str]) -> tuple[Any, int]:
    """Print what the store holds, and one line on stderr for what is wrong with its pointers."""
    if not problems:
        return out, 0
    print(one_line("model-release store: store problem: "
                   + " | ".join(f"channel {c!r}: {p}" for c, p in problems.items())), file=sys.stderr)
    return out, 5


def _follower(tracking_uri: str | None, alias: str) -> MlflowFollower | None:
    """The registry follower of a rollback, its URI and alias checked before the pointer moves."""
    if tracking_uri is None:
        return None
    from ..mlflow_env import check_request_limits, check_tracking_uri
    from ..names import is_alias

    check_tracking_uri(tracking_uri)
    check_request_limits()
    if not is_alias(alias):
        raise _Usage(f"model-release store: --alias {alias!r} is not a valid MLflow alias (letters, digits, _ and -, "
                     "starting with a letter or _), for example production")
    return MlflowFollower(tracking_uri, alias=alias)


def _run(args: argparse.Namespace) -> tuple[Any, int]:
    if not args.store:
        raise _Usage("model-release store: --store is required (or set MODEL_RELEASE_STORE)")
    store = open_store(args.store)
    store.check_readable()  # a typo'd store is refused here, and nothing is created
    if args.command == "history":
        entries = [p.to_doc() for p in history(store, args.channel)]
        others = [c for c in store.channels() if c != args.channel] if not entries else []
        if others:  # most likely a typo: an empty answer would read as "never released"
            raise _Usage(f"model-release store: channel {args.channel!r} has no history in {store.uri}; its channels: "
                         f"{', '.join(sorted(others))}")
        return _flagged(entries, {c: p for c, p in pointer_problems(store).items() if c == args.channel})
    if args.command == "releases":
        releases = list_releases(store)
        return _flagged([r.to_dict() for r in releases], pointer_problems(store, releases))
    if args.command == "verify":
        check_release_id(args.release_id)
        if next(iter(store.backend.list(store.release_prefix(args.release_id))), None) is None:
            raise _NotHeld(f"model-release store: store {store.uri} holds no release {args.release_id!r} (nothing under "
                           f"{store.release_uri(args.release_id)}); `model-release store releases --store {store.uri}` "
                           "lists the releases it holds")
        report = verify_release(store, args.release_id, deep=args.deep)
        return report.to_dict(), 0 if report.ok else 5
    if args.command == "rollback":
        follower = _follower(args.mlflow_tracking_uri, args.alias)
        return rollback(store, args.channel, args.to_release, follower=follower).to_dict(), 0
    if args.command == "retention":
        deleted = retention(store, args.keep, protect_days=args.protect_days, dry_run=args.dry_run)
        return {"deleted": deleted, "dry_run": args.dry_run}, 0
    if args.command == "repair-pointer":
        return repair_pointer(store, args.channel, args.to_release).to_dict(), 0
    if args.command == "page":
        return {"page": write_channel_page(store, args.channel)}, 0
    raise _Usage(f"unknown command {args.command!r}")  # pragma: no cover - argparse refuses first


def main(argv: list[str]) -> int:
    """Run ``model-release store`` with ``argv`` (the words after ``store``); returns the exit code."""
    if argv and argv[0] == "store":
        argv = argv[1:]
    try:
        args = _parser().parse_args(argv)
        out, code = _run(args)
    except _Usage as exc:
        print(one_line(str(exc)), file=sys.stderr)
        return 2
    except _NotHeld as exc:
        print(one_line(str(exc)), file=sys.stderr)
        return 5
    except ModelReleaseError as exc:
        print(one_line(f"model-release store: {exc.kind} error: {exc}"), file=sys.stderr)
        return exc.exit_code
    print(json.dumps(out, indent=2, sort_keys=True, default=str))
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
