"""`make distributed-demo`: the distributed stack on this machine, one release through Airflow's REST API.

Starts Postgres, Redis, the moto S3 server, the MLflow server, a separate Triton (the remote canary)
and Airflow (api-server, scheduler, dag-processor, triggerer, a CPU and a GPU Celery worker), trains
and registers an iris model, triggers ``model_release`` through the REST API, prints which worker
ran each task (from Airflow's records) and where the release is, then stops everything.

A demo, like :mod:`.demo` whose model it trains: both are entry points and live beside the stacks
they start (``local/``); no module but an entry point imports them.
"""

from __future__ import annotations

import logging
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    from .demo import train_iris
    from .distributed import BUCKET, DistributedStack
    from ..store import open_store, read_channel

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="model-release-distributed-"))
    t0 = time.monotonic()
    with DistributedStack(root) as stack:
        print(f"stack up in {time.monotonic() - t0:.0f} s: Airflow {stack.api_url}, MLflow {stack.tracking_uri}, "
              f"S3 {stack.moto.endpoint_url}, canary Triton {stack.triton.http_url}; logs in {root / 'logs'}")
        version = train_iris(stack.tracking_uri, c=1.0)
        stack.unpause("model_release")
        run_id = stack.trigger("model_release", {"spec": "releases/iris.yaml"})
        print(f"triggered model_release ({run_id}) for iris-classifier v{version} through the REST API")
        state = stack.wait_run("model_release", run_id)
        for task, ti in stack.task_instances("model_release", run_id).items():
            print(f"  {task:<10} {ti['state']:<8} on {ti['hostname']} (queue {ti['queue']}, try {ti['try_number']})")
        pointer = read_channel(open_store(f"s3://{BUCKET}/iris", s3_client=stack.moto.client()), "production")
        print(f"run {state}; channel production -> {pointer.release_id if pointer else None}")
        return 0 if state == "success" else 1


if __name__ == "__main__":
    sys.exit(main())
