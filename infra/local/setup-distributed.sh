#!/usr/bin/env bash
# Idempotent set-up of what the distributed stack needs beyond .venv: Debian's Postgres and Redis
# servers (binaries only: no cluster is created or started here; the stack runs its own on free ports).
set -euo pipefail
say() { printf '[setup-distributed] %s\n' "$*" >&2; }
have() { ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && command -v redis-server >/dev/null; }
if have; then
  say "postgres and redis-server are installed"
  exit 0
fi
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
# no default cluster: the stack initialises its own data folder
$SUDO mkdir -p /etc/postgresql-common/createcluster.d
echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.d/model-release.conf >/dev/null
say "installing postgresql and redis-server from Debian (about a minute)"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends postgresql redis-server >/dev/null
# Debian starts the services it installs where it can: the stack needs none of them running
for svc in redis-server postgresql; do $SUDO service "$svc" stop >/dev/null 2>&1 || true; done
have && say "ready"
