#!/usr/bin/env bash
# `make fleet-test`: three Herald instances on one database under four faults (SIGKILLs during
# ingest and claims, a killed large-group fan-out, a primary failover to a synchronous standby,
# PgBouncer in transaction mode). Installs PostgreSQL and PgBouncer if missing, builds Herald in
# release mode, and runs scripts/fleet_test.py; about 2 minutes after the build. Not part of `make test`.
#   FLEET_ARGS="--only kill,failover"   run some faults only
#   FLEET_ARGS="--keep /tmp/fleet"      keep the clusters and the instances' logs
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh pgbouncer
swift build -c release --product herald
bin="$(swift build -c release --show-bin-path)/herald"
# shellcheck disable=SC2086
exec python3 scripts/fleet_test.py "$bin" ${FLEET_ARGS:-}
