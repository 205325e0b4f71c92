#!/usr/bin/env bash
# `make citus-test` (issue 39): Herald on Citus 13.2 (docs/scaling.md). Builds and installs Citus
# from ../shared/citus if needed (scripts/citus-build.sh, cached under .build/citus), starts a
# coordinator and two workers (scripts/citus.sh) in a temporary folder, lays the schema out
# (`herald migrate` finds the citus extension), runs the integration suite against the
# coordinator, then scripts/citus_load.py: several apps under load while a third worker is added
# and the shards rebalanced, and nothing lost or duplicated. Not part of `make test`.
#   CITUS_TEST_ARGS="--filter InboxTests"   run only these tests (then no load)
#   CITUS_KEEP=1                             keep the cluster (its folder is printed)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
bash scripts/citus-build.sh
tmp=$(mktemp -d /tmp/herald-citus.XXXXXX)
cleanup() {
  bash scripts/citus.sh stop "$tmp/citus" >/dev/null 2>&1 || true
  if [ "${CITUS_KEEP:-0}" = 1 ]; then echo "kept: $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
export CITUS_PORT=${CITUS_PORT:-55430}
bash scripts/citus.sh start "$tmp/citus" 2
DATABASE_URL=$(bash scripts/citus.sh url "$tmp/citus")
export DATABASE_URL HERALD_TESTS_REQUIRE_DATABASE=1 HERALD_PG_SCRIPT="$PWD/scripts/pg.sh"
swift build --build-tests
swift build -c release --product herald
bin="$(swift build --show-bin-path)/herald"
scripts/venv.sh
export HERALD_TEST_PYTHON="${HERALD_VENV:-$PWD/.build/venv}/bin/python"
# The layout first, as a deployment's migrate step does before its instances start: the first
# layout sets plan_cache_mode for the database, which sessions opened before it do not see.
"$bin" migrate
started=$(date +%s)
if [ -n "${CITUS_TEST_ARGS:-}" ]; then
  # shellcheck disable=SC2086
  swift test --skip-build --disable-xctest ${CITUS_TEST_ARGS}
  exit 0
fi
swift test --skip-build --disable-xctest --skip HeavyTests
swift test --skip-build --disable-xctest --filter HeavyTests
echo "integration suite on Citus: $(( $(date +%s) - started )) s"
python3 scripts/citus_load.py "$(swift build -c release --show-bin-path)/herald" "$tmp/citus"
