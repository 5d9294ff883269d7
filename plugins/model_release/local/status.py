"""``model-release status``: what of the local stack is running, whether it answers, and the release DAG's runs.

``--wait`` waits until no run of the ``model_release`` DAG is queued or running, then says how the
runs it waited for ended: exit 0 when they all succeeded, 1 when one failed (with the failed tasks
and where their logs are).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

from .. import flags
from ..flags import Parser
from . import procs
from .http import AirflowApi, AirflowApiError, answers
from .webhook import SERVICE as WEBHOOK_SERVICE
from .stack_folder import AIRFLOW_USER, Layout, default_root
from .services import DAG_ID

ACTIVE = ("queued", "running")
#: the path whose answer tells that a service with a URL is up
HEALTH = {"s3": "/moto-api/", "mlflow": "/health", "airflow-api-server": "/api/v2/monitor/health"}


def health_url(name: str, url: str) -> str:
    """Where a service with ``url`` answers 200 when it is well: a serving Triton's readiness, the webhook
    receiver's /health beside its /webhook, the others' paths in :data:`HEALTH`."""
    if name.startswith("triton-"):  # tritonclient's form, host:port, or a URL
        return ("" if "://" in url else "http://") + url.rstrip("/") + "/v2/health/ready"
    if name == WEBHOOK_SERVICE:
        return url.rsplit("/", 1)[0] + "/health"
    return url + HEALTH.get(name, "/")


def _api(layout: Layout, state: dict[str, Any]) -> AirflowApi | None:
    url = (state.get("services", {}).get("airflow-api-server") or {}).get("url")
    password = (layout.read_json(layout.passwords) or {}).get(AIRFLOW_USER)
    return AirflowApi(url, AIRFLOW_USER, password) if url and password else None


def service_rows(state: dict[str, Any], api: AirflowApi | None) -> list[dict[str, Any]]:
    """Per service: its name, pid, URL, verdict (answering, healthy, or why not) and whether it is well."""
    try:
        health = api.health() if api else {}
    except AirflowApiError:
        health = {}
    rows = []
    for name, info in state.get("services", {}).items():
        alive = procs.alive(info.get("pid"))
        if not alive:
            verdict = f"NOT RUNNING; see {info.get('log')}"
        elif info.get("url"):
            code = answers(health_url(name, info["url"]))
            verdict = "answers" if code == 200 else f"does not answer ({code or 'no connection'})"
        else:
            component = name.removeprefix("airflow-").replace("-", "_")
            verdict = (health.get(component) or {}).get("status") or "health unknown"
        rows.append({"service": name, "pid": info.get("pid"), "url": info.get("url"), "verdict": verdict,
                     "ok": alive and verdict in ("answers", "healthy")})
    return rows


def service_lines(state: dict[str, Any], api: AirflowApi | None) -> tuple[list[str], bool]:
    """One line per service (pid, URL, answering or not); and whether all are well."""
    rows = service_rows(state, api)
    lines = [f"  {r['service']:<22} pid {r['pid']:<7} {r['url'] or '':<24} {r['verdict']}" for r in rows]
    return lines, all(r["ok"] for r in rows)


def dag_runs(api: AirflowApi, limit: int = 5) -> list[dict[str, Any]]:
    """The release DAG's latest runs, newest first."""
    return list(api.get(f"/api/v2/dags/{DAG_ID}/dagRuns?order_by=-run_after&limit={limit}").get("dag_runs", []))


def _run_line(run: dict[str, Any]) -> str:
    conf = json.dumps(run.get("conf") or {}, separators=(",", ":"))
    return f"  {run['dag_run_id']:<48} {run['state']:<8} conf {conf}"


def _quote(run_id: str) -> str:
    return urllib.parse.quote(run_id, safe="")


def wait_for_runs(api: AirflowApi, *, timeout: float, layout: Layout) -> int:
    """Wait for the queued and running DAG runs to end; 0 when they all succeeded, 1 when one did not."""
    waiting = [r["dag_run_id"] for r in dag_runs(api, 25) if r["state"] in ACTIVE]
    if not waiting:
        print(f"no run of {DAG_ID} is queued or running")
        return 0
    print(f"waiting for {len(waiting)} run(s) of {DAG_ID}: {', '.join(waiting)}", flush=True)
    deadline = time.monotonic() + timeout
    ended: dict[str, dict[str, Any]] = {}
    while time.monotonic() < deadline and len(ended) < len(waiting):
        time.sleep(1.0)  # one GET per run: a second's poll costs nothing, a 3 s one up to 3 s per wait
        for run_id in waiting:
            if run_id not in ended:
                try:
                    run = api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{_quote(run_id)}")
                except AirflowApiError as exc:
                    if exc.status is not None:
                        raise
                    continue  # a slow answer while tasks start: ask again
                if run["state"] not in ACTIVE:
                    ended[run_id] = run
                    print(_run_line(run), flush=True)
    if len(ended) < len(waiting):
        print(f"model-release status: runs still active after {timeout:.0f} s: {sorted(set(waiting) - set(ended))}", file=sys.stderr)
        return 1
    failed = [r for r in ended.values() if r["state"] != "success"]
    for run in failed:
        tis = api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{_quote(run['dag_run_id'])}/taskInstances").get("task_instances", [])
        bad = [t["task_id"] for t in tis if t.get("state") in ("failed", "upstream_failed")]
        print(f"model-release status: run {run['dag_run_id']} ended {run['state']}; failed tasks: {', '.join(bad) or 'none'}. "
              f"Their logs are under {layout.airflow_home / 'logs'} and in the Airflow UI.", file=sys.stderr)
    return 1 if failed else 0


def status_parser() -> argparse.ArgumentParser:
    from .up import ROOT_HELP

    parser = Parser(prog="model-release status", description="What of the local stack is running, and its latest runs.")
    parser.add_argument("--root", type=Path, default=None, help=ROOT_HELP)
    parser.add_argument("--wait", action="store_true", help=f"wait for the queued and running runs of {DAG_ID} to end")
    parser.add_argument("--timeout", type=float, default=1800, help="with --wait: seconds to wait (default 1800)")
    flags.add(parser, "json", help="print the services and the latest runs as JSON (text otherwise, in a pipe too)")
    return parser


def _status_json(layout: Layout, state: dict[str, Any] | None) -> int:
    """``status --json``: whether the stack runs, each service, the release DAG's latest runs."""
    running = bool(state) and procs.alive(state.get("pid"))
    doc: dict[str, Any] = {"root": str(layout.root), "running": running, "ready": bool(running and state.get("ready")),
                           "supervisor_pid": state.get("pid") if running else None,
                           "since": state.get("started") if running else None, "services": [], "runs": []}
    if running:
        api = _api(layout, state)
        doc["services"] = service_rows(state, api)
        if api is not None and state.get("ready"):
            try:
                doc["runs"] = [{k: run.get(k) for k in ("dag_run_id", "state", "conf")} for run in dag_runs(api)]
            except AirflowApiError as exc:
                doc["runs_error"] = str(exc)
    print(json.dumps(doc, indent=2, default=str))
    return 0 if running and all(r["ok"] for r in doc["services"]) else 1


def status_main(argv: list[str]) -> int:
    args = status_parser().parse_args(argv)
    layout = Layout(args.root or default_root())
    state = layout.read_json(layout.state_json)
    if args.json:
        return _status_json(layout, state)
    if not state or not procs.alive(state.get("pid")):
        print(f"the stack in {layout.root} is not running; start it with: model-release up")
        return 1
    api = _api(layout, state)
    print(f"the stack in {layout.root} is {'running' if state.get('ready') else 'starting'} "
          f"(supervisor pid {state['pid']}, since {state.get('started')})")
    lines, ok = service_lines(state, api)
    print("\n".join(lines))
    print(f"  env file: {layout.env_file}")
    if api is None or not state.get("ready"):
        return 0 if ok else 1
    try:
        runs = dag_runs(api)
        print(f"latest runs of {DAG_ID} ({len(runs)} shown, newest first):" if runs else f"no run of {DAG_ID} yet")
        for run in runs:
            print(_run_line(run))
        if args.wait:
            return wait_for_runs(api, timeout=args.timeout, layout=layout)
    except AirflowApiError as exc:
        print(f"model-release status: {exc}", file=sys.stderr)
        return 1
    return 0 if ok else 1
