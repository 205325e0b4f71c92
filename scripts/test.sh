#!/usr/bin/env bash
# `make test`: install what is missing, start a throwaway PostgreSQL cluster, run the tests,
# and stop the cluster on every exit path. Extra arguments go to `swift test` (e.g. --filter).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
tmp=$(mktemp -d /tmp/herald-test.XXXXXX)
cleanup() {
  scripts/pg.sh stop "$tmp/pg" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
scripts/pg.sh init "$tmp/pg" fast
scripts/pg.sh start "$tmp/pg"
DATABASE_URL=$(scripts/pg.sh url "$tmp/pg")
export DATABASE_URL
export HERALD_PG_SCRIPT="$PWD/scripts/pg.sh"
swift build --build-tests
swift test --skip-build --disable-xctest "$@"
