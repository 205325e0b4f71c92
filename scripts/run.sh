#!/usr/bin/env bash
# `make run`: install what is missing, build in release mode, and serve Herald.
# Without DATABASE_URL, a local PostgreSQL cluster lives in .herald/pg (created on first run,
# reused after, stopped when Herald stops). Prints the admin token and demo app keys.
set -euo pipefail
cd "$(dirname "$0")/.."
state="${HERALD_STATE_DIR:-$PWD/.herald}"
mkdir -p "$state"

# One `make run` per folder: a second one would fail to bind and then stop the first one's
# database on its way out. The lock is held for as long as this script (and Herald) runs.
exec 9>"$state/run.lock"
if ! flock -n 9; then
  echo "Herald is already running from this folder (pid $(cat "$state/run.pid" 2>/dev/null || echo '?'));" \
       "stop it first (Ctrl-C in its terminal)." >&2
  exit 1
fi
echo $$ > "$state/run.pid"

scripts/deps.sh
swift build -c release --product herald
bin="$(swift build -c release --show-bin-path)/herald"


if [ -z "${DATABASE_URL:-}" ]; then
  scripts/pg.sh init "$state/pg"
  scripts/pg.sh start "$state/pg" 9>&-      # the server must not inherit (and keep) the run lock
  trap 'scripts/pg.sh stop "$state/pg"' EXIT
  DATABASE_URL=$(scripts/pg.sh url "$state/pg")
  export DATABASE_URL
fi
if [ -z "${HERALD_ADMIN_TOKEN:-}" ]; then
  [ -s "$state/admin-token" ] || (umask 077; od -An -tx1 -N24 /dev/urandom | tr -d ' \n' > "$state/admin-token")
  HERALD_ADMIN_TOKEN=$(cat "$state/admin-token")
  export HERALD_ADMIN_TOKEN
fi
export HERALD_LISTEN=${HERALD_LISTEN:-127.0.0.1:8080}
# The README's webhook walk-through delivers to a receiver on this machine, which built-in
# delivery refuses unless private addresses are allowed (SPEC §13.3); the banner says so.
export HERALD_DELIVERY_ALLOW_PRIVATE=${HERALD_DELIVERY_ALLOW_PRIVATE:-1}

scripts/demo.sh "$bin" "$state"
keys="$state/demo-keys"
key() { sed -n "s/^$1=//p" "$keys"; }

cat <<TXT

Herald is starting on http://$HERALD_LISTEN  (Ctrl-C stops it, and the local database)
  DATABASE_URL        $DATABASE_URL
  HERALD_ADMIN_TOKEN  $HERALD_ADMIN_TOKEN
  app                 demo
  server key          $(key server)
  ingest key          $(key ingest)
  worker key          $(key worker)
$([ "$HERALD_DELIVERY_ALLOW_PRIVATE" = 1 ] && echo "  delivery            HERALD_DELIVERY_ALLOW_PRIVATE=1: webhooks may go to this machine and private networks")

Try:  curl -s http://$HERALD_LISTEN/readyz
      curl -s http://$HERALD_LISTEN/v1/whoami -H "Authorization: Bearer $(key server)"
Console: http://$HERALD_LISTEN/console/  (sign in with the server key, or the admin token)

TXT
"$bin" serve
