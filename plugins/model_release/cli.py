"""``model-release``: the pipeline for people at a terminal.

    model-release release SPEC [--alias A | --version N] [--no-promote]   all stages, in this process
    model-release lint PATH [--json]                                       check a Triton repository
    model-release report REPORT.json                                       print a canary report
    model-release store {history,rollback,releases,verify,retention,repair-pointer} ...   the model store
    model-release rollback --store URI --channel C [--to RELEASE]          move a channel back
    model-release demo                                                     three releases on the embedded stack
    model-release up [--detach] | down | status [--wait]                   the local stack as services

Exit codes: 0 success, 1 failure, 2 bad input (spec, model), 3 blocked by a gate, 4 infrastructure.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from .errors import ModelReleaseError


def _release(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="model-release release", description="Run every stage of a release in this process.")
    parser.add_argument("spec", help="release spec (YAML), e.g. releases/iris.yaml")
    pick = parser.add_mutually_exclusive_group()
    pick.add_argument("--alias", help="override model.alias")
    pick.add_argument("--version", type=int, help="release this model version instead of the alias")
    parser.add_argument("--release-id", help="name the release (default: <name>-<UTC time>-<hex>)")
    parser.add_argument("--workspace", help="workspace root (default $MODEL_RELEASE_WORKSPACE or ./.work/workspace)")
    parser.add_argument("--tracking-uri", help="MLflow tracking URI (default $MLFLOW_TRACKING_URI, then Airflow connection mlflow_default)")
    parser.add_argument("--triton", help="a running canary Triton host:port (default: start a local one)")
    parser.add_argument("--no-promote", action="store_true", help="stop after the canary")
    args = parser.parse_args(argv)

    from .pipeline import Services, release
    from .spec import load_spec
    from .workspace import Workspace, new_release_id

    overrides = {"model.version": args.version} if args.version else {"model.alias": args.alias} if args.alias else None
    spec = load_spec(args.spec, overrides=overrides)
    tracking_uri = _tracking_uri(args.tracking_uri)
    if tracking_uri is None:
        return 2
    ws = Workspace(args.release_id or new_release_id(spec.name), args.workspace)
    outcome = release(spec, ws, Services(tracking_uri=tracking_uri, triton_endpoint=args.triton), promote=not args.no_promote)
    print(json.dumps(outcome.to_dict(), indent=2, default=str))
    return 0


def _tracking_uri(flag: str | None) -> str | None:
    """The MLflow tracking URI from the flag, $MLFLOW_TRACKING_URI or Airflow's mlflow_default; else say how to give one.

    Never MLflow's own default, which would create ./mlruns or ./mlflow.db in the current folder.
    The connection is looked up only where Airflow is configured ($AIRFLOW_HOME or the connection's variable).
    """
    uri = flag or os.environ.get("MLFLOW_TRACKING_URI")
    if not uri and (os.environ.get("AIRFLOW_HOME") or os.environ.get("AIRFLOW_CONN_MLFLOW_DEFAULT")):
        from .airflow.hooks import MlflowHook
        from .errors import ServiceUnavailable

        try:
            uri = MlflowHook().tracking_uri()
        except ServiceUnavailable:
            uri = None
    if not uri:
        print("model-release: no MLflow tracking URI. Give one with --tracking-uri URI, the environment variable "
              "MLFLOW_TRACKING_URI, or an Airflow connection mlflow_default (extra {\"tracking_uri\": URI}); "
              "or start the local stack with `model-release up` and `source .work/stack/env`.", file=sys.stderr)
    return uri


def _report(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="model-release report", description="Print a canary report's verdict and figures.")
    parser.add_argument("report", help="report.json (from a workspace's canary/ or a store's reports/)")
    args = parser.parse_args(argv)
    path = Path(args.report)
    if path.is_dir():
        path = path / "report.json"
    if not path.is_file():
        print(f"model-release report: {str(path)!r} does not exist; pass a canary report.json", file=sys.stderr)
        return 2
    data = json.loads(path.read_text())
    print(json.dumps(data, indent=2))
    return 0 if report_passed(data) else 3


def report_passed(report: dict) -> bool:
    """Whether a canary report says the release passed: its ``passed`` flag, else its verdict."""
    if isinstance(report.get("passed"), bool):
        return report["passed"]
    return report.get("verdict") == "passed"


def _rollback(argv: list[str]) -> int:
    from .store.cli import main as store_main

    return store_main(["rollback", *argv])


def _store(argv: list[str]) -> int:
    from .store.cli import main as store_main

    return store_main(argv)


def _lint(argv: list[str]) -> int:
    from .repository.lint_cli import main as lint_main

    return lint_main(argv)


def _demo(argv: list[str]) -> int:
    from .demo import main as demo_main

    return demo_main(argv)


def _up(argv: list[str]) -> int:
    from .local.up import up_main

    return up_main(argv)


def _down(argv: list[str]) -> int:
    from .local.up import down_main

    return down_main(argv)


def _status(argv: list[str]) -> int:
    from .local.status import status_main

    return status_main(argv)


COMMANDS = {"release": _release, "lint": _lint, "report": _report, "store": _store, "rollback": _rollback, "demo": _demo,
            "up": _up, "down": _down, "status": _status}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print(__doc__.strip(), file=sys.stderr if argv and argv[0] not in ("-h", "--help") else sys.stdout)
        if argv and argv[0] not in ("-h", "--help"):
            print(f"\nmodel-release: unknown command {argv[0]!r}; valid: {', '.join(COMMANDS)}", file=sys.stderr)
            return 2
        return 0 if argv else 2
    logging.basicConfig(level=os.environ.get("MODEL_RELEASE_LOG_LEVEL", "INFO"), format="%(levelname)s %(name)s: %(message)s")
    try:
        return COMMANDS[argv[0]](argv[1:])
    except ModelReleaseError as exc:
        print(f"model-release {argv[0]}: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
