#!/usr/bin/env bash
# Idempotent set-up of the two virtual environments this project needs on one machine:
#   .venv          the pipeline (Airflow, MLflow, onnx, tritonclient, boto3, moto, torch CPU, ...)
#   .venv-triton   the local Triton's runtime (nvidia-pytriton without deps, numpy<2, onnxruntime)
# A second run only checks the lock stamps and returns in about a second.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
PY=${PYTHON:-python3}
UV_VERSION=0.13.9
TORCH_VERSION=2.13.0
PYTRITON_VERSION=0.7.0

say() { printf '[setup] %s\n' "$*" >&2; }

stamp_of() { cat "$@" | sha256sum | cut -c1-16; }

# uv, unlike pip, installs no bytecode. Where PYTHONDONTWRITEBYTECODE is set, every interpreter would
# then compile Airflow, MLflow, scikit-learn, ... from source again: seconds per process, minutes over
# the tests (half of collecting `make test-fast`). Compiled once here, on all cores. A few files that are
# meant for another Python version (torch's py312 helpers) do not compile: that is expected and harmless.
# The packages' own test suites (a tests/ folder: pandas alone holds 1,143 files) are left out: nothing
# imports them, and they are 16% of the files (the pipeline venv: 25.7 s instead of 33.3 s on 2 cores);
# a module there that something does import is compiled when it is first imported, as without this.
# So are packages that no process of the pipeline or its tests imports (not one of their files was
# read in a whole `make test`; 11% of the files): setuptools, dnspython, moto's CloudFormation
# linter and its services other than S3 and those its server loads with it.
# One interpreter per 1,000 files, as many at a time as there are cores: `compileall -j 0` hands its
# workers one file at a time, and took 29.6 s (53 CPU-s) on 2 cores for the 20,095 files that this
# compiled in 19.7 s (38 CPU-s).
NEVER_IMPORTED='/site-packages/(setuptools|cfnlint|dns)/|/site-packages/moto/(?!core/|s3/|s3bucket_path/|moto_api/|moto_server/|utilities/|sts/|iam/|events/|cloudwatch/)[^/]+/'
compile_bytecode() {  # venv
  find "$1/lib" -name '*.py' -not -path '*/tests/*' -print0 \
    | NEVER_IMPORTED="$NEVER_IMPORTED" xargs -0 -n 1000 -P "$(nproc 2>/dev/null || echo 2)" "$1/bin/python" -c '
import os, py_compile, re, sys
never = re.compile(os.environ["NEVER_IMPORTED"])
for path in sys.argv[1:]:
    if not never.search(path):
        py_compile.compile(path, quiet=2)' >/dev/null 2>&1 || true
}

ensure_venv() {  # path [uv]: with "uv", made by .venv's uv, without pip (what uv pip sync would remove)
  if [ ! -x "$1/bin/python" ]; then
    say "creating $1"
    if [ "${2:-}" = uv ]; then
      .venv/bin/uv venv -q --python "$PY" "$1"
    else
      "$PY" -m venv "$1"
    fi
  fi
}

# The CPU wheel of torch where pip's find-links hold one (these machines: PIP_FIND_LINKS, or pip's
# config), for this venv's Python; nothing elsewhere.
torch_wheel() {
  local links tag dir wheel
  links=${PIP_FIND_LINKS:-$(.venv/bin/pip config get global.find-links 2>/dev/null || true)}
  tag=$(.venv/bin/python -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
  for dir in $links; do
    for wheel in "${dir#file://}"/torch-"$TORCH_VERSION"+cpu-"$tag"-"$tag"-*linux*_x86_64.whl; do
      if [ -f "$wheel" ]; then echo "$wheel"; return; fi
    done
  done
}

# --- the pipeline venv -------------------------------------------------------------------
ensure_venv .venv
if [ ! -x .venv/bin/uv ]; then
  say "installing uv $UV_VERSION into .venv"
  .venv/bin/pip install -q "uv==$UV_VERSION"
fi
want=$(stamp_of requirements.lock pyproject.toml setup.py infra/local/setup.sh)  # setup.py: the editable install's package map
if [ "$(cat .venv/.model-release-stamp 2>/dev/null)" != "$want" ]; then
  say "syncing .venv with requirements.lock (about 1 minute the first time)"
  # install (not sync): sync would remove torch, which is installed below
  VIRTUAL_ENV=$root/.venv .venv/bin/uv pip install -q --python .venv/bin/python -r requirements.lock
  VIRTUAL_ENV=$root/.venv .venv/bin/uv pip install -q --python .venv/bin/python --no-deps -e .
  # torch is not in the lock: by name, an index gives a multi-GB CUDA build. Where pip's find-links hold
  # the CPU wheel (these machines), uv installs that file: 3 s, and 0.2 s once uv's cache holds it,
  # where pip unpacked it in 14 s every time. Elsewhere pip installs it by name, as before. Skip with
  # MODEL_RELEASE_NO_TORCH=1.
  if [ "${MODEL_RELEASE_NO_TORCH:-0}" != 1 ] && ! .venv/bin/python -c "import torch" 2>/dev/null; then
    wheel=$(torch_wheel)
    if [ -n "$wheel" ]; then
      say "installing torch==$TORCH_VERSION (CPU build) from $(basename "$wheel")"
      VIRTUAL_ENV=$root/.venv .venv/bin/uv pip install -q --python .venv/bin/python "$wheel" \
        || say "torch could not be installed: pytorch export tests will be skipped"
    else
      say "installing torch==$TORCH_VERSION with pip"
      .venv/bin/pip install -q "torch==$TORCH_VERSION" || say "torch could not be installed: pytorch export tests will be skipped"
    fi
  fi
  # compiled in the background while the Triton runtime and Chromium install (downloads and unpacking);
  # the stamp is written once it is done, below, so an interrupted set-up compiles again next time
  say "compiling .venv's bytecode in the background (about 20 s on 2 cores)"
  setsid bash -c "NEVER_IMPORTED='$NEVER_IMPORTED'; $(declare -f compile_bytecode); compile_bytecode .venv" &
  compiling=$! venv_stamp=$want
  trap 'kill -- -"$compiling" 2>/dev/null || true' EXIT  # a failure or Ctrl-C below: no compiler left running
else
  say ".venv is up to date"
fi

# --- the local Triton's runtime venv ---------------------------------------------------------
ensure_venv .venv-triton uv
want=$(stamp_of infra/local/triton-runtime.lock infra/local/setup.sh)
if [ "$(cat .venv-triton/.model-release-stamp 2>/dev/null)" != "$want" ]; then
  say "syncing .venv-triton (numpy<2, onnxruntime, nvidia-pytriton==$PYTRITON_VERSION without deps)"
  VIRTUAL_ENV=$root/.venv-triton .venv/bin/uv pip sync -q --python .venv-triton/bin/python infra/local/triton-runtime.lock
  VIRTUAL_ENV=$root/.venv-triton .venv/bin/uv pip install -q --python .venv-triton/bin/python --no-deps "nvidia-pytriton==$PYTRITON_VERSION"
  compile_bytecode .venv-triton
  echo "$want" > .venv-triton/.model-release-stamp
else
  say ".venv-triton is up to date"
fi
# --- headless Chromium for the page tests ---------------------------------------------------------
# tests/e2e/test_report_pages.py (report.html and the channel page) and the README session test render
# pages in Debian's chromium. Installed with apt-get when /usr/bin/chromium is missing and this runs as
# root; elsewhere, say how (the tests install it themselves where they can, and skip with the reason
# where they cannot). Skip with MODEL_RELEASE_NO_CHROMIUM=1.
if [ "${MODEL_RELEASE_NO_CHROMIUM:-0}" != 1 ] && [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing chromium with apt-get (headless page tests)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q chromium >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } \
      || say "chromium could not be installed: the page tests will try again, or skip"
  else
    say "chromium is missing: run 'sudo apt-get install -y chromium' for the page tests"
  fi
fi
if [ -n "${compiling:-}" ]; then
  wait "$compiling"
  trap - EXIT
  echo "$venv_stamp" > .venv/.model-release-stamp
fi
say "ready: .venv (pipeline) and .venv-triton (local Triton runtime)"
