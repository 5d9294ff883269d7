"""No stall: steady traffic's p99 during roll-outs against before, on one local Triton with its agent.

Run:  .venv/bin/python benchmarks/bench_rollout.py [--repeats 3] [--window-s 4] [--pause-s 0.01]

One serving Triton (the CPU fleet's: python backend, ONNX leaves through the onnxruntime shim) with its
serving agent, in a process of their own as the local stack runs them (model_release.local.fleet);
steady traffic to it from another process (two client threads each sending an 8-row request every
``--pause-s``, as tests/serve/support.BalancedLoop does: steady, not as fast as the machine allows,
and timed where no roll-out code holds the interpreter); the roll-out runs in this process, as on an
Airflow worker, with the spec's default warm-up (3 requests to each new version before the switch).
Each roll-out is compared with a window of the same traffic just before it. Releases are classifier
pipelines (an ONNX leaf, a python postprocess, the entry ensemble) assembled and promoted with the
product's own code; each new release changes both members, so each roll-out loads two models beside
the serving ones and re-pins the entry.
Printed, all from this one run:

1. the p99 (and max) of requests started in the windows just before each roll-out, and of requests
   started while a roll-out ran (``--repeats`` roll-outs, each to a new release), and the ratio during /
   before (goal: at most 1.5);
2. the roll-out's and the rollback's seconds per server (the rollback re-pins: both releases are loaded);
3. the same p99 during a reference burst: the CPU work of the python stubs one roll-out starts (a
   Python importing numpy and onnxruntime, as the ONNX leaf's stub does on this CPU-only runtime,
   then one importing numpy, as the postprocess's does), run as plain processes beside the server,
   no Triton involved, ``--repeats`` times; its ratio is what the same CPU alone costs this traffic
   on this machine, the part of the roll-out's ratio no agent can take away short of not starting
   the stubs;
4. why the agent loads over gRPC: one member version loaded beside the serving one through Triton's HTTP
   repository API, then through gRPC, each under the same traffic; how many requests started during
   each load and the longest request that overlapped it (on Triton 2.51 an HTTP load holds HTTP
   inference behind it for the whole load).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "plugins"))


def _p(latencies: list[float], q: float) -> float:
    import numpy as np

    return round(float(np.percentile(latencies, q)) * 1000, 2) if latencies else float("nan")


def _window(latencies: list[tuple[float, float]], t0: float, t1: float) -> list[float]:
    return [s for start, s in latencies if t0 <= start <= t1]


def _traffic(servers: list, releases: list, pause_s: float, stop, out) -> None:
    """The traffic process: a BalancedLoop until ``stop``; sends back every (start, seconds) and the counts."""
    from model_release.serve.fleet import Fleet
    from tests.serve.support import BalancedLoop

    fleet = Fleet("production", tuple(servers))
    with BalancedLoop(lambda: fleet, releases, threads=2, max_s=3600, pause_s=pause_s) as loop:
        out.send("started")
        stop.wait()
    out.send({"latencies": list(loop.latencies), "failures": loop.traffic.failures[:5], "failed": len(loop.traffic.failures),
              "mixed": len(loop.traffic.mixed), "answered": loop.traffic.total, "retried": len(loop.retried)})


def _releases(tmp: Path, store, n: int):
    from tests.serve.support import build_release, edit_postprocess

    def changed(i: int):  # a postprocess that differs in its bytes only: a new version of that member too
        return lambda models: edit_postprocess(models, "    def initialize(self, args):\n",
                                               f"    # release {i}\n    def initialize(self, args):\n")

    kinds = ["lr", "weak", "tree"]  # the only three classifiers the test support fits: releases repeat them
    return [build_release(tmp, store, kinds[i % 3], f"iris-b{i}", promote_it=i == 0, tweak=changed(i)) for i in range(n)]


def _burst(runtime_python: Path) -> None:
    """The CPU work of one roll-out's two new python stubs, without Triton: their imports, one after the other."""
    import subprocess

    from model_release.triton.local import STUB_THREADS_ENV

    env = {**os.environ, **STUB_THREADS_ENV}
    for imports in ("numpy, onnxruntime", "numpy"):
        subprocess.run([str(runtime_python), "-c", f"import {imports}"], env=env, check=True, start_new_session=True)


def _load_stall(fleet, window_s: float) -> dict[str, tuple[float, float]]:
    """One member load over HTTP, then over gRPC (the same load each time): when each ran."""
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    from google.protobuf import json_format

    from model_release.serve.server_repo import copy_version, write_model_config
    from model_release.repository.config import read_config

    server, repo = fleet.fleet.servers[0], fleet.root / "serve-1" / "models"
    grpc_url = json.loads((fleet.root / "serve-1" / "server.json").read_text())["grpc_url"]
    current = max(int(p.name) for p in (repo / "iris_model").iterdir() if p.is_dir() and p.name.isdigit())
    spare = current + 100
    out = {}
    for how in ("http", "grpc"):
        copy_version(repo, "iris_model", current, spare)
        config = read_config(repo / "iris_model" / "config.pbtxt")
        both = type(config)()
        both.CopyFrom(config)
        both.version_policy.specific.versions[:] = sorted({*config.version_policy.specific.versions, spare})
        write_model_config(repo, "iris_model", both)
        text = json_format.MessageToJson(both, preserving_proto_field_name=True)
        client = httpclient.InferenceServerClient(server.url, network_timeout=300) if how == "http" else \
            grpcclient.InferenceServerClient(grpc_url)
        time.sleep(window_s / 4)
        t0 = time.perf_counter()
        client.load_model("iris_model", config=text)
        t1 = time.perf_counter()
        back = json_format.MessageToJson(config, preserving_proto_field_name=True)
        write_model_config(repo, "iris_model", config)
        client.load_model("iris_model", config=back)  # the spare version unloaded again
        client.close()
        shutil.rmtree(repo / "iris_model" / str(spare), ignore_errors=True)
        out[how] = (t0, t1)
        time.sleep(window_s / 4)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="roll-outs, each to a new release")
    parser.add_argument("--window-s", type=float, default=4.0, help="seconds of steady traffic measured before each roll-out")
    parser.add_argument("--pause-s", type=float, default=0.01, help="seconds between one client thread's requests")
    args = parser.parse_args(argv)

    from model_release.local.fleet import LocalFleet
    from model_release.serve.rollout import roll_out
    from model_release.serve.warmup import WarmupRule
    from model_release.spec.serve import WarmupSpec
    from model_release.store.channels import rollback
    from model_release.triton.local import runtime_venv
    from tests.serve.support import CHANNEL, fast_options, local_store

    tmp = Path(tempfile.mkdtemp(prefix="bench-rollout-"))
    fleet = None
    try:
        store = local_store(tmp)
        releases = _releases(tmp, store, args.repeats + 1)
        fleet = LocalFleet(tmp / "serving", store=store.uri, count=1, poll_s=0.2)
        fleet.start()
        fleet.wait_ready()
        options = fast_options(warmup=WarmupRule(requests=WarmupSpec().requests))  # the spec's default warm-up
        rollout_s, rollback_s, steps, windows = [], [], [], []
        distinct = releases[:3]  # the releases' models repeat every three: each answer matches one of these
        context = multiprocessing.get_context("spawn")
        stop, (mine, theirs) = context.Event(), context.Pipe()
        traffic = context.Process(target=_traffic, args=(list(fleet.fleet.servers), distinct, args.pause_s, stop, theirs))
        traffic.start()
        assert mine.recv() == "started"
        time.sleep(args.window_s)  # warm: the first requests pay connections and lazy initialisation
        for release in releases[1:]:
            t0 = time.perf_counter()
            time.sleep(args.window_s)
            release.promote(store)
            t1 = time.perf_counter()
            record = roll_out(store, CHANNEL, options)
            windows.append(((t0, t0 + args.window_s), (t1, time.perf_counter())))
            rollout_s.append(record.servers[0].seconds)
            steps.append([f"{s.action} {s.model}" for s in record.servers[0].steps])
        rollback(store, CHANNEL)
        back = roll_out(store, CHANNEL, options)
        rollback_s.append(back.servers[0].seconds)
        bursts = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            time.sleep(args.window_s)
            t1 = time.perf_counter()
            _burst(runtime_venv() / "bin" / "python")
            bursts.append(((t0, t0 + args.window_s), (t1, time.perf_counter())))
        loads = _load_stall(fleet, args.window_s)
        stop.set()
        seen = mine.recv()
        traffic.join(timeout=60)
        lat = seen["latencies"]
        before = [x for (b, _) in windows for x in _window(lat, *b)]
        during = [x for (_, d) in windows for x in _window(lat, *d)]
        member = {how: {"load_s": round(t1 - t0, 3), "requests_started": len(_window(lat, t0, t1)),
                        "p99_ms": _p(_window(lat, t0, t1), 99), "longest_request_ms": _p(
                            [s for start, s in lat if start <= t1 and start + s >= t0], 100)}
                  for how, (t0, t1) in loads.items()}
        p99_before, p99_during = _p(before, 99), _p(during, 99)
        burst_before = [x for (b, _) in bursts for x in _window(lat, *b)]
        burst_during = [x for (_, d) in bursts for x in _window(lat, *d)]
        print(json.dumps({
            "p99_before_ms": p99_before, "p99_during_rollouts_ms": p99_during,
            "ratio_during_over_before": round(p99_during / p99_before, 2), "goal_at_most": 1.5,
            "within_goal": p99_during <= 1.5 * p99_before,
            "reference_burst": {"p99_before_ms": _p(burst_before, 99), "p99_during_bursts_ms": _p(burst_during, 99),
                                "ratio_during_over_before": round(_p(burst_during, 99) / _p(burst_before, 99), 2),
                                "requests_during_bursts": len(burst_during),
                                "burst_s": round(statistics.median(d[1] - d[0] for _, d in bursts), 3)},
            "max_before_ms": _p(before, 100), "max_during_rollouts_ms": _p(during, 100),
            "requests_before": len(before), "requests_during_rollouts": len(during),
            "rollout_s_per_server": round(statistics.median(rollout_s), 3), "rollback_s_per_server": rollback_s[0],
            "rollback_steps": [f"{s.action} {s.model}" for s in back.servers[0].steps], "rollout_steps": steps[0],
            "member_load_under_traffic": member, "failed_requests": seen["failed"], "first_failures": seen["failures"],
            "mixed_answers": seen["mixed"], "answered": seen["answered"],
            "repeats": args.repeats, "pause_s": args.pause_s, "machine_load_1min": os.getloadavg()[0], "cores": os.cpu_count(),
        }, indent=2))
    finally:
        if fleet is not None:
            fleet.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
