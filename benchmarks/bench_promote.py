"""Promotion throughput and no-op re-promotion cost, against one local moto S3 server.

Run:  .venv/bin/python benchmarks/bench_promote.py [--small 500] [--small-kib 4] [--big-mib 64]

1. Throughput: one release folder (``--small`` files of ``--small-kib`` KiB plus one ``--big-mib``
   MiB file) uploaded to the same moto server three ways, each into its own fresh bucket:
   ``promote()`` (local check, parallel upload with SHA-256 checksums, read-back verification,
   manifest, completion record and pointer move included), a sequential boto3 ``upload_file``
   loop, and ``aws s3 sync`` (awscli from PyPI, installed on first use into its own throwaway
   venv under ``.work/bench-awscli`` because it pins botocore differently). Prints MiB/s and the
   ratio of promote() to each baseline; the target is >= 1.0x of the faster baseline.
2. No-op re-promotion: a release already promoted is promoted again (nothing uploaded; the
   local folder is listed, the store's completion record and manifest read, the prefix listed
   and each object's size and ETag compared). Timed for N and 2N objects of 4 KiB and for N
   objects of 64 KiB: the cost should follow the number of objects (2N/N ~ 2, less a fixed part; medians of interleaved repeats)
   and not their bytes (64K/4K ~ 1).

All figures come from this one run on this machine; moto is a single Python process, so it is
the bottleneck for every client alike.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AWSCLI_VENV = ROOT / ".work" / "bench-awscli"


def build_release(root: Path, small: int, small_kib: int, big_mib: int) -> int:
    files = {}
    for i in range(small):
        files[f"models/m/1/data/f{i:05d}.bin"] = os.urandom(small_kib * 1024)
    if big_mib:
        files["models/m/1/model.onnx"] = os.urandom(big_mib * 1024 * 1024)
    files["models/m/config.pbtxt"] = b'name: "m"\nbackend: "python"\n'
    files["reports/report.json"] = b"{}"
    manifest = {"format": 1, "model": {"name": "m", "version": "1"}, "files": {}}
    total = 0
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        manifest["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        total += len(data)
    (root / "release.json").write_text(json.dumps(manifest))
    return total


def awscli() -> Path:
    aws = AWSCLI_VENV / "bin" / "aws"
    if not aws.exists():
        print(f"installing awscli into {AWSCLI_VENV} (first run only)...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(AWSCLI_VENV)], check=True)
        subprocess.run([str(AWSCLI_VENV / "bin" / "pip"), "install", "-q", "awscli"], check=True)
    return aws


def empty_bucket(client, bucket: str) -> None:  # type: ignore[no-untyped-def]
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})


def timed(fn) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", type=int, default=500)
    ap.add_argument("--small-kib", type=int, default=4)
    ap.add_argument("--big-mib", type=int, default=64)
    ap.add_argument("--noop-n", type=int, default=1000)
    ap.add_argument("--noop-repeats", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3, help="uploads per method; the best is reported")
    args = ap.parse_args()

    from model_release.local.moto_process import MotoServer, ensure_bucket
    from model_release.store import open_store, promote

    aws = awscli()
    work = Path(tempfile.mkdtemp(prefix="bench-promote-"))
    try:
        rel = work / "release"
        total = build_release(rel, args.small, args.small_kib, args.big_mib)
        nfiles = args.small + (1 if args.big_mib else 0) + 2
        mib = total / 2**20
        print(f"repository: {nfiles} files, {mib:.1f} MiB ({args.small} x {args.small_kib} KiB + {args.big_mib} MiB)")
        with MotoServer() as server:
            client = server.client()
            ensure_bucket(server.endpoint_url, "warmup", client=client)
            client.put_object(Bucket="warmup", Key="x", Body=b"x")
            paths = sorted(p for p in rel.rglob("*") if p.is_file())
            env = dict(os.environ, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                       AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)

            def run_promote(bucket: str) -> None:
                promote(rel, "bench-1", open_store(f"s3://{bucket}/store", s3_client=client), "production")

            def run_sequential(bucket: str) -> None:
                for p in paths:
                    client.upload_file(str(p), bucket, "seq/" + p.relative_to(rel).as_posix())

            def run_awscli(bucket: str) -> None:
                cmd = [str(aws), "s3", "sync", str(rel), f"s3://{bucket}/sync", "--endpoint-url", server.endpoint_url,
                       "--only-show-errors"]
                subprocess.run(cmd, env=env, check=True)
                listed = client.list_objects_v2(Bucket=bucket, Prefix="sync/").get("KeyCount", 0)
                assert listed == len(paths), f"aws s3 sync stored {listed} of {len(paths)} objects"

            # each method uploads into a fresh bucket; rounds interleave the methods so that any drift of
            # the server (memory growth) hits all of them alike; the best round of each is reported
            best = {"promote()": [], "boto3 upload_file loop": [], "aws s3 sync": []}
            for r in range(args.rounds):
                for name, fn in (("promote()", run_promote), ("boto3 upload_file loop", run_sequential),
                                 ("aws s3 sync", run_awscli)):
                    bucket = f"bench-{r}-{name.split()[0].strip('()').replace('_', '-').lower()}"
                    ensure_bucket(server.endpoint_url, bucket, client=client)
                    best[name].append(timed(lambda: fn(bucket)))
                    empty_bucket(client, bucket)  # untimed: keeps moto's memory (and speed) level between runs
            t_promote, t_seq, t_aws = (min(best[k]) for k in ("promote()", "boto3 upload_file loop", "aws s3 sync"))
            print("\nthroughput (MiB/s, higher is better):")
            for name, t in (("promote()", t_promote), ("boto3 upload_file loop", t_seq), ("aws s3 sync", t_aws)):
                print(f"  {name:<24} {t:7.2f} s  {mib / t:8.1f} MiB/s  {nfiles / t:8.1f} files/s"
                      f"   (rounds: {', '.join(f'{x:.2f}' for x in best[name])} s)")
            faster = min(t_seq, t_aws)
            print(f"  promote() vs sequential boto3: {t_seq / t_promote:.2f}x")
            print(f"  promote() vs aws s3 sync:      {t_aws / t_promote:.2f}x")
            ratio = faster / t_promote
            print(f"  promote() vs the faster baseline: {ratio:.2f}x (target >= 1.0x) -> {'MET' if ratio >= 1.0 else 'NOT MET'}")
            print("  (promote() also hashes the local files, checks every object's acknowledged SHA-256, lists the "
                  "prefix back, writes the manifest, the completion record and the pointer)")

            print("\nno-op re-promotion (nothing uploaded: completion record, manifest, a listing of the prefix):")
            cases = [("N x 4 KiB", args.noop_n, 4), ("2N x 4 KiB", 2 * args.noop_n, 4), ("N x 64 KiB", args.noop_n, 64)]
            prepared = []
            for label, n, kib in cases:
                d = work / f"noop-{n}-{kib}"
                build_release(d, n, kib, 0)
                rid = f"noop-{n}-{kib}"
                # a bucket per case: moto scans the whole bucket for every listing page, S3 does not
                ensure_bucket(server.endpoint_url, rid, client=client)
                store = open_store(f"s3://{rid}/store", s3_client=client)
                promote(d, rid, store, "production")
                prepared.append((label, n, kib, d, rid, store))
            samples: dict[str, list[float]] = {label: [] for label, *_ in cases}
            for _ in range(args.noop_repeats):  # interleaved, so drift hits every case alike
                for label, n, kib, d, rid, store in prepared:
                    result = promote(d, rid, store, "production")
                    assert result.uploaded == 0
                    samples[label].append(timed(lambda: promote(d, rid, store, "production")))
            times = {label: statistics.median(v) for label, v in samples.items()}
            for label, n, kib, *_ in prepared:
                print(f"  {label:<12} ({n + 2} objects, {n * kib / 1024:6.1f} MiB): median {times[label] * 1000:7.1f} ms, "
                      f"min {min(samples[label]) * 1000:7.1f} ms over {args.noop_repeats}")
            print(f"  2N / N time ratio:          {times['2N x 4 KiB'] / times['N x 4 KiB']:.2f} (object count x2; ~2 expected)")
            print(f"  64 KiB / 4 KiB time ratio:  {times['N x 64 KiB'] / times['N x 4 KiB']:.2f} (bytes x16; ~1 expected)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
