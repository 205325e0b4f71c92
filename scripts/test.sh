#!/usr/bin/env bash
# `make test`: install what is missing, start a throwaway PostgreSQL cluster, check the operations
# files (scripts/ops-check.py), run the tests, then the contract tests (scripts/contract-test.sh: schemathesis against the live server) and the
# README's walk-throughs (scripts/readme_test.py), and
# stop the cluster on every exit path. Extra arguments go to `swift test` (e.g. --filter) and
# skip the contract tests, as does HERALD_SKIP_CONTRACT=1.
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
# The integration suites skip themselves without a database; under make test they must run.
export HERALD_TESTS_REQUIRE_DATABASE=1
export HERALD_PG_SCRIPT="$PWD/scripts/pg.sh"
swift build --build-tests
# The Python stand-ins for APNs, FCM and Web Push that the Swift tests start (direct delivery,
# checked by h2, http_ece and PyJWT) run in the test venv.
scripts/venv.sh
export HERALD_TEST_PYTHON="${HERALD_VENV:-$PWD/.build/venv}/bin/python"
# The operations files against the code (seconds): variables, the image's packages (ldd, dpkg -S),
# the /v1/me part of the OpenAPI file, the alert rules and the dashboard (promtool).
python3 scripts/ops-check.py "$(swift build --show-bin-path)/herald"
if [ $# -eq 0 ]; then
  swift test --skip-build --disable-xctest --skip HeavyTests
  # Issue 32's large transactions and long-poll crowds load both cores for minutes: they run
  # after the others, alone (Tests/HeraldSystemTests/HeavyTests.swift).
  swift test --skip-build --disable-xctest --filter HeavyTests
else
  swift test --skip-build --disable-xctest "$@"
fi
if [ $# -eq 0 ] && [ "${HERALD_SKIP_CONTRACT:-0}" != 1 ]; then
  HERALD_BIN="$(swift build --show-bin-path)/herald"
  export HERALD_BIN
  scripts/contract-test.sh
  # The README's walk-throughs, run as written against a fresh database and server.
  python3 scripts/readme_test.py
fi
