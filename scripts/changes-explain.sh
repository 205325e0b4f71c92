#!/usr/bin/env bash
# Shows that a change-feed page (SPEC §14) is one index range scan: a private PostgreSQL cluster,
# the schema, 200,000 changes of 400 users, then EXPLAIN (ANALYZE, BUFFERS) of the page query
# ChangeFeed.page runs, for a user in the middle of the feed.
#   bash scripts/changes-explain.sh
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'bash scripts/pg.sh stop "$dir/pg" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
bash scripts/pg.sh init "$dir/pg" fast >/dev/null
bash scripts/pg.sh start "$dir/pg" >/dev/null
url=$(bash scripts/pg.sh url "$dir/pg")
for file in sql/0*.sql sql/functions/*.sql; do psql "$url" -q -v ON_ERROR_STOP=1 -f "$file" >/dev/null 2>&1; done
psql "$url" -q -v ON_ERROR_STOP=1 <<'SQL'
INSERT INTO changes (app, uid, seq, at, kind, subject, flag)
SELECT 'a', 'u' || (i % 400), i, 1700000000000 + i, 'device', 'd' || i, false FROM generate_series(1, 200000) AS i;
ANALYZE changes;
SQL
psql "$url" -X <<'SQL'
PREPARE page(text, text, bigint, int) AS
SELECT c.seq, c.at, json_build_object('type', c.kind, 'deviceId', c.subject, 'removed', c.flag, 'at', c.at)::text
  FROM changes c WHERE c.app = $1 AND c.uid = $2 AND c.seq > $3 ORDER BY c.seq LIMIT $4;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE page('a', 'u7', 40000, 101);
SQL
