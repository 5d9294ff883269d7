"""``model-release``: the pipeline for people at a terminal.

    model-release --version                                                the installed version
    model-release release SPEC [--alias A | --version N] [--no-promote]   all stages, in this process: at a terminal one
                                  line per stage and the canary's decision; JSON with --json or when piped
    model-release lint PATH [--json]                                       check a Triton repository
    model-release report REPORT.json                                       print a canary report
    model-release store {history,rollback,releases,verify,retention,repair-pointer} ...   the model store
    model-release rollback --store URI [--channel C] [--release ID]        move a channel back
    model-release demo                                                     four releases on the embedded stack
    model-release up [--detach] | down | status [--wait]                   the local stack as services
    model-release webhook-receiver --port N [--specs DIR]                  MLflow registry webhooks -> Airflow
    model-release rollout --channel C [--store URI] [--spec FILE | --no-watch]
                                                                           roll the channel out to its serving agents, watched
    model-release fleet status --channel C [--store URI]                   what each serving Triton serves, and drift
    model-release serve-agent --name N --channel C --triton-grpc H:P ...   the agent beside a serving Triton

Exit codes, the same on every command: 0 success, 1 failure, 2 bad input (spec, model, a flag, a release or
channel that does not exist, nothing to roll back), 3 blocked by a gate, 4 infrastructure (a service down,
a store that does not verify), 5 inconclusive (the canary or the watch could not decide: nothing promoted
or rejected; run it again later), 6 held (``release``: another live run, a DAG run or another terminal's, is
releasing that version; the line names it and when it started). Flags are one grammar
(model_release/flags.py): --store, --channel (default production), --release, --tracking-uri, --json on
every read.
An error is one line on stderr (credentials redacted, control characters escaped); ``--debug``
anywhere on the command line adds the traceback. ``MODEL_RELEASE_LOG_LEVEL`` sets the log level
(default INFO); ``MODEL_RELEASE_DEBUG_LOGGERS=botocore,urllib3`` lets those libraries log at DEBUG.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from . import flags, project_home
from .errors import ModelReleaseError, UserError
from .flags import Parser
from .safe_text import echo, one_line, redact, redact_tree

#: the largest report.json `report` reads (a canary report is a few hundred KiB)
MAX_REPORT_BYTES = 64 << 20
#: the deepest JSON `report` parses (a canary report nests about 6 levels)
MAX_REPORT_DEPTH = 64


def _endpoint(raw: str) -> str:
    """``--triton``: ``host:port`` with a port from 1 to 65535."""
    host, sep, port = raw.rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535 or any(c in host for c in "/@ \t"):
        raise argparse.ArgumentTypeError(f"{echo(raw)} is not HOST:PORT (a port from 1 to 65535), e.g. 127.0.0.1:8000")
    return raw


def _release_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="model-release release", description="Run every stage of a release in this process.")
    parser.add_argument("spec", help="release spec (YAML), e.g. releases/iris.yaml")
    pick = parser.add_mutually_exclusive_group()
    pick.add_argument("--alias", help="release the version this registry alias names, instead of the spec's model.alias")
    pick.add_argument("--version", type=int, help="release this model version instead of the alias")
    flags.add(parser, "release", help="name the release (default: <name>-<UTC time>-<hex>); refused when taken",
              old=("--release-id",))
    parser.add_argument("--workspace", help="workspace root (default $MODEL_RELEASE_WORKSPACE or ./.work/workspace)")
    flags.add(parser, "tracking_uri", help="the MLflow tracking URI (default $MLFLOW_TRACKING_URI, then the Airflow "
                                           "connection mlflow_default)")
    parser.add_argument("--mlflow-timeout", metavar="S",
                        help="seconds an MLflow request may wait (default $MLFLOW_HTTP_REQUEST_TIMEOUT or 8)")
    parser.add_argument("--mlflow-retries", metavar="N",
                        help="retries of a failed MLflow request (default $MLFLOW_HTTP_REQUEST_MAX_RETRIES or 2)")
    parser.add_argument("--triton", type=_endpoint, help="a running canary Triton host:port (default: start a local one)")
    parser.add_argument("--no-promote", action="store_true", help="stop after the canary")
    flags.add(parser, "json", help="print the outcome as JSON (what it prints when stdout is not a terminal)")
    parser.add_argument("--verbose", action="store_true",
                        help="every log record, third-party libraries' too (default at a terminal: one line per stage)")
    return parser


def _release(argv: list[str]) -> int:
    parser = _release_parser()
    args = parser.parse_args(argv)
    at_terminal = sys.stdout.isatty() and not args.json

    from .errors import CarriesResult
    from .logs import stage_lines
    from .mlflow_env import request_limits
    from .names import check_release_id
    from .pipeline import Services, release
    from .spec import load_spec
    from .workspace import Workspace, new_release_id

    quiet = stage_lines(verbose=args.verbose) if at_terminal or args.verbose else contextlib.nullcontext()
    with request_limits(args.mlflow_timeout, args.mlflow_retries), quiet:
        overrides = ({"model.version": args.version} if args.version is not None
                     else {"model.alias": args.alias} if args.alias is not None else None)
        spec = load_spec(args.spec, overrides=overrides)
        release_id = check_release_id(args.release) if args.release is not None else new_release_id(spec.name)
        ws = Workspace(release_id, args.workspace)
        services = Services(tracking_uri=_tracking_uri(args.tracking_uri), triton_endpoint=args.triton)
        try:
            outcome = release(spec, ws, services, promote=not args.no_promote)  # its preflight checks the rest
        except CarriesResult as exc:  # a rejected or inconclusive canary: its decision above the closing error line
            if at_terminal and exc.result is not None and getattr(exc.result, "report_json", None):
                _print_decision(exc.result.report_json, footer=f"outcome: {ws.path / 'outcome.json'}")
            raise
    if not at_terminal:
        _print_json(outcome.to_dict())
    elif outcome.canary is not None:
        _print_decision(outcome.canary.report_json, footer=f"outcome: {ws.path / 'outcome.json'} (--json prints it)")
    return 0


def _print_decision(report_json: str, *, footer: str = "") -> None:
    """The canary's decision block, as ``model-release report`` prints it, and where the report and outcome are."""
    data = read_report(report_json)
    print("\n" + _decision_text(data))
    html = Path(report_json).with_name("report.html")
    print("\nreport: " + str(html if html.is_file() else report_json) + (f" · {footer}" if footer else ""))


def _tracking_uri(flag: str | None) -> str:
    """The MLflow tracking URI from the flag, $MLFLOW_TRACKING_URI or Airflow's mlflow_default.

    Never MLflow's own default, which would create ./mlruns or ./mlflow.db in the current folder.
    The connection is looked up only where Airflow is configured ($AIRFLOW_HOME or the connection's variable).
    """
    uri = flag if flag is not None else os.environ.get("MLFLOW_TRACKING_URI")
    if uri is None and (os.environ.get("AIRFLOW_HOME") or os.environ.get("AIRFLOW_CONN_MLFLOW_DEFAULT")):
        from .airflow.hooks import MlflowHook
        from .errors import ServiceUnavailable

        try:
            uri = MlflowHook().tracking_uri()
        except ServiceUnavailable:
            uri = None
    if uri is None:
        raise UserError("no MLflow tracking URI: give one with --tracking-uri URI, the environment variable "
                        "MLFLOW_TRACKING_URI, or an Airflow connection mlflow_default (extra {\"tracking_uri\": URI}); "
                        "or start the local stack with `model-release up` and `source .work/stack/env`")
    return uri


def _report_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="model-release report", description="Print a canary report's decision: the verdict "
                    "and each gate as one line. Exit 0 when it passed, 3 when it was rejected, 5 when it was inconclusive.")
    parser.add_argument("report", help="report.json (from a workspace's canary/ or a store's reports/)")
    flags.add(parser, "json", help="print the whole report.json instead of the decision")
    return parser


def _report(argv: list[str]) -> int:
    parser = _report_parser()
    args = parser.parse_args(argv)
    data = read_report(args.report)
    if args.json:
        _print_json(data)
    else:
        print(_decision_text(data))
    return report_exit_code(data)


def _decision_text(report: dict[str, Any]) -> str:
    """A canary report's decision block for stdout (coloured at a terminal unless $NO_COLOR)."""
    from .canary.report.decision import terminal

    return terminal(report, colour=sys.stdout.isatty() and not os.environ.get("NO_COLOR"))


def read_report(raw: str) -> dict[str, Any]:
    """The canary report at ``raw`` (a report.json, or a folder holding one), checked to be one.

    Raises:
        UserError: it is missing, too large, not UTF-8 JSON, or not a canary report (a JSON
            object with a ``passed`` flag or a ``verdict``).
    """
    from .spec.loader import read_bounded_text

    shown = echo(raw, 200)
    if not raw:
        raise UserError("the report path is empty; pass a canary report.json")
    path = Path(raw)
    if path.is_dir():
        path, shown = path / "report.json", echo(str(path / "report.json"), 200)
    text = read_bounded_text(path, shown, limit=MAX_REPORT_BYTES, kind="a canary report",
                             advice="pass a canary report.json (from a workspace's canary/ or a store's reports/)")
    if _json_depth(text) > MAX_REPORT_DEPTH:
        raise UserError(f"{shown} nests deeper than {MAX_REPORT_DEPTH} levels, which no canary report does; "
                        "pass a canary report.json")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UserError(f"{shown} is not JSON ({exc}); pass a canary report.json") from None
    if not isinstance(data, dict):
        raise UserError(f"{shown} holds a JSON {type(data).__name__}, not a canary report (a JSON object with "
                        "'passed' and 'verdict'); pass a canary report.json")
    if not isinstance(data.get("passed"), bool) and not isinstance(data.get("verdict"), str):
        raise UserError(f"{shown} is not a canary report: it has neither a 'passed' flag nor a 'verdict'; "
                        "pass a canary report.json")
    missing = [key for key, kind in (("release_id", str), ("gates", list)) if not isinstance(data.get(key), kind)]
    if missing:
        raise UserError(f"{shown} is not a canary report: it has no {' and no '.join(repr(k) for k in missing)} "
                        "(every report the canary writes names its release and lists its gates); pass a canary report.json")
    failed = [str(g.get("name")) for g in data["gates"] if isinstance(g, dict) and g.get("passed") is False and not g.get("skipped")]
    if data.get("passed") is True and failed:
        raise UserError(f"{shown} says it passed, but its gates {', '.join(failed[:5])} failed: it was changed after "
                        "the canary wrote it; take the report from the release's canary/ folder or the store's reports/")
    return data


def _json_depth(text: str) -> int:
    """How deeply ``text``'s brackets nest, outside strings (counted without parsing)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def report_exit_code(report: dict) -> int:
    """0 when a canary report passed, 5 when it was inconclusive, 3 when it was rejected (the exit
    codes of :class:`~.errors.CanaryInconclusive` and :class:`~.errors.CanaryRejected`)."""
    from .canary.report.decision import verdict_of
    from .errors import CanaryInconclusive, CanaryRejected

    verdict = verdict_of(report)
    return 0 if verdict == "passed" else CanaryInconclusive.exit_code if verdict == "inconclusive" else CanaryRejected.exit_code


def _rollback(argv: list[str]) -> int:
    from .store.cli import main as store_main

    return store_main(["rollback", *argv])


def _store(argv: list[str]) -> int:
    from .store.cli import main as store_main

    return store_main(argv)


def _lint(argv: list[str]) -> int:
    from .repository.lint.cli import main as lint_main

    return lint_main(argv)


def _demo(argv: list[str]) -> int:
    from .local.demo import main as demo_main

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


def _webhook_parser() -> argparse.ArgumentParser:
    from .registry_events.signature import DEFAULT_TOLERANCE_S

    parser = Parser(prog="model-release webhook-receiver", description="MLflow's registry webhooks in, Airflow Asset "
                    "events out (the secret and the Airflow login from the environment).")
    parser.add_argument("--port", type=int, required=True, help="port on 127.0.0.1")
    parser.add_argument("--specs", type=Path, default=None,
                        help="the folder of release specs whose models' alias events start their scheduled DAGs "
                             "(default $MODEL_RELEASE_SPECS, else the project's releases/)")
    parser.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE_S,
                        help="seconds a delivery's timestamp may be off, either way")
    return parser


def _webhook_receiver(argv: list[str]) -> int:
    """MLflow's registry webhooks in, Airflow Asset events out (secret and Airflow login from the environment)."""
    from .local.http import AirflowApi
    from .registry_events.wiring import SECRET_ENV, run_receiver

    parser = _webhook_parser()
    args = parser.parse_args(argv)
    specs = args.specs or Path(os.environ.get("MODEL_RELEASE_SPECS") or project_home() / "releases")
    missing = [n for n in (SECRET_ENV, "AIRFLOW_URL", "AIRFLOW_USERNAME", "AIRFLOW_PASSWORD") if not os.environ.get(n)]
    if missing:
        raise UserError(f"webhook-receiver: {', '.join(missing)} not set; source the stack's env file "
                        "(model-release up writes it) or export them")
    env = os.environ
    return run_receiver(port=args.port, specs=specs, secret=env[SECRET_ENV], tolerance_s=args.tolerance,
                        api=lambda: AirflowApi(env["AIRFLOW_URL"], env["AIRFLOW_USERNAME"], env["AIRFLOW_PASSWORD"]))


def _rollout(argv: list[str]) -> int:
    from .serve.cli import rollout_main

    return rollout_main(argv)


def _fleet(argv: list[str]) -> int:
    from .serve.cli import fleet_main

    return fleet_main(argv)


def _serve_agent(argv: list[str]) -> int:
    from .serve.cli import agent_main

    return agent_main(argv)


COMMANDS = {"release": _release, "lint": _lint, "report": _report, "store": _store, "rollback": _rollback, "demo": _demo,
            "up": _up, "down": _down, "status": _status, "rollout": _rollout, "fleet": _fleet,
            "webhook-receiver": _webhook_receiver, "serve-agent": _serve_agent}


#: every command's parser, by the words that run it: the grammar test (tests/test_cli_grammar.py) and the CLI
#: reference (docs/reference/cli.md) read them; ``store`` stands for each of its subcommands
PARSERS = {
    "release": "model_release.cli:_release_parser",
    "report": "model_release.cli:_report_parser",
    "lint": "model_release.repository.lint.cli:parser",
    "store": "model_release.store.cli:_parser",
    "rollout": "model_release.serve.cli:rollout_parser",
    "fleet status": "model_release.serve.cli:fleet_status_parser",
    "serve-agent": "model_release.serve.cli:agent_parser",
    "demo": "model_release.local.demo:demo_parser",
    "up": "model_release.local.up:up_parser",
    "down": "model_release.local.up:down_parser",
    "status": "model_release.local.status:status_parser",
    "webhook-receiver": "model_release.cli:_webhook_parser",
}


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser by the words that run it (``store history``, ``fleet status``, ``release``)."""
    import importlib

    found: dict[str, argparse.ArgumentParser] = {}
    for words, target in PARSERS.items():
        module, _, name = target.partition(":")
        parser = getattr(importlib.import_module(module), name)()
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001 - argparse's own
        if subs:
            found.update({f"{words} {sub}": sub_parser for sub, sub_parser in subs[0].choices.items()})
        else:
            found[words] = parser
    found["rollback"] = found["store rollback"]  # `model-release rollback` is `store rollback`
    return found


def _print_json(data: Any) -> None:
    print(json.dumps(redact_tree(data), indent=2, default=str))


def _fail(command: str, message: str) -> None:
    print(f"model-release{' ' + command if command else ''}: {one_line(message)}", file=sys.stderr)


def _traceback() -> None:
    sys.stderr.write(redact(traceback.format_exc()))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get("MODEL_RELEASE_DEBUG", "") not in ("", "0")
    argv = [a for a in argv if a != "--debug"]
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if argv and argv[0] in ("-V", "--version"):
        from . import __version__

        print(f"model-release {__version__}")
        return 0
    if not argv or argv[0] not in COMMANDS:
        given = f"unknown command {echo(argv[0])}" if argv else "no command given"
        _fail("", f"{given}; valid: {', '.join(COMMANDS)}; see model-release --help")
        return 2
    command = argv[0]
    from . import collect_less
    from .logs import cli_logging

    collect_less()
    try:
        with cli_logging():
            return COMMANDS[command](argv[1:])
    except ModelReleaseError as exc:
        if debug:
            _traceback()
        _fail(command, str(exc))
        return exc.exit_code
    except SystemExit as exc:  # --help of a command
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except KeyboardInterrupt:
        _fail(command, "interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001 - never a traceback at a terminal; --debug shows it
        if debug:
            _traceback()
        _fail(command, f"unexpected {type(exc).__name__}: {exc}. This is a bug, or an input model-release does not "
                       "yet refuse by name: rerun with --debug for the traceback, and report it")
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
