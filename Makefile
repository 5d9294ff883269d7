# The two commands a new user needs: `make demo` and `make test`. Both set up what they need.
PY := .venv/bin/python

.PHONY: setup setup-distributed demo distributed-demo up down test test-fast bench lock clean

setup:
	@bash infra/local/setup.sh

setup-distributed: setup
	@bash infra/local/setup-distributed.sh

demo: setup
	$(PY) -m model_release.local.demo

# the distributed stack (Postgres, Redis, Celery workers, MLflow server, a separate Triton): one release through the REST API
distributed-demo: setup-distributed
	$(PY) -m model_release.local.distributed_demo

# the embedded stack as services that keep running (README, "Using it"); state under .work/stack
up: setup
	.venv/bin/model-release up --detach

down:
	@if [ -x .venv/bin/model-release ]; then .venv/bin/model-release down; fi

# Most tests in parallel (two workers per core, at most 4: the integration tests spend about a third
# of their time waiting on servers they started, so one worker per core left a 2-core machine 35%
# idle; a file stays on one worker, so its stack starts once), then the ones that time the load
# phase's windows, alone. Both
# parts always run; the first failure's exit code is the result (5 when a part ran no test).
# PYTHONDONTWRITEBYTECODE is cleared (as for test-fast, below): the hundreds of processes the tests
# start (Airflow tasks, DAG runs, the CLI) then read the project's bytecode instead of compiling it.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); w=$$((2 * n)); [ $$w -gt 4 ] && w=4; echo $$w)
test: setup-distributed
	@export PYTHONDONTWRITEBYTECODE=; $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not serial"; a=$$?; \
	$(PY) -m pytest -m serial; b=$$?; \
	if [ $$a -ne 0 ]; then exit $$a; fi; exit $$b

# The unit tests (no service), in parallel like make test: the loop to run while changing code.
# PYTHONDONTWRITEBYTECODE is cleared for it (where a shell sets it): each worker then reads the
# project's bytecode and pytest's rewritten test modules cached by the previous run (__pycache__,
# ignored by git) instead of compiling and rewriting all of them again, about 3 s of CPU a worker
test-fast: setup
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -n auto --maxprocesses 4 --dist loadfile -m "not integration and not dags and not distributed"

bench: setup
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

lock:
	.venv/bin/uv pip compile infra/local/requirements-in.txt -o requirements.lock --python-version 3.11 -q --no-emit-package model-release
	.venv/bin/uv pip compile infra/local/triton-runtime.in -o infra/local/triton-runtime.lock --python-version 3.11 -q

clean: down
	rm -rf .work
