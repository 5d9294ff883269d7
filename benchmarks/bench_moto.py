"""The local S3 endpoint's CPU per request: model-release's moto launcher against moto's own server.

Run:  .venv/bin/python benchmarks/bench_moto.py [--requests 600] [--rounds 4]

Every S3 test and the embedded stack talk to a moto server, and on a 2-core machine the suite is
CPU-bound, so the server's CPU per request is paid by every test that touches the store. Two
servers run side by side on free ports, each in its own process:

- baseline: ``python -m moto.server`` (moto's own, as MotoServer ran it before);
- ours: ``python -m model_release.local.moto_process`` (moto's WSGI application, its writes one at
  a time so a conditional write is checked and stored as one step, moto's service list read once).

Each round sends the same mix to both, one after the other (PUT, HEAD and GET of small objects over
one boto3 client, sequentially), alternating which goes first; the server's CPU time comes from
``/proc/<pid>/stat``. Printed: milliseconds of server CPU per request for each (median over the
rounds) and ours over the baseline (target at most 1.0x: the lock must cost nothing).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))

from model_release.local.moto_process import ensure_bucket, s3_client  # noqa: E402
from model_release.local.ports import free_port  # noqa: E402

SERVERS = {
    "moto.server (baseline)": lambda port: [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
    "model_release moto_process": lambda port: [sys.executable, "-m", "model_release.local.moto_process", "--port", str(port)],
}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(cmd: list[str], url: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/moto-api/", timeout=1):
                return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"{' '.join(cmd)} exited with {proc.returncode} at start-up") from None
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"{' '.join(cmd)} did not answer within 60 s")


def one_round(client, requests: int) -> None:  # type: ignore[no-untyped-def]
    for i in range(requests // 3):
        key = f"obj-{i % 50}"
        client.put_object(Bucket="bench-moto", Key=key, Body=b"x" * 512)
        client.head_object(Bucket="bench-moto", Key=key)
        client.get_object(Bucket="bench-moto", Key=key)["Body"].read()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=600, help="requests per server per round")
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    if not Path("/proc/self/stat").exists():
        raise SystemExit("bench_moto reads a server's CPU time from /proc: run it on Linux")

    procs: dict[str, subprocess.Popen[bytes]] = {}
    clients = {}
    try:
        for name, cmd in SERVERS.items():
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            procs[name] = start(cmd(port), url)
            clients[name] = s3_client(url)
            ensure_bucket(url, "bench-moto", client=clients[name])
            one_round(clients[name], 30)  # warm: first-request imports are not per-request cost
        per_request: dict[str, list[float]] = {name: [] for name in SERVERS}
        names = list(SERVERS)
        for r in range(args.rounds):
            for name in names if r % 2 == 0 else reversed(names):
                pid = procs[name].pid
                before = cpu_seconds(pid)
                one_round(clients[name], args.requests)
                per_request[name].append(1000 * (cpu_seconds(pid) - before) / (args.requests // 3 * 3))
        print(f"server CPU per request (ms; median of {args.rounds} rounds of {args.requests // 3 * 3} requests):")
        for name in names:
            rounds = ", ".join(f"{v:.2f}" for v in per_request[name])
            print(f"  {name:<28} {statistics.median(per_request[name]):6.2f}   (rounds: {rounds})")
        ratio = statistics.median(per_request[names[1]]) / statistics.median(per_request[names[0]])
        print(f"ours / baseline: {ratio:.2f}x (target <= 1.0x) -> {'MET' if ratio <= 1.0 else 'NOT met'}")
        return 0
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    sys.exit(main())
