#!/usr/bin/env bash
# Measures the inbox at scale: 1,000,000 threads, ~5,000,000 subscriptions, one user with 5,000
# threads. Builds Herald in release mode, makes a PostgreSQL cluster in a temporary folder, fills
# it with scripts/inbox-data.sql (about 4 minutes), then loads the first page and a deep page
# (after 4,000 rows) with wrk at 1, 4 and 16 connections and prints requests/s and the server's
# own p50/p99 (from its request log). Usage: scripts/inbox-bench.sh [threads] [subs_per_thread]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
command -v wrk >/dev/null || { apt-get install -y -qq wrk >/dev/null; }
swift build -c release --product herald >/dev/null
bin="$(swift build -c release --show-bin-path)/herald"
tmp=$(mktemp -d /tmp/herald-inbox-bench.XXXXXX)
log="$tmp/herald.log"
cleanup() { [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; scripts/pg.sh stop "$tmp/pg" >/dev/null 2>&1 || true; rm -rf "$tmp"; }
trap cleanup EXIT
scripts/pg.sh init "$tmp/pg"
scripts/pg.sh start "$tmp/pg"
url=$(scripts/pg.sh url "$tmp/pg")
DATABASE_URL=$url "$bin" migrate >/dev/null
echo "generating data…"
psql "$url" -q -v app=bench -v threads="${1:-1000000}" -v groups=10000 -v per_group=20 -v subs_per_thread="${2:-5}" \
     -v heavy_threads=5000 -f scripts/inbox-data.sql
psql "$url" -qc "VACUUM ANALYZE subscriptions"
key=$(DATABASE_URL=$url "$bin" keys create --app bench --role server | sed -n 's/.*"key":"\([^"]*\)".*/\1/p')
DATABASE_URL=$url HERALD_LISTEN=127.0.0.1:8181 HERALD_ADMIN_TOKEN=bench-admin-token-0000 "$bin" serve >> "$log" 2>&1 &
pid=$!
sleep 1
h=http://127.0.0.1:8181
cursor=""
for _ in 1 2 3 4; do
  cursor=$(curl -s "$h/v1/users/heavy/threads?limit=1000${cursor:+&cursor=$cursor}" -H "Authorization: Bearer $key" |
           python3 -c 'import json,sys; print(json.load(sys.stdin)["meta"]["next"])')
done
percentiles() {
  python3 - "$log" "$1" <<'PY'
import json, sys
d = []
for line in open(sys.argv[1], errors="ignore"):
    line = line.strip("\x00").strip()
    if '"route":"/v1/users/{uid}/threads"' in line:
        d.append(json.loads(line)["durationMs"])
d.sort()
print(f"{sys.argv[2]:<34} server p50 {d[len(d)//2]:6.2f} ms  p99 {d[int(len(d)*0.99)]:6.2f} ms  ({len(d)} requests)")
PY
}
for connections in 1 4 16; do
  for page in first deep; do
    query="limit=30"; [ "$page" = deep ] && query="limit=30&cursor=$cursor"
    : > "$log"
    rps=$(wrk -t"$(( connections > 1 ? 2 : 1 ))" -c"$connections" -d10s -H "Authorization: Bearer $key" "$h/v1/users/heavy/threads?$query" |
          sed -n 's/Requests\/sec: *//p')
    percentiles "$page page, $connections connection(s), $rps req/s"
  done
done
