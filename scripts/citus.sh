#!/usr/bin/env bash
# A local Citus cluster for tests: a coordinator and workers, each a PostgreSQL 15 cluster in a
# folder under <dir>, on 127.0.0.1 (Citus nodes reach each other over TCP; trust on loopback).
#   scripts/citus.sh start <dir> [workers]   build/install Citus if needed, create and start the
#                                            coordinator and <workers> (default 2) workers, with
#                                            database "herald" and the extension on every node
#   scripts/citus.sh add-worker <dir>        create, start and add one more worker (prints its port)
#   scripts/citus.sh reset <dir>             drop database "herald" on every node and make it again, empty
#   scripts/citus.sh stop <dir>              stop every node
#   scripts/citus.sh url <dir>               the coordinator's DATABASE_URL
# Ports: CITUS_PORT (default 55430) is the coordinator's, workers take the next ones.
set -euo pipefail
command=${1:?usage: citus.sh start|add-worker|stop|url <dir> [workers]}
dir=$(mkdir -p "${2:?usage: citus.sh $command <dir>}" && cd "$2" && pwd)
here="$(cd "$(dirname "$0")/.." && pwd)"
base=${CITUS_PORT:-55430}
bin=/usr/lib/postgresql/15/bin
user=$( [ "$(id -u)" -eq 0 ] && echo postgres || id -un )
as_owner() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

node_sql() { # port sql
  "$bin/psql" -h 127.0.0.1 -p "$1" -U "$user" -d herald -v ON_ERROR_STOP=1 -qAtc "$2"
}

make_node() { # name port
  local name=$1 port=$2 d="$dir/$1"
  if [ ! -f "$d/data/PG_VERSION" ]; then
    bash "$here/scripts/pg.sh" init "$d" fast >/dev/null
    {
      echo "listen_addresses = '127.0.0.1'"
      echo "port = $port"
      echo "shared_preload_libraries = 'citus'"
      echo "max_prepared_transactions = 200"
      echo "max_connections = 300"
      echo "shared_buffers = 128MB"
      echo "wal_level = logical"            # shard moves use logical replication
      echo "max_replication_slots = 20"
      echo "max_wal_senders = 20"
      echo "citus.enable_unsafe_triggers = on"  # Herald's triggers run on the shards (docs/scaling.md)
      echo "citus.max_client_connections = 280"
    } | as_owner tee -a "$d/data/postgresql.conf" >/dev/null
  fi
  PGPORT=$port bash "$here/scripts/pg.sh" start "$d"
  node_sql "$port" "CREATE EXTENSION IF NOT EXISTS citus"
}

# Database "herald" on every node with the extension, the workers added to the coordinator's
# metadata (which lives in that database).
setup_db() {
  for d in "$dir"/worker* "$dir/coordinator"; do
    node_sql "$(cat "$d/port")" "CREATE EXTENSION IF NOT EXISTS citus"
  done
  node_sql "$base" "SELECT citus_set_coordinator_host('127.0.0.1', $base)" >/dev/null
  for d in "$dir"/worker*; do
    p=$(cat "$d/port")
    node_sql "$base" "SELECT citus_add_node('127.0.0.1', $p) WHERE NOT EXISTS (SELECT 1 FROM pg_dist_node WHERE nodeport = $p)" >/dev/null
  done
}

case "$command" in
  start)
    bash "$here/scripts/citus-build.sh" >/dev/null
    workers=${3:-2}
    make_node coordinator "$base"; echo "$base" > "$dir/coordinator/port"
    for i in $(seq 1 "$workers"); do
      make_node "worker$i" $((base + i)); echo $((base + i)) > "$dir/worker$i/port"
    done
    # a restart: start the workers added since
    for d in "$dir"/worker*; do PGPORT=$(cat "$d/port") bash "$here/scripts/pg.sh" start "$d"; done
    setup_db
    ;;
  reset)
    for d in "$dir"/worker* "$dir/coordinator"; do
      "$bin/psql" -h 127.0.0.1 -p "$(cat "$d/port")" -U "$user" -d postgres -qAtc "DROP DATABASE IF EXISTS herald WITH (FORCE)" >/dev/null
      "$bin/psql" -h 127.0.0.1 -p "$(cat "$d/port")" -U "$user" -d postgres -qAtc "CREATE DATABASE herald" >/dev/null
    done
    setup_db
    ;;
  add-worker)
    n=$(ls -d "$dir"/worker* 2>/dev/null | wc -l); i=$((n + 1)); p=$((base + i))
    make_node "worker$i" "$p" >/dev/null; echo "$p" > "$dir/worker$i/port"
    node_sql "$p" "CREATE EXTENSION IF NOT EXISTS citus"
    node_sql "$base" "SELECT citus_add_node('127.0.0.1', $p)" >/dev/null
    echo "$p"
    ;;
  stop)
    for d in "$dir"/worker* "$dir/coordinator"; do [ -d "$d" ] && bash "$here/scripts/pg.sh" stop "$d"; done
    ;;
  url)
    echo "postgresql://$user@127.0.0.1:$base/herald?application_name=herald"
    ;;
  *) echo "unknown command $command" >&2; exit 2 ;;
esac
